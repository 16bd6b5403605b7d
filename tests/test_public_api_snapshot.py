"""The public API (names and signatures of fabric_jev, fabric_jev.protocol and fabric_jev.testing)
changes only with notice: a change fails here until it is announced in CHANGELOG.md and the
snapshot regenerated (docs/contributing.md, "Changing the public API")."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.api_snapshot import changed_names, snapshot

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "tests" / "golden" / "public_api.txt"
REGENERATE = "FABRIC_JEV_REGENERATE_API=1 .venv/bin/python -m pytest tests/test_public_api_snapshot.py"


def unreleased_notes() -> str:
    """CHANGELOG.md's "Unreleased" section: where every change of the public API is announced."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    match = re.search(r"^## \[Unreleased\]\n(.*?)(?=^## \[)", text, re.S | re.M)
    assert match, "CHANGELOG.md has no '## [Unreleased]' section before the first release's"
    return match.group(1)


def unannounced(names: set[str], notes: str) -> list[str]:
    """The changed names that the notes do not mention (as `Name`, `Name.member` or `Name(...)`)."""
    return sorted(name for name in names if not re.search(rf"`{re.escape(name.rsplit('.', 1)[-1])}[`.(\[]", notes))


def test_the_public_api_matches_its_snapshot() -> None:
    current = snapshot()
    recorded = SNAPSHOT.read_text(encoding="utf-8") if SNAPSHOT.exists() else ""
    changed = changed_names(recorded, current)
    if os.environ.get("FABRIC_JEV_REGENERATE_API"):
        # The first snapshot announces nothing: it is the baseline later changes are told against.
        missing = unannounced(changed, unreleased_notes()) if recorded else []
        assert not missing, ("announce these changes in CHANGELOG.md under '## [Unreleased]' (name each "
                             f"in backticks) before regenerating: {', '.join(missing)}")
        SNAPSHOT.write_text(current, encoding="utf-8")
        return
    assert not changed, (f"the public API changed without notice: {', '.join(sorted(changed))}. Announce it in "
                         f"CHANGELOG.md under '## [Unreleased]', then regenerate: {REGENERATE}")


def test_a_change_is_found_and_must_be_announced() -> None:
    # The comparison itself: a renamed parameter, a removed name and an added one are each a change,
    # and only a note that names them announces them.
    old = "def fabric_jev.run_program(program, input=None)\nclass fabric_jev.Gone(object)\n"
    new = "def fabric_jev.run_program(program, value=None)\nclass fabric_jev.New(object)\n"
    changed = changed_names(old, new)
    assert changed == {"fabric_jev.run_program", "fabric_jev.Gone", "fabric_jev.New"}
    assert unannounced(changed, "- `run_program(program, value)`: renamed\n- `New` added") == ["fabric_jev.Gone"]


def test_every_deprecated_name_is_in_the_changelog() -> None:
    notes = unreleased_notes()
    for name in ("status", "host_status", "startedAt", "cancel="):
        assert name in notes, name
