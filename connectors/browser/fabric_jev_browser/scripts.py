"""The scripts the connector runs in a page, by name: runtime_js/frames.js in sections and
runtime_js/snapshot.js (read on first use), and the object group their remote objects live in."""

from __future__ import annotations

import itertools
import re

from fabric_jev.protocol import runtime_js

#: Remote objects made for one snapshot live in this group and are released after it.
GROUP = "fabric-jev-snapshot"


def _scripts(text: str) -> dict[str, str]:
    """runtime_js/frames.js by section: each `//# name` line starts one script, whose
    leading comment lines are left out (a function declaration must start the text)."""
    parts = re.split(r"^//# (\w+)\n", text, flags=re.MULTILINE)
    return {name: "\n".join(itertools.dropwhile(lambda line: line.startswith("//"),
                                                 body.strip().splitlines()))
            for name, body in zip(parts[1::2], parts[2::2], strict=True)}


_SCRIPTS = _scripts(runtime_js("frames.js"))
#: Installed at document start in every frame the tracker sets up (the DOM's quiet period).
QUIET_OBSERVER = _SCRIPTS["quietObserver"]
CLOSED_HOST_CANDIDATES = _SCRIPTS["closedHostCandidates"]
OWNER_INFO = _SCRIPTS["ownerInfo"]
OWNER_HITS = _SCRIPTS["ownerHits"]
TEXT_OF_FRAME = _SCRIPTS["textOfFrame"]

_SNAPSHOT: str | None = None


def snapshot_script() -> str:
    """runtime_js/snapshot.js, the walk of one document (read once, then kept)."""
    global _SNAPSHOT
    if _SNAPSHOT is None:
        _SNAPSHOT = runtime_js("snapshot.js").strip()
    return _SNAPSHOT


__all__ = ["CLOSED_HOST_CANDIDATES", "GROUP", "OWNER_HITS", "OWNER_INFO", "QUIET_OBSERVER", "TEXT_OF_FRAME",
           "snapshot_script"]
