"""docs/architecture.md, "Where a change goes": every path its tables name exists, and each change
of the first table touches at most two rooms (issue 34's goal for the layout)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Not rooms: what comes with any change (tests, docs, scripts), named in the "also" column.
NOT_ROOMS = {"tests", "docs", "scripts"}


def _section() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index("\n## Where a change goes\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end == -1 else text[start:end]


def _tables(section: str) -> list[list[list[str]]]:
    """Each markdown table of the section: its rows (header and rule left out), as cells."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in section.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        if current is None:
            current = []
            tables.append(current)
            continue  # the header
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not set("".join(cells)) <= set("-: "):
            current.append(cells)
    return tables


def _paths(cell: str) -> list[str]:
    """The file and folder paths a cell names in backticks (`CALL_KINDS` and the like are names)."""
    return [name for name in re.findall(r"`([^`\s]+)`", cell)
            if "/" in name or re.search(r"\.(py|json|js|ts|md|txt)$", name)]


def room(path: str) -> str:
    parts = path.rstrip("/").split("/")
    if parts[0] == "fabric_jev":
        if len(parts) == 2:
            name = parts[1].removesuffix(".py")
            if name == "__init__":
                return "fabric_jev"
            return "the base" if name == "errors" or name.startswith("_") else name
        return parts[1]
    if parts[0] == "connectors":
        return "/".join(parts[:2])
    return parts[0]


def test_a_path_names_its_room() -> None:
    assert room("fabric_jev/host/run.py") == room("fabric_jev/host/") == "host"
    assert room("fabric_jev/errors.py") == room("fabric_jev/_json.py") == "the base"
    assert room("fabric_jev/__init__.py") == "fabric_jev"
    assert room("fabric_jev/terminal.py") == "terminal"
    assert room("connectors/browser/fabric_jev_browser/connector.py") == "connectors/browser"
    assert room("runtime_js/jev.d.ts") == "runtime_js"


def test_every_path_the_tables_name_exists() -> None:
    tables = _tables(_section())
    assert len(tables) == 2, "the changes table, then the changes that still cross more rooms"
    named = [path for table in tables for row in table for cell in row[1:] for path in _paths(cell)]
    assert len(named) > 40
    missing = sorted({path for path in named if not (ROOT / path).exists()})
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_each_change_touches_at_most_two_rooms() -> None:
    changes, crossing = _tables(_section())
    assert len(changes) >= 15
    for change, code, *_ in changes:
        rooms = {room(path) for path in _paths(code)} - NOT_ROOMS
        assert rooms, f"{change!r} names no code"
        assert len(rooms) <= 2, f"{change!r} touches {len(rooms)} rooms: {sorted(rooms)}"
    for change, code, *_ in crossing:  # listed there because they do cross more: say so truly
        rooms = {room(path) for path in _paths(code)} - NOT_ROOMS
        assert len(rooms) > 2, f"{change!r} touches {sorted(rooms)}: move it to the first table"
