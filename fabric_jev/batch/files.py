"""The batch's two files: the inputs (JSON Lines, read lazily) and the output log (append-only).

The inputs are a regular file, or standard input for "-" (a pipe: `zcat in.jsonl.gz |
fabric-jev batch ... --inputs -`). A path that is a device, a FIFO or a socket is refused
at once (`_files.open_regular`): `/dev/zero` would be read for ever, a FIFO waits for a
writer that may never come. Both are bounded: MAX_INPUTS_BYTES, MAX_INPUT_LINES lines,
and a line over MAX_LINE_BYTES is a rejected input, skipped without being held.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Hashable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Generic, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

from .._files import LineLimits, bounded_lines, kind_of, open_regular, open_within
from .._json import JSONInputError, loads_bounded
from ..contract.wire_model import WireModel
from ..errors import BatchError, JevError
from .records import MAX_LINE_BYTES, BatchItem, BatchOutcome, Key, parse_input_line

#: An output record is an envelope's result and error plus a few counts; results are ≤ 32 KiB.
MAX_RECORD_BYTES = 1_048_576
#: Counting reads this much at a time: a line is never held whole, however long.
_COUNT_BLOCK = 1 << 20
#: The most of the inputs read (a file, or a pipe on standard input): past it the batch stops.
MAX_INPUTS_BYTES = 64 << 30
#: The most lines of the inputs, blank ones included.
MAX_INPUT_LINES = 100_000_000
_INPUT_LIMITS = LineLimits(max_bytes=MAX_INPUTS_BYTES, max_line_bytes=MAX_LINE_BYTES, max_lines=MAX_INPUT_LINES)
#: "-" names standard input.
STDIN = "-"
T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


def _read_line(f: BinaryIO, limit: int) -> tuple[bytes, bool]:
    """Read one line of at most `limit` bytes; longer lines are skipped to their end, not held."""
    raw = f.readline(limit + 1)
    if len(raw) <= limit or raw.endswith(b"\n"):
        return raw, False
    while raw and not raw.endswith(b"\n"):
        raw = f.readline(65_536)
    return b"", True


def _open_inputs(path: str | Path) -> BinaryIO:
    """The inputs file, if it is a regular file within MAX_INPUTS_BYTES (BatchError otherwise)."""
    return open_within(path, label=f"inputs {path}", max_bytes=MAX_INPUTS_BYTES, error=BatchError)


def count_inputs(path: str | Path) -> int | None:
    """How many non-blank lines the inputs file has (for the progress bar's total).

    Counted in blocks of 1 MiB, so a line of any length (gigabytes without a
    newline) costs no more memory than a short one; the reader later skips it.
    None for standard input ("-"): a pipe can be read only once, and the run
    needs it. A path that is not a regular file is refused here, at once.
    """
    if str(path) == STDIN:
        return None
    with _open_inputs(path) as f:
        try:
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
    """The inputs file ("-": standard input), one item per non-blank line, numbered from 1;
    a bad line is a rejected item. Past MAX_INPUTS_BYTES or MAX_INPUT_LINES, BatchError."""
    stdin = str(path) == STDIN
    # Standard input through a reader of its own (a copy of descriptor 0), not sys.stdin: a read
    # still waiting in a daemon thread at exit would otherwise hold sys.stdin's lock as Python
    # shuts down, and the interpreter aborts.
    label = "inputs on standard input" if stdin else f"inputs {path}"
    f: BinaryIO
    if stdin:
        try:
            f = os.fdopen(os.dup(0), "rb")
        except OSError as exc:  # no standard input at all
            raise BatchError(f"cannot read {label}: {exc.strerror}") from None
    else:
        f = _open_inputs(path)
    seen: set[Key] = set()
    with f:
        for number, raw in enumerate(bounded_lines(f, label=label, limits=_INPUT_LIMITS, error=BatchError), 1):
            if raw is None:
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


@contextlib.asynccontextmanager
async def read_in_thread(items: Iterable[T]) -> AsyncIterator[AsyncIterator[T]]:
    """`items` as an async iterator whose every `next` is taken in a daemon thread, one when asked.

    For inputs that can wait (a pipe whose writer is slow, a FIFO that has no
    writer yet): the event loop goes on meanwhile, so runs that end are
    recorded and a signal stops the batch; a read still waiting when the
    batch ends does not hold the process's exit. An exception of `items`
    is raised by the iterator.
    """
    token = anyio.lowlevel.current_token()
    send, receive = anyio.create_memory_object_stream[tuple[bool, Any]](1)
    asked = threading.Semaphore(0)
    stopped = threading.Event()

    def deliver(message: tuple[bool, Any]) -> None:  # in the event loop's thread
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            send.send_nowait(message)

    def produce() -> None:
        iterator = iter(items)
        while True:
            asked.acquire()
            if stopped.is_set():
                return
            message: tuple[bool, Any]
            try:
                message = (True, next(iterator))
            except StopIteration:
                message = (False, None)
            except Exception as exc:  # raised where the items are read
                message = (False, exc)
            try:
                anyio.from_thread.run_sync(deliver, message, token=token)
            except Exception:  # the event loop has ended: nobody reads any more
                return
            if not message[0]:
                return

    async def taken() -> AsyncGenerator[T, None]:
        while True:
            asked.release()
            more, value = await receive.receive()
            if not more:
                if value is not None:
                    raise value
                return
            yield value

    threading.Thread(target=produce, name="fabric-jev batch inputs", daemon=True).start()
    source = taken()
    try:
        yield source
    finally:
        stopped.set()
        asked.release()  # a thread waiting to be asked ends now; one inside a read, after it
        await source.aclose()
        send.close()
        receive.close()


class AppendLog(Generic[K, R]):
    """A file of JSON records, one a line, each appended with a single write.

    A line is written whole by one `write(2)` on an O_APPEND descriptor, so a
    killed run leaves complete lines and at most one cut-off last line, which
    `--resume` drops and runs again. Lines are in the page cache as soon as
    they are written: they survive the process being killed, not a power loss
    (no fsync per line). `parse` reads a line back (ValueError naming the
    field for anything else) with the key it is resumed by; `error` is the
    error each problem is raised as, `what` names a record in its messages.
    """

    def __init__(self, path: str | Path, *, parse: Callable[[object], tuple[K, R]],
                 error: type[JevError] = BatchError, what: str = "record") -> None:
        self.path = Path(path)
        self._parse = parse
        self._error = error
        self._what = what
        self._fd: int | None = None

    def open(self, *, resume: bool) -> dict[K, R]:
        """Open for appending; with `resume`, return the records already written, by key.

        Only a regular file (or none yet) is accepted: a FIFO would block the
        open until a reader came, a device such as /dev/full cannot keep records.
        """
        error = self._error
        earlier: dict[K, R] = {}
        try:
            info = self.path.stat()
        except FileNotFoundError:
            info = None
        except OSError as exc:
            raise error(f"cannot use output {self.path}: {exc.strerror}") from None
        if info is not None:
            self._refuse_unless_regular(info.st_mode)
        size = info.st_size if info is not None else 0
        if size and not resume:
            raise error(f"output {self.path} already has records; pass --resume to continue it "
                        "or choose another --out")
        if size:
            earlier = self._recorded()
        try:
            # O_NONBLOCK: if a FIFO took the file's place since the check, the open fails at once.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK,
                         0o644)
        except OSError as exc:
            raise error(f"cannot write output {self.path}: {exc.strerror}") from None
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
            kind = kind_of(mode)
            raise self._error(f"output {self.path} is {kind}; --out must be a regular file "
                              "(records are appended and read back by --resume)")

    def _recorded(self) -> dict[K, R]:
        error = self._error
        earlier: dict[K, R] = {}
        keep = 0  # bytes up to the end of the last complete line
        try:
            with open_regular(self.path, label=f"output {self.path}", error=error) as f:
                number = 0
                while True:
                    raw, too_long = _read_line(f, MAX_RECORD_BYTES)
                    if too_long:
                        raise error(f"output {self.path} line {number + 1} is larger than "
                                    f"{MAX_RECORD_BYTES} bytes; not resuming")
                    if not raw.endswith(b"\n"):
                        break  # end of file, or a line cut off by a kill: it runs again
                    number += 1
                    keep += len(raw)
                    try:
                        key, record = self._parse(
                            loads_bounded(raw, what=f"output line {number}", max_bytes=MAX_RECORD_BYTES))
                    except (JSONInputError, ValueError) as exc:
                        raise error(f"output {self.path} line {number} is not a {self._what} "
                                    f"({exc}); not resuming") from None
                    earlier.setdefault(key, record)
            if keep != self.path.stat().st_size:
                os.truncate(self.path, keep)
        except OSError as exc:
            raise error(f"cannot read output {self.path}: {exc.strerror}") from None
        return earlier

    def append(self, record: WireModel) -> None:
        if self._fd is None:
            raise self._error("the output log is not open")
        data = (json.dumps(record.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            # A disk that filled up: lines already written stay whole; a cut-off one is dropped by --resume.
            raise self._error(f"cannot write output {self.path}: {exc.strerror}; the records so far are "
                              "kept, rerun with --resume") from None

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.fsync(fd)
            except OSError as exc:
                raise self._error(f"cannot write output {self.path}: {exc.strerror}") from None
            finally:
                os.close(fd)


def _batch_record(data: object) -> tuple[Key, BatchOutcome]:
    outcome = BatchOutcome.from_json(data)
    return outcome.id, outcome


class OutputLog(AppendLog[Key, BatchOutcome]):
    """A batch's output file: one outcome a line (`AppendLog`), resumed by the input's id."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path, parse=_batch_record, what="batch record")
