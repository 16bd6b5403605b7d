"""Verdicts kept by digest: in memory for this process, on disk for the next one.

A digest covers everything a verdict depends on (the code, the generated
declarations — so the schemas, requires and whether the run is observed —,
the compiler's version and options, and this checker's version), so an entry
is never stale: a changed program is a new digest. A disk entry that cannot be
read or does not parse is a miss and is written again; entries are written
whole (a temporary file renamed over), and the oldest are removed past
MAX_DISK_ENTRIES.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import OrderedDict
from pathlib import Path

from .._files import atomic_write
from .._json import JSONInputError, loads_bounded
from .verdict import Verdict

MAX_MEMORY_ENTRIES = 512
MAX_DISK_ENTRIES = 4096
MAX_ENTRY_BYTES = 2 << 20
SUFFIX = ".verdict.json"

_memory: OrderedDict[str, Verdict] = OrderedDict()


def remembered(digest: str) -> Verdict | None:
    verdict = _memory.get(digest)
    if verdict is not None:
        _memory.move_to_end(digest)
    return verdict


def remember(digest: str, verdict: Verdict) -> None:
    _memory[digest] = verdict
    _memory.move_to_end(digest)
    while len(_memory) > MAX_MEMORY_ENTRIES:
        _memory.popitem(last=False)


def forget_all() -> None:
    """Empty this process's memory (the disk is left alone)."""
    _memory.clear()


def default_folder() -> Path:
    """$FABRIC_JEV_HOME/cache/typecheck if set, else $XDG_CACHE_HOME (~/.cache)/fabric-jev/typecheck."""
    home = os.environ.get("FABRIC_JEV_HOME")
    if home:
        return Path(home) / "cache" / "typecheck"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fabric-jev" / "typecheck"


def read_disk(folder: Path, digest: str) -> Verdict | None:
    """The verdict stored for `digest`, or None (absent, unreadable or not a verdict). Blocking."""
    path = folder / (digest + SUFFIX)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    try:
        raw = loads_bounded(data, what="verdict", max_bytes=MAX_ENTRY_BYTES, max_depth=8)
        if not isinstance(raw, dict) or raw.get("digest") != digest:
            return None
        return Verdict.from_json(raw.get("verdict"))
    except (JSONInputError, ValueError):
        return None


def write_disk(folder: Path, digest: str, verdict: Verdict) -> None:
    """Store a verdict; a folder that cannot be written only costs the next process a compile. Blocking."""
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(folder / (digest + SUFFIX),
                     json.dumps({"digest": digest, "verdict": verdict.to_json()}, ensure_ascii=False), mode=0o600)
        _prune(folder)


def _prune(folder: Path) -> None:
    entries = [e for e in os.scandir(folder) if e.name.endswith(SUFFIX)]
    excess = len(entries) - MAX_DISK_ENTRIES
    if excess <= 0:
        return

    def mtime(entry: os.DirEntry[str]) -> float:
        try:
            return entry.stat().st_mtime
        except OSError:
            return 0.0

    for entry in sorted(entries, key=mtime)[:excess]:
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
