"""The package's import graph: no cycles, and the wire stays inside the sandbox.

Read from the source with `ast` (nothing is imported), so the test sees every
import: module-level, inside functions and under `TYPE_CHECKING`.
"""

from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "fabric_jev"


def _modules() -> dict[str, tuple[Path, bool]]:
    found: dict[str, tuple[Path, bool]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


def _imports(name: str, modules: dict[str, tuple[Path, bool]]) -> set[str]:
    path, is_package = modules[name]
    here = name.split(".") if is_package else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                # `from pkg import mod` depends on the module, `from mod import x` on mod.
                picked = sub if sub in modules else target
                if picked in modules and picked != name:
                    out.add(picked)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules and a.name != name)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, modules) for name in modules}


def _is_ancestor(package: str, module: str) -> bool:
    return module.startswith(package + ".")


def test_the_import_graph_has_no_cycle() -> None:
    # A package's __init__ re-exporting its own submodules is not a cycle of
    # dependencies between modules: those edges are left out.
    graph = {name: {d for d in deps if not _is_ancestor(name, d)} for name, deps in _graph().items()}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None


def test_the_reader_sees_imports_of_every_kind() -> None:
    graph = _graph()
    assert "fabric_jev.host.calls" in graph["fabric_jev.host.run"]
    assert "fabric_jev.typecheck.erasure" in graph["fabric_jev.host.run"]  # inside a function


WIRE_TAG = re.compile(r"""b["'][A-Z]["']""")


def test_no_module_outside_the_sandbox_knows_a_wire_tag() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name == "sandbox":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if WIRE_TAG.search(line):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert offenders == []


def test_only_the_sandbox_imports_the_wire() -> None:
    for name, deps in _graph().items():
        if not name.startswith("fabric_jev.sandbox."):
            assert "fabric_jev.sandbox._wire" not in deps, name
