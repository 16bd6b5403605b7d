"""The batch's two files: the inputs (JSON Lines, read lazily) and the output log (append-only)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .._json import JSONInputError, loads_bounded
from ..errors import BatchError
from .records import MAX_LINE_BYTES, BatchItem, BatchOutcome, Key, parse_input_line

#: An output record is an envelope's result and error plus a few counts; results are ≤ 32 KiB.
MAX_RECORD_BYTES = 1_048_576
#: Counting reads this much at a time: a line is never held whole, however long.
_COUNT_BLOCK = 1 << 20


def _read_line(f: BinaryIO, limit: int) -> tuple[bytes, bool]:
    """Read one line of at most `limit` bytes; longer lines are skipped to their end, not held."""
    raw = f.readline(limit + 1)
    if len(raw) <= limit or raw.endswith(b"\n"):
        return raw, False
    while raw and not raw.endswith(b"\n"):
        raw = f.readline(65_536)
    return b"", True


def count_inputs(path: str | Path) -> int | None:
    """How many non-blank lines the inputs file has (for the progress bar's total).

    Counted in blocks of 1 MiB, so a line of any length (gigabytes without a
    newline) costs no more memory than a short one; the reader later skips it.
    None when the inputs are a pipe or a device: they can be read only once,
    and the run needs them.
    """
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            count = 0
            filled = False  # the line read so far has a non-blank byte
            while block := f.read(_COUNT_BLOCK):
                *ended, rest = block.split(b"\n")
                for piece in ended:
                    count += filled or bool(piece.strip())
                    filled = False
                filled = filled or bool(rest.strip())
            return count + filled
    except OSError as exc:
        raise BatchError(f"cannot read inputs {path}: {exc.strerror}") from None


def read_inputs(path: str | Path, *, id_field: str | None = None) -> Iterator[BatchItem]:
    """The inputs file, one item per non-blank line, numbered from 1; a bad line is a rejected item."""
    try:
        f = open(path, "rb")  # noqa: SIM115  (held open across yields)
    except OSError as exc:
        raise BatchError(f"cannot read inputs {path}: {exc.strerror}") from None
    seen: set[Key] = set()
    with f:
        number = 0
        while True:
            raw, too_long = _read_line(f, MAX_LINE_BYTES)
            if not raw and not too_long:
                return
            number += 1
            if too_long:
                yield BatchItem(line=number, key=number,
                                error=f"input line {number} is larger than {MAX_LINE_BYTES} bytes")
                continue
            if not raw.strip():
                continue
            item = parse_input_line(raw, number, id_field)
            if item.error is None and id_field is not None:
                if item.key in seen:
                    item = BatchItem(line=number, key=item.key,
                                     error=f"input line {number} repeats id {item.key!r}")
                seen.add(item.key)
            yield item


class OutputLog:
    """The output file: one JSON line per outcome, each appended with a single write.

    A line is written whole by one `write(2)` on an O_APPEND descriptor, so a
    killed batch leaves complete lines and at most one cut-off last line,
    which `--resume` drops and runs again. Lines are in the page cache as
    soon as they are written: they survive the batch being killed, not a
    power loss (no fsync per line).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def open(self, *, resume: bool) -> dict[Key, BatchOutcome]:
        """Open for appending; with `resume`, return the outcomes already recorded, by id.

        Only a regular file (or none yet) is accepted: a FIFO would block the
        open until a reader came, a device such as /dev/full cannot keep records.
        """
        earlier: dict[Key, BatchOutcome] = {}
        try:
            info = self.path.stat()
        except FileNotFoundError:
            info = None
        except OSError as exc:
            raise BatchError(f"cannot use output {self.path}: {exc.strerror}") from None
        if info is not None:
            self._refuse_unless_regular(info.st_mode)
        size = info.st_size if info is not None else 0
        if size and not resume:
            raise BatchError(f"output {self.path} already has records; pass --resume to continue it "
                             "or choose another --out")
        if size:
            earlier = self._recorded()
        try:
            # O_NONBLOCK: if a FIFO took the file's place since the check, the open fails at once.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK,
                         0o644)
        except OSError as exc:
            raise BatchError(f"cannot write output {self.path}: {exc.strerror}") from None
        try:
            self._refuse_unless_regular(os.fstat(fd).st_mode)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return earlier

    def _refuse_unless_regular(self, mode: int) -> None:
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
            raise BatchError(f"output {self.path} is {kind}; --out must be a regular file "
                             "(records are appended and read back by --resume)")

    def _recorded(self) -> dict[Key, BatchOutcome]:
        earlier: dict[Key, BatchOutcome] = {}
        keep = 0  # bytes up to the end of the last complete line
        try:
            with open(self.path, "rb") as f:
                number = 0
                while True:
                    raw, too_long = _read_line(f, MAX_RECORD_BYTES)
                    if too_long:
                        raise BatchError(f"output {self.path} line {number + 1} is larger than "
                                         f"{MAX_RECORD_BYTES} bytes; not resuming")
                    if not raw.endswith(b"\n"):
                        break  # end of file, or a line cut off by a kill: it runs again
                    number += 1
                    keep += len(raw)
                    try:
                        outcome = BatchOutcome.from_json(
                            loads_bounded(raw, what=f"output line {number}", max_bytes=MAX_RECORD_BYTES))
                    except (JSONInputError, ValueError) as exc:
                        raise BatchError(f"output {self.path} line {number} is not a batch record "
                                         f"({exc}); not resuming") from None
                    earlier.setdefault(outcome.id, outcome)
            if keep != self.path.stat().st_size:
                os.truncate(self.path, keep)
        except OSError as exc:
            raise BatchError(f"cannot read output {self.path}: {exc.strerror}") from None
        return earlier

    def append(self, outcome: BatchOutcome) -> None:
        if self._fd is None:
            raise BatchError("the output log is not open")
        data = (json.dumps(outcome.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            # A disk that filled up: lines already written stay whole; a cut-off one is dropped by --resume.
            raise BatchError(f"cannot write output {self.path}: {exc.strerror}; the records so far are "
                             "kept, rerun with --resume") from None

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.fsync(fd)
            except OSError as exc:
                raise BatchError(f"cannot write output {self.path}: {exc.strerror}") from None
            finally:
                os.close(fd)
