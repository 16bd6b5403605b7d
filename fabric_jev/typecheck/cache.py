"""Verdicts kept by digest: in memory for this process, on disk for the next one.

A digest covers everything a verdict depends on (the code, the generated
declarations — so the schemas, requires and whether the run is observed —,
the compiler's version and options, and this checker's version), so an entry
is never stale: a changed program is a new digest. A check that a cap stopped
is kept too (`Stopped`, with the caps it had), so a relaunch under the same
caps is answered at once instead of paying the whole cap again.

The disk is not trusted more than it must be. A verdict decides whether a
program runs, so whoever can write the folder could let any program through:
the folder must be a real folder (not a symlink) owned by this user and
writable by no one else, or it is not used at all; every entry carries a
keyed MAC (HMAC-SHA256 under a per-user key kept in the folder with mode
0600), and one whose MAC does not check is a miss, compiled and written
again. Entries are opened without following symlinks and without blocking
(a FIFO named like a verdict would otherwise hold the launch in `open()`),
and anything but a regular file is a miss. Entries are written whole (a
temporary file renamed over); the oldest are removed past MAX_DISK_ENTRIES.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import stat
from collections import OrderedDict
from pathlib import Path
from typing import Any

from .._files import atomic_write
from .._json import JSONInputError, loads_bounded
from .verdict import CompilerVerdict, Stopped

log = logging.getLogger("fabric_jev.typecheck")

MAX_MEMORY_ENTRIES = 512
MAX_DISK_ENTRIES = 4096
MAX_ENTRY_BYTES = 2 << 20
SUFFIX = ".verdict.json"
#: The MAC key's file inside the cache folder (mode 0600).
KEY_FILE = "verdicts.key"
_KEY_BYTES = 32
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

_memory: OrderedDict[str, CompilerVerdict | Stopped] = OrderedDict()


def remembered(digest: str) -> CompilerVerdict | None:
    """The verdict for `digest` this process has, if any (a remembered stop is not a verdict)."""
    found = _memory.get(digest)
    if found is None:
        return None
    _memory.move_to_end(digest)
    return found if isinstance(found, CompilerVerdict) else None


def remembered_stop(digest: str) -> Stopped | None:
    found = _memory.get(digest)
    return found if isinstance(found, Stopped) else None


def remember(digest: str, outcome: CompilerVerdict | Stopped) -> None:
    _memory[digest] = outcome
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


def folder_problem(folder: Path) -> str | None:
    """Why `folder` cannot hold verdicts (None: it can): it must be a folder, not a symlink,
    owned by this user and writable by no one else. A folder not made yet is no problem."""
    try:
        found = os.lstat(folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISLNK(found.st_mode):
        return "is a symlink"
    if not stat.S_ISDIR(found.st_mode):
        return "is not a folder"
    if found.st_uid != os.geteuid():
        return f"belongs to another user (uid {found.st_uid})"
    if found.st_mode & 0o022:
        return f"is writable by others (mode {stat.S_IMODE(found.st_mode):o})"
    return None


_warned: set[Path] = set()


def _usable(folder: Path) -> bool:
    problem = folder_problem(folder)
    if problem is not None and folder not in _warned:
        _warned.add(folder)
        log.warning("fabric-jev: the type-check cache folder %s %s; verdicts are not kept on disk", folder, problem)
    return problem is None


def _read_regular(path: Path, limit: int) -> bytes | None:
    """A regular file's first `limit`+1 bytes; None for anything else (absent, a FIFO, a device,
    a symlink). Never blocks: a FIFO is opened non-blocking and refused by its type."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _key(folder: Path, *, create: bool) -> bytes | None:
    """The folder's MAC key, made on first use (None: none, or not one of ours)."""
    path = folder / KEY_FILE
    raw = _read_regular(path, _KEY_BYTES)
    if raw is None and create:
        fresh = folder / f".{KEY_FILE}-{secrets.token_hex(8)}"
        with contextlib.suppress(OSError):
            fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, secrets.token_bytes(_KEY_BYTES))
            finally:
                os.close(fd)
            with contextlib.suppress(FileExistsError):
                os.link(fresh, path)  # whole or not at all; another process's key, made first, wins
        with contextlib.suppress(OSError):
            os.unlink(fresh)
        raw = _read_regular(path, _KEY_BYTES)
    if raw is None or len(raw) != _KEY_BYTES:
        return None
    try:
        found = os.lstat(path)
    except OSError:
        return None
    if found.st_uid != os.geteuid() or found.st_mode & 0o077:
        return None  # readable or made by someone else: a MAC under it proves nothing
    return raw


def _mac(key: bytes, digest: str, body: dict[str, Any]) -> str:
    material = json.dumps([digest, body], ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, material.encode("ascii"), hashlib.sha256).hexdigest()


def read_disk(folder: Path, digest: str) -> CompilerVerdict | Stopped | None:
    """What is stored for `digest`, or None (absent, unreadable, not ours or not a verdict). Blocking."""
    if not _usable(folder):
        return None
    data = _read_regular(folder / (digest + SUFFIX), MAX_ENTRY_BYTES)
    if data is None or len(data) > MAX_ENTRY_BYTES:
        return None
    key = _key(folder, create=False)
    if key is None:
        return None
    try:
        raw = loads_bounded(data, what="verdict", max_bytes=MAX_ENTRY_BYTES, max_depth=8)
        if not isinstance(raw, dict) or raw.get("digest") != digest or not isinstance(raw.get("mac"), str):
            return None
        body = {k: raw[k] for k in ("verdict", "stopped") if k in raw}
        if len(body) != 1 or not hmac.compare_digest(raw["mac"], _mac(key, digest, body)):
            return None
        if "stopped" in body:
            return Stopped.from_json(body["stopped"])
        return CompilerVerdict.from_json(body["verdict"])
    except (JSONInputError, ValueError):
        return None


def write_disk(folder: Path, digest: str, outcome: CompilerVerdict | Stopped) -> None:
    """Store a verdict or a stop; a folder that cannot be used only costs the next process a
    compile. Blocking."""
    with contextlib.suppress(OSError):
        if not folder.exists():
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _usable(folder):
            return
        key = _key(folder, create=True)
        if key is None:
            return
        body = {"stopped": outcome.to_json()} if isinstance(outcome, Stopped) else {"verdict": outcome.to_json()}
        atomic_write(folder / (digest + SUFFIX),
                     json.dumps({"digest": digest, **body, "mac": _mac(key, digest, body)}, ensure_ascii=True),
                     mode=0o600)
        _prune(folder)


def _prune(folder: Path) -> None:
    entries = [e for e in os.scandir(folder) if e.name.endswith(SUFFIX)]
    excess = len(entries) - MAX_DISK_ENTRIES
    if excess <= 0:
        return

    def mtime(entry: os.DirEntry[str]) -> float:
        try:
            return entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            return 0.0

    for entry in sorted(entries, key=mtime)[:excess]:
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
