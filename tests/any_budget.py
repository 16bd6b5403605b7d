"""Public functions whose signature names `typing.Any`: the count issue 42 keeps at most half.

Read from the source with `ast` (nothing is imported). A function is public when neither its own
name, the class it sits in, nor any part of its module path starts with an underscore; functions
nested in other functions are not counted. A signature "mentions" `Any` when an annotation of a
parameter or of the return names it anywhere (`dict[str, Any]` counts, so does a quoted
annotation); it is "bare" when a parameter or the return is annotated `Any` itself.

`tests/test_any_budget.py` compares what it finds with `tests/any_allowlist.txt`. Run it as a
script to print the counts and the entries the allowlist lacks or no longer needs::

    .venv/bin/python tests/any_budget.py
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The trees that are walked: the package and the connectors' packages.
SOURCES = (ROOT / "fabric_jev", ROOT / "connectors")
ALLOWLIST = ROOT / "tests" / "any_allowlist.txt"
#: Half of the 287 public functions issue 42 counted with `Any` in their signature.
BUDGET = 143


@dataclass(frozen=True)
class Found:
    """One public function whose signature mentions `Any`."""

    key: str  # "module:qualname"
    bare: bool


def _module_name(path: Path) -> str | None:
    """The dotted module name of a source file, or None when the file sits outside a package
    root we know (connectors/<name>/<package>/...)."""
    for source in SOURCES:
        if path.is_relative_to(source):
            relative = path.relative_to(source.parent if source.name == "fabric_jev" else source)
            parts = list(relative.with_suffix("").parts)
            if source.name == "connectors":
                parts = parts[1:]  # connectors/browser/fabric_jev_browser/x.py -> fabric_jev_browser.x
            if parts and parts[-1] == "__init__":
                parts.pop()
            return ".".join(parts) if parts else None
    return None


def _names_any(node: ast.expr | None) -> bool:
    if node is None:
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "Any":
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "Any":
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            # A quoted annotation, or a quoted part of one: parse it as an expression.
            try:
                inner = ast.parse(sub.value, mode="eval").body
            except SyntaxError:
                continue
            if _names_any(inner):
                return True
    return False


def _is_bare(node: ast.expr | None) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return False
    return (isinstance(node, ast.Name) and node.id == "Any") or (
        isinstance(node, ast.Attribute) and node.attr == "Any")


def _annotations(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.expr | None]:
    arguments = function.args
    for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
        yield argument.annotation
    if arguments.vararg is not None:
        yield arguments.vararg.annotation
    if arguments.kwarg is not None:
        yield arguments.kwarg.annotation
    yield function.returns


def _public_functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    def walk(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if not node.name.startswith("_"):
                    yield prefix + node.name, node
            elif isinstance(node, ast.ClassDef):
                if not node.name.startswith("_"):
                    yield from walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.If | ast.Try):
                # Definitions under `if TYPE_CHECKING:` or a version/import fallback.
                branches = [node.body, node.orelse]
                if isinstance(node, ast.Try):
                    branches += [handler.body for handler in node.handlers] + [node.finalbody]
                for branch in branches:
                    yield from walk(branch, prefix)
    yield from walk(tree.body, "")


def find() -> list[Found]:
    """Every public function or method whose signature mentions `Any`, sorted by key."""
    found: list[Found] = []
    for source in SOURCES:
        for path in sorted(source.rglob("*.py")):
            module = _module_name(path)
            if module is None or any(part.startswith("_") for part in module.split(".")):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for qualname, function in _public_functions(tree):
                annotations = list(_annotations(function))
                if any(_names_any(annotation) for annotation in annotations):
                    found.append(Found(f"{module}:{qualname}", any(_is_bare(a) for a in annotations)))
    return sorted(found, key=lambda item: item.key)


def read_allowlist(path: Path = ALLOWLIST) -> dict[str, str]:
    """The allowlist: `module:qualname  reason` a line; `#` starts a comment line. Each entry must
    give a reason, and appear once."""
    entries: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        key, _, reason = text.partition(" ")
        if ":" not in key:
            raise ValueError(f"{path.name}:{number}: expected 'module:qualname  reason', got {text!r}")
        if not reason.strip():
            raise ValueError(f"{path.name}:{number}: {key} has no reason")
        if key in entries:
            raise ValueError(f"{path.name}:{number}: {key} is listed twice")
        entries[key] = reason.strip()
    return entries


def main() -> int:
    found = find()
    keys = {item.key for item in found}
    listed = read_allowlist() if ALLOWLIST.exists() else {}
    print(f"public functions with Any in their signature: {len(found)} (bare: {sum(i.bare for i in found)});"
          f" budget {BUDGET}; allowlist {len(listed)}")
    for key in sorted(keys - listed.keys()):
        print(f"unlisted: {key}")
    for key in sorted(listed.keys() - keys):
        print(f"stale: {key}")
    if "--all" in sys.argv:
        for item in found:
            print(("bare " if item.bare else "     ") + item.key)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
