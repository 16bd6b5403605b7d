"""Files on disk: atomic writes, and reads of a file a user named that always end.

Writes go to a temporary file renamed over the old one, so readers see the old
file or the whole new one, never a part.

Reads of a user-named file (a dataset, a program, a cassette, a config, a batch's
inputs) go through `open_regular`: the path is opened after following symlinks,
the type is taken from the opened descriptor (`fstat`, not a stat of the path that
another process could swap before the open), and anything but a regular file is
refused at once, naming the path and what it is: "a character device" (`/dev/zero`
would be read for ever), "a FIFO" (it waits for a writer, or streams without end),
"a socket", "a directory". The open does not block (`O_NONBLOCK`: opening a FIFO
with no writer would otherwise wait in `open()` for ever) and does not take a
terminal as the controlling one (`O_NOCTTY`). What is read is then bounded by the
reader's limits (`read_regular` for a whole file, `bounded_lines` for JSON Lines):
past a bound reading stops with the reader's error, and nothing read is used.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

#: Makes the reader's own exception from a one-line message (EvalError, BatchError, ...).
ErrorOf = Callable[[str], Exception]
#: How much of a line too long to keep is read at a time while it is skipped to its end.
_SKIP_BLOCK = 1 << 16
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def atomic_write(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Write to a temporary file in the same folder, then rename it over `path`.

    `mode` (e.g. 0o600) is applied before any data is written, so a secret is
    never readable under looser permissions.
    """
    import tempfile  # with shutil and the compression modules: only a write loads them

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


# ---------------------------------------------------------------- reading

def kind_of(mode: int) -> str:
    """What a file of this `st_mode` is, as a refusal names it ("a FIFO", "a directory", ...)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def not_regular(path: str | Path, label: str, mode: int) -> str:
    """The refusal of a path that is not a regular file: `cannot read LABEL: it is a FIFO, ...`.
    A symlink's target is named too (data.jsonl → /dev/zero)."""
    kind = kind_of(mode)
    where = ""
    if os.path.islink(path):
        target = os.path.realpath(path)
        if os.path.lexists(target):
            where = f" ({target})"
    if kind == "not a regular file":
        return f"cannot read {label}: it is not a regular file{where}"
    return f"cannot read {label}: it is {kind}{where}, not a regular file"


def open_regular(path: str | Path, *, label: str, error: ErrorOf) -> BinaryIO:
    """`path` opened for reading in binary, if it is a regular file once symlinks are followed.

    Refused with `error(message)` at once otherwise, and when it cannot be opened
    (`cannot read LABEL: No such file or directory`). Never waits: see the module doc.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        # A unix socket cannot be opened at all (ENXIO): say what it is rather than the errno's words.
        with contextlib.suppress(OSError):
            mode = os.stat(path).st_mode
            if stat.S_ISSOCK(mode):
                raise error(not_regular(path, label, mode)) from None
        raise error(f"cannot read {label}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(not_regular(path, label, mode))
        os.set_blocking(fd, True)  # a regular file: reads are ordinary again
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_within(path: str | Path, *, label: str, max_bytes: int, error: ErrorOf,
                too_large: Callable[[int], str] | None = None) -> BinaryIO:
    """`open_regular`, and refused by its size before anything is read: `too_large(size)` names
    it (by default `LABEL is larger than N bytes (SIZE bytes)`)."""
    f = open_regular(path, label=label, error=error)
    size = os.fstat(f.fileno()).st_size
    if size > max_bytes:
        f.close()
        raise error(too_large(size) if too_large else f"{label} is larger than {max_bytes} bytes ({size} bytes)")
    return f


def read_regular(path: str | Path, *, label: str, max_bytes: int, error: ErrorOf) -> bytes:
    """A regular file's bytes, refused by its size before it is read whole, and by what was
    read if it grew meanwhile (`LABEL is larger than N bytes`)."""
    with open_within(path, label=label, max_bytes=max_bytes, error=error) as f:
        try:
            raw = f.read(max_bytes + 1)
        except OSError as exc:
            raise error(f"cannot read {label}: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise error(f"{label} is larger than {max_bytes} bytes")
    return raw


def read_head(path: str | Path, *, label: str, max_bytes: int, error: ErrorOf) -> tuple[bytes, int]:
    """At most the first `max_bytes` of a regular file, and the file's size (for a sniff)."""
    with open_regular(path, label=label, error=error) as f:
        size = os.fstat(f.fileno()).st_size
        try:
            return f.read(max_bytes), size
        except OSError as exc:
            raise error(f"cannot read {label}: {exc.strerror or exc}") from None


class LineLimits(NamedTuple):
    """The bounds of a JSON Lines file: its size, one line's size, and how many lines (blank
    ones too) it may have."""

    max_bytes: int
    max_line_bytes: int
    max_lines: int


def bounded_lines(f: BinaryIO, *, label: str, limits: LineLimits, error: ErrorOf) -> Iterator[bytes | None]:
    """The lines of `f`, each with its newline (the last may have none), in order.

    A line longer than `max_line_bytes` is None: it is skipped to its end in blocks,
    never held whole, and the reader says what it makes of it. Past `max_bytes` read
    or `max_lines` lines, `error` is raised (`LABEL is larger than N bytes`, `LABEL has
    more than N lines`): reading stops there.
    """
    total = 0
    count = 0

    def taken(raw: bytes) -> None:
        nonlocal total
        total += len(raw)
        if total > limits.max_bytes:
            raise error(f"{label} is larger than {limits.max_bytes} bytes")

    try:
        while True:
            raw = f.readline(limits.max_line_bytes + 1)
            if not raw:
                return
            taken(raw)
            count += 1
            if count > limits.max_lines:
                raise error(f"{label} has more than {limits.max_lines} lines")
            if len(raw) > limits.max_line_bytes and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):
                    raw = f.readline(_SKIP_BLOCK)
                    taken(raw)
                yield None
                continue
            yield raw
    except OSError as exc:
        raise error(f"cannot read {label}: {exc.strerror or exc}") from None
