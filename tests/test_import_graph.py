"""The package's import graph: the layer table of docs/architecture.md, no cycles, the wire
inside the sandbox, connectors that use only public names, and the browser connector's own
layers (its table in docs/architecture.md).

Read from the source with `ast` (nothing is imported), so the test sees every
import: module-level, inside functions and under `TYPE_CHECKING`.
"""

from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "fabric_jev"
CONNECTORS = ROOT / "connectors"
BROWSER = CONNECTORS / "browser" / "fabric_jev_browser"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _modules(package: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    found: dict[str, tuple[Path, bool]] = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
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


def _graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    modules = _modules(package)
    return {name: _imports(name, modules) for name in modules}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


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


# ---------------------------------------------------------------- the layer table

def _room(module: str) -> str:
    """`fabric_jev.host.run` is in the room `host`; `fabric_jev.plugins` is a room of its own;
    `fabric_jev` (the package's __init__) too."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _rows() -> list[tuple[str, str]]:
    """The layer table under "## Layers": (rooms, may import) per row."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and "`" in cells[0]:
            rows.append((cells[0], cells[1]))
    return rows


def _names(cell: str) -> set[str]:
    """The rooms a cell names in backticks (before any parenthesis, which explains)."""
    return {name.rstrip("/") for name in re.findall(r"`([^`]+)`", cell.split("(")[0])}


def base() -> frozenset[str]:
    """The rooms every room may import: those the row that starts "the base:" names, and every
    private module at the top of the package (`fabric_jev._json`) without a row of its own."""
    found = [_names(rooms) for rooms, _ in _rows() if rooms.startswith("the base:")]
    assert len(found) == 1, "docs/architecture.md: the layer table needs one row that starts 'the base:'"
    named = {room for rooms, _ in _rows() if not rooms.startswith("the base:") for room in _names(rooms)}
    private = {name.split(".")[1] for name in _modules()
               if name.count(".") == 1 and name.split(".")[1].startswith("_")} - named
    return frozenset(found[0] | private)


def layer_table() -> dict[str, frozenset[str] | None]:
    """room -> the rooms it may import (None: everything), from the table under "## Layers"."""
    table: dict[str, frozenset[str] | None] = {}
    for rooms_cell, allowed_cell in _rows():
        allowed = None if allowed_cell == "everything" else base() | _names(allowed_cell)
        for room in _names(rooms_cell) | (base() if rooms_cell.startswith("the base:") else set()):
            assert room not in table, f"docs/architecture.md: {room} has two rows in the layer table"
            table[room] = allowed
    return table


def test_the_layer_table_names_every_room_of_the_package() -> None:
    table = layer_table()
    rooms = {_room(name) for name in _modules()}
    assert rooms - set(table) == set(), "add these rooms to the layer table in docs/architecture.md"
    assert set(table) - rooms - {"connectors"} == set(), "the layer table names rooms that do not exist"
    assert table["connectors"] is not None


def test_every_import_keeps_to_the_layer_table() -> None:
    table = layer_table()
    offenders = []
    for name, deps in _graph().items():
        allowed = table[_room(name)]
        if allowed is None:
            continue
        for dep in sorted(deps):
            if _room(dep) != _room(name) and _room(dep) not in allowed:
                offenders.append(f"{name} imports {dep}: {_room(name)} may import {', '.join(sorted(allowed))}")
    assert offenders == [], "\n".join(offenders)


def test_the_layer_table_is_read_as_written() -> None:
    table = layer_table()
    assert {"errors", "_json", "_waiting"} <= base() and table["errors"] == base()
    assert table["sandbox"] == base() | {"contract"} and table["cli"] is None and table["benchmarks"] is None
    assert table["plugins"] == base() | {"contract", "capabilities"}
    assert table["fabric_jev"] == table["_sync"]


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """room -> the other rooms its modules import."""
    rooms: dict[str, set[str]] = {}
    for name, deps in graph.items():
        rooms.setdefault(_room(name), set()).update(_room(d) for d in deps if _room(d) != _room(name))
    return rooms


def table_circle(rows: list[tuple[frozenset[str], frozenset[str] | None]]) -> list[str]:
    """A circle the table itself allows: rooms of one row are one layer, and a row that names a
    room of another may import it. A row that may import everything is the top: no row may name
    it. Empty when the rows stack."""
    layer = {room: number for number, (rooms, _) in enumerate(rows) for room in rooms}
    allowed = {str(number): {str(layer[r]) for r in (names or ()) if r in layer and layer[r] != number}
               for number, (_, names) in enumerate(rows)}
    tops = {str(number) for number, (_, names) in enumerate(rows) if names is None}
    named_tops = sorted(top for deps in allowed.values() for top in deps & tops)
    return _cycle(allowed) or [f"row {top} may import everything, and another row names it" for top in named_tops]


def _table_rows() -> list[tuple[frozenset[str], frozenset[str] | None]]:
    """(its rooms, what they may import) per row of the layer table."""
    table = layer_table()
    rows = []
    for rooms_cell, _ in _rows():
        rooms = frozenset(_names(rooms_cell) | (base() if rooms_cell.startswith("the base:") else set()))
        rows.append((rooms, table[next(iter(rooms))]))
    return rows


def test_the_rooms_import_each_other_in_no_circle() -> None:
    # Modules can be free of cycles while their rooms are not, and a circle of rooms is an import
    # back up the layers: what `farm-studio look` drew when plugins.py took `Connector` from
    # host/registry.py and host/host.py took `build_connector` from plugins.py.
    assert _cycle(room_graph(_graph())) == []


def test_the_layer_table_stacks_its_rooms() -> None:
    # With the table a stack, every import it allows runs down a layer: a new room's row cannot
    # let two rooms import each other (the rows of plugins and host once did).
    assert table_circle(_table_rows()) == []


def test_a_circle_of_rooms_or_of_rows_is_found() -> None:
    modules = {"fabric_jev.plugins": {"fabric_jev.host.registry"}, "fabric_jev.host.registry": set(),
               "fabric_jev.host.host": {"fabric_jev.plugins", "fabric_jev.host.registry"}}
    assert _cycle(modules) == []  # no cycle of modules ...
    assert set(_cycle(room_graph(modules))) == {"plugins", "host"}  # ... but one of rooms
    base_row, cli = frozenset({"errors"}), frozenset({"cli"})
    assert set(table_circle([(base_row, base_row), (frozenset({"plugins"}), frozenset({"errors", "host"})),
                             (frozenset({"host"}), frozenset({"plugins"})), (cli, None)])) == {"1", "2"}
    assert table_circle([(base_row, base_row), (frozenset({"mcp"}), frozenset({"cli"})), (cli, None)]) == [
        "row 2 may import everything, and another row names it"]


def test_no_module_shares_its_name_with_a_script() -> None:
    # `farm-studio look` read fabric_jev/cli/setup.py as the shell script scripts/setup, and drew
    # the CLI importing scripts/: a name both hold is one room to the structure tools.
    scripts = {path.name for path in (ROOT / "scripts").iterdir() if path.is_file()}
    assert "setup" in scripts
    sources = [*PACKAGE.rglob("*.py"), *CONNECTORS.rglob("*.py")]
    assert sorted(str(p.relative_to(ROOT)) for p in sources if p.stem in scripts) == []


# ---------------------------------------------------------------- connectors use only public names

def _exported(module: str) -> set[str] | None:
    """The names in `module`'s `__all__`, read from its source (None: no such module, or no
    `__all__` written as a list of strings)."""
    base = PACKAGE.parent.joinpath(*module.split("."))
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    if not path.is_file():
        return None
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            value = node.value
            if isinstance(value, ast.List | ast.Tuple) and all(isinstance(e, ast.Constant) for e in value.elts):
                return {str(e.value) for e in value.elts if isinstance(e, ast.Constant)}
    return None


def _is_public_module(module: str) -> bool:
    return not any(part.startswith("_") for part in module.split(".")) and _exported(module) is not None


def connector_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) for every import of fabric_jev in a connector's file; name None for
    `import fabric_jev.x`."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] == "fabric_jev":
                found += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names
                      if alias.name.split(".")[0] == "fabric_jev"]
    return found


def private_uses(path: Path, root: Path = ROOT) -> list[str]:
    out = []
    for line, module, name in connector_imports(path):
        where = f"{path.relative_to(root)}:{line}"
        if not _is_public_module(module):
            out.append(f"{where}: {module} is not a public module")
        elif name is not None and name not in (_exported(module) or set()) \
                and not _is_public_module(f"{module}.{name}"):
            out.append(f"{where}: {name} is not in {module}.__all__")
    return out


def test_connectors_use_only_public_names() -> None:
    files = sorted(CONNECTORS.glob("*/*/**/*.py"))
    assert any(p.name == "verification.py" for p in files), "the browser connector's sources were not found"
    offenders = [line for path in files for line in private_uses(path)]
    assert offenders == [], "\n".join(offenders)


def test_a_private_import_in_a_connector_is_found(tmp_path: Path) -> None:
    # What the browser connector did before: a private module, and names the core did not export,
    # inside a function as well as at the top.
    (tmp_path / "bad.py").write_text(
        "from fabric_jev._waiting import Waiter\n"
        "from fabric_jev.verification.dictionary import SeeOptions\n"
        "from fabric_jev.verification import PollOutcome, check_plan_fits\n"
        "def f():\n    import fabric_jev._json\n    from fabric_jev.protocol import Waiter\n")
    found = [line.split(": ", 1)[1] for line in private_uses(tmp_path / "bad.py", tmp_path)]
    assert found == ["fabric_jev._waiting is not a public module",
                     "fabric_jev.verification.dictionary is not a public module",
                     "check_plan_fits is not in fabric_jev.verification.__all__",
                     "fabric_jev._json is not a public module"]



# ---------------------------------------------------------------- the browser connector's layers

#: The issue-42 bound on a module's size, for the connector's modules.
MAX_MODULE_LINES = 600


def browser_layers() -> list[tuple[str, frozenset[str]]]:
    """(layer, its modules) per row of the table under "## The browser connector's layers",
    from the bottom layer up; `__init__` is the package itself."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("\n## The browser connector's layers\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and "`" in cells[1]:
            rows.append((cells[0], frozenset(re.findall(r"`([^`]+)`", cells[1]))))
    return rows


def _short(module: str) -> str:
    """`fabric_jev_browser.frames` -> `frames`; the package itself -> `__init__`."""
    return module.split(".", 1)[1] if "." in module else "__init__"


def layer_offenders(graph: dict[str, set[str]], layers: list[tuple[str, frozenset[str]]]) -> list[str]:
    """Every import that runs up the layers (to a row below in the table), and the modules no
    row names or two rows name."""
    level: dict[str, int] = {}
    out = []
    for number, (_, modules) in enumerate(layers):
        for module in sorted(modules):
            if module in level:
                out.append(f"{module} has two rows")
            level[module] = number
    for name in sorted(graph):
        if name not in level:
            out.append(f"{name} is in no row")
    for name, deps in sorted(graph.items()):
        for dep in sorted(deps):
            if name in level and dep in level and level[dep] > level[name]:
                out.append(f"{name} ({layers[level[name]][0]}) imports {dep} ({layers[level[dep]][0]}), "
                           "a layer above it")
    return out


def _browser_graph() -> dict[str, set[str]]:
    return {_short(name): {_short(d) for d in deps} for name, deps in _graph(BROWSER).items()}


def test_the_browser_layer_table_names_every_module_once() -> None:
    layers = browser_layers()
    assert [name for name, _ in layers][:5] == ["the base", "CDP transport", "page model",
                                                "queries and checks", "verification"]
    named = [m for _, modules in layers for m in modules]
    assert sorted(named) == sorted(_browser_graph()), "docs/architecture.md: the browser's layer table " \
        "must name each module of fabric_jev_browser once"


def test_the_browser_connector_imports_only_down_its_layers() -> None:
    graph = _browser_graph()
    assert "tab" in graph["verification"] and "verification" in graph["page"]  # the reader sees it
    assert layer_offenders(graph, browser_layers()) == []


def test_the_browser_connector_has_no_import_cycle() -> None:
    # The package's __init__ is the top layer: its edges to its own modules run down, and count.
    assert _cycle(_browser_graph()) == []


def test_no_module_of_the_browser_connector_is_over_the_bound() -> None:
    long = {path.name: n for path in BROWSER.glob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"split these along the layers (at most {MAX_MODULE_LINES} lines each)"


def test_an_upward_import_or_a_cycle_in_a_connector_is_found() -> None:
    # The browser connector before it was layered: the page model imported the checks and the
    # verification channels that stand on it, and the three made a circle.
    layers = [("transport", frozenset({"cdp"})), ("page model", frozenset({"page", "frames"})),
              ("checks", frozenset({"checks"})), ("verification", frozenset({"verification"}))]
    graph = {"cdp": set(), "frames": {"cdp"}, "page": {"frames", "checks", "verification"},
             "checks": {"page", "frames"}, "verification": {"checks", "page", "cdp"}}
    assert layer_offenders(graph, layers) == [
        "page (page model) imports checks (checks), a layer above it",
        "page (page model) imports verification (verification), a layer above it"]
    assert set(_cycle(graph)) >= {"page", "checks"}
    assert layer_offenders({"cdp": set(), "frames": {"cdp"}, "extra": set()},
                           [*layers, ("again", frozenset({"cdp"}))]) == [
        "cdp has two rows", "extra is in no row", "frames (page model) imports cdp (again), a layer above it"]


# ---------------------------------------------------------------- the host's size

#: The issue-42 bound on `JevHost`: its lifecycle and public API; what a run, its calls, its
#: admission and its scheduling do lives in host/'s other modules.
MAX_JEVHOST_LINES = 250


def class_lines(path: Path, name: str) -> int:
    """The lines of class `name` in `path`, from its `class` line (or first decorator) to its last."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef) and node.name == name:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            return (node.end_lineno or node.lineno) - first + 1
    raise AssertionError(f"{path.relative_to(ROOT)} defines no class {name}")


def test_jevhost_stays_small() -> None:
    lines = class_lines(PACKAGE / "host" / "host.py", "JevHost")
    assert lines <= MAX_JEVHOST_LINES, (f"JevHost is {lines} lines (at most {MAX_JEVHOST_LINES}): move a cohesive "
                                        "piece into a module of host/ named for what it holds")


def test_no_module_of_the_host_is_over_the_bound() -> None:
    long = {path.name: n for path in (PACKAGE / "host").glob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"split these (at most {MAX_MODULE_LINES} lines each)"


def test_class_lines_counts_a_class_whole(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x = 1\n@dec\nclass A:\n    '''doc'''\n\n    def f(self):\n        pass\n\ny = 2\n")
    assert class_lines(tmp_path / "m.py", "A") == 6
