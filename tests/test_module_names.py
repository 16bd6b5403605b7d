"""Module names say what they hold: a file name used in two rooms names the same kind of thing
in each, or it misleads a reader who knows the other (issue 34). The command line (`cli/`), the
benchmarks (`benchmarks/`) and the test helpers (`testing/`) name each module for the room, command
or suite it serves, so they repeat room names by design; a deprecated path that only forwards to
its new module (`moved_module`) is the old name kept for one minor release."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "fabric_jev"
#: Named for the room they serve.
MIRRORS = {"cli", "benchmarks", "testing"}
#: Each repeated name that stays, and why it does not mislead.
REPEATED = {
    "clients.py": "a room's per-client limits: serve's requests in flight, MCP's runs and compiler slots",
    "files.py": "a room's own files on disk: the batch's inputs and output log, an eval's folder",
    "records.py": "the lines of a room's JSON Lines output: a batch's outcomes, an eval's results",
    "server.py": "a room's server: MCP over stdio, the HTTP evaluator API on uvicorn",
    "status.py": "what a room reports for `status`: the host's runs, the evaluators' routes",
}


def _repeated() -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if path.name in ("__init__.py", "__main__.py") or relative.parts[0] in MIRRORS:
            continue
        if "moved_module(" in path.read_text(encoding="utf-8"):
            continue
        where[path.name].append(relative.as_posix())
    return {name: paths for name, paths in where.items() if len(paths) > 1}


def test_a_file_name_used_in_two_rooms_is_one_known_to_name_the_same_kind_of_thing() -> None:
    repeated = _repeated()
    unexplained = {name: paths for name, paths in repeated.items() if name not in REPEATED}
    assert not unexplained, (f"file names used in more than one room: {unexplained}; name each for what "
                             "it holds, or say in REPEATED why the name means the same in each")
    stale = set(REPEATED) - set(repeated)
    assert not stale, f"REPEATED lists names no longer repeated: {sorted(stale)}"


def test_the_renamed_modules_still_read_through_their_old_paths_with_a_warning() -> None:
    import importlib

    import pytest

    for old, new, name in (("fabric_jev.assertions.diff", "fabric_jev.assertions.snapshot_diff", "SnapshotDiff"),
                           ("fabric_jev.calibration.report", "fabric_jev.calibration.diagrams", "write_pngs"),
                           ("fabric_jev.verification.run", "fabric_jev.verification.replay", "run_verification")):
        module = importlib.import_module(old)
        with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated .* use {new}\.{name}"):
            value = getattr(module, name)
        assert value is getattr(importlib.import_module(new), name)
