"""Atomic file writes: readers see the old file or the whole new one, never a part."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Write to a temporary file in the same folder, then rename it over `path`.

    `mode` (e.g. 0o600) is applied before any data is written, so a secret is
    never readable under looser permissions.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def config_dir() -> Path:
    """fabric-jev's private folder: $FABRIC_JEV_HOME, else $XDG_CONFIG_HOME/fabric-jev."""
    home = os.environ.get("FABRIC_JEV_HOME")
    if home:
        return Path(home)
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "fabric-jev"
