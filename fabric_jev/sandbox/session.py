"""A typed session with one guest worker: load, events, replies, and how it ended.

The host drives a run through this object alone: it loads the program, then
reads batches of events — host calls to answer, log lines, and finally one
`Ended` that classifies how the program stopped (completed, failed, timed
out, killed, crashed). The messages and their framing live in `_wire`; nothing
above the sandbox sees them.
"""

from __future__ import annotations

import enum
import signal
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import anyio

from ..errors import CompileError, SandboxUnavailable, clip_error
from . import _wire
from ._wire import HostCall
from .connection import Listener, WorkerGone

# A guest timer gives the program a fresh slice and, unlike program.sleep, costs no host call.
SLICE_OVERRUN_TEMPLATE = (
    "Jev program ran for more than {slice_ms} ms without awaiting and was stopped; split long "
    "loops with a guest timer, which costs no tool call: "
    "`await new Promise((resolve) => setTimeout(resolve, 0))` every few thousand iterations"
)
STACK_EXCEEDED = ("Jev program exceeded its stack limit (maximum call stack size); "
                  "check for unbounded recursion")


__all__ = ["Ended", "Ending", "Event", "HostCall", "Logs", "SessionLimits", "Transport",
           "WorkerLike", "WorkerSession", "memory_message"]


class Ending(enum.Enum):
    """How a guest program stopped."""

    COMPLETED = "completed"  # it returned a value (not yet checked against its schema)
    FAILED = "failed"        # it threw, or broke its memory or stack limit
    TIMED_OUT = "timed_out"  # a CPU slice overran and was stopped
    KILLED = "killed"        # the worker died of a signal
    CRASHED = "crashed"      # the worker exited without a word, or broke the protocol


class Ended(NamedTuple):
    ending: Ending
    result: Any = None
    error: str | None = None


class Logs(NamedTuple):
    lines: list[str]


Event = HostCall | Logs | Ended


class SessionLimits(NamedTuple):
    slice_ms: int
    hard_slice_ms: int
    memory_bytes: int
    stack_bytes: int


class WorkerLike(Protocol):
    """What a session needs of a worker (`sandbox.pool.Worker`, or an in-process stand-in)."""

    pid: int

    @property
    def connection(self) -> Transport: ...

    async def exit_code(self, timeout: float) -> int | None: ...

    def close(self) -> None: ...


class Transport(Protocol):
    def send(self, data: bytes) -> None: ...

    async def receive(self) -> list[tuple[bytes, bytes]]: ...

    async def flusher(self) -> None: ...

    def listen(self, listener: Listener | None) -> bool: ...


#: Handles one batch of events synchronously; returns True once it has seen the `Ended`.
Handler = Callable[[list["Event"]], bool]


def memory_message(limit: int) -> str:
    return f"Jev program exceeded its memory limit ({limit // (1024 * 1024)} MiB)"


class WorkerSession:
    """One program's conversation with its worker. Not reusable: a worker runs one program."""

    def __init__(self, worker: WorkerLike, limits: SessionLimits) -> None:
        self._worker = worker
        self._conn = worker.connection
        self._limits = limits
        self._early: list[tuple[bytes, bytes]] = []
        # Replies made while the host handles a batch of events go out together,
        # in one write, when it asks for the next batch.
        self._corked = False
        self._replies: list[bytes] = []

    @property
    def pid(self) -> int:
        return self._worker.pid

    @property
    def slice_overrun(self) -> str:
        return SLICE_OVERRUN_TEMPLATE.format(slice_ms=self._limits.slice_ms)

    async def load(self, code: str, input_json: str, *, timeout_s: float) -> None:
        """Compile the program; once this returns, it is running.

        Raises `CompileError` when it does not compile and `SandboxUnavailable`
        when the worker does not answer.
        """
        limits = self._limits
        self._conn.send(_wire.encode(_wire.Load(
            code=code, input_json=input_json, slice_ms=limits.slice_ms,
            hard_slice_ms=limits.hard_slice_ms, memory_bytes=limits.memory_bytes,
            stack_bytes=limits.stack_bytes)))
        try:
            with anyio.fail_after(timeout_s):
                frames = await self._conn.receive()
        except WorkerGone:
            exit_code = await self._worker.exit_code(1.0)
            if exit_code == -signal.SIGPROF:
                raise CompileError("Jev program did not compile within its CPU slice") from None
            raise SandboxUnavailable(f"the sandbox worker died while loading (exit {exit_code})") \
                from None
        except TimeoutError:
            raise SandboxUnavailable("the sandbox worker did not answer while loading") from None
        self._early = frames[1:]
        try:
            first = _wire.decode(*frames[0])
        except _wire.ProtocolError:
            first = None
        if isinstance(first, _wire.LoadFailed):
            raise CompileError(clip_error("Jev program does not compile: " + first.message))
        if not isinstance(first, _wire.Ready):
            raise SandboxUnavailable("the sandbox worker answered the load out of protocol")

    async def flusher(self) -> None:
        """Writes replies the socket could not take at once; run it beside `events`."""
        await self._conn.flusher()

    def reply(self, call_id: int, ok: bool, text: str) -> None:
        """Settle one host call: `text` is JSON when ok, else the error message."""
        data = _wire.encode(_wire.Settle(call_id, ok, text))
        if self._corked:
            self._replies.append(data)
        else:
            self._conn.send(data)

    async def events(self) -> list[Event]:
        """The next batch of events (never empty). An `Ended` is always the last one."""
        if self._replies:
            self._conn.send(b"".join(self._replies))
            self._replies.clear()
        self._corked = False
        while True:
            if self._early:
                frames, self._early = self._early, []
            else:
                try:
                    frames = await self._conn.receive()
                except WorkerGone:
                    return [await self._exit()]
            events = self._events(frames)
            if events:
                self._corked = True
                return events

    async def run(self, handle: Handler) -> None:
        """Feed every batch of events to `handle` until it returns True (it saw the end).

        On asyncio the batches are handled inside the socket's reader callback:
        no task switch and no extra loop iteration per host call. Replies made
        by `handle` go out in one write when it returns.
        """
        done = anyio.Event()
        failure: list[BaseException] = []
        gone = False

        def on_frames(frames: list[tuple[bytes, bytes]], eof: bool) -> None:
            nonlocal gone
            if done.is_set():
                return
            try:
                events = self._events(frames)
                if events:
                    self._corked = True
                    try:
                        finished = handle(events)
                    finally:
                        self._uncork()
                    if finished:
                        done.set()
                        return
                if eof:
                    gone = True
                    done.set()
            except Exception as exc:  # surfaces in the driving task, not the event loop's log
                failure.append(exc)
                done.set()

        if self._early:  # what arrived with Ready comes first
            early, self._early = self._early, []
            on_frames(early, False)
        if done.is_set() or self._conn.listen(on_frames):
            try:
                await done.wait()
            finally:
                self._conn.listen(None)
            if failure:
                raise failure[0]
            if gone:
                handle([await self._exit()])
            return
        while not handle(await self.events()):
            pass

    def _uncork(self) -> None:
        self._corked = False
        if self._replies:
            data = b"".join(self._replies) if len(self._replies) > 1 else self._replies[0]
            self._replies.clear()
            self._conn.send(data)

    def _events(self, frames: list[tuple[bytes, bytes]]) -> list[Event]:
        events: list[Event] = []
        for tag, payload in frames:
            try:
                message = _wire.decode(tag, payload)
            except _wire.ProtocolError:
                events.append(Ended(Ending.CRASHED, error="Jev sandbox worker broke the protocol"))
                return events
            if type(message) is _wire.Outbox:
                events.extend(message.calls)
                if message.logs:
                    events.append(Logs(message.logs))
                if message.fault is not None:
                    events.append(Ended(Ending.FAILED, error=message.fault))
                    return events
                if message.result is not None:
                    events.append(self._settled(*message.result))
                    return events
            elif type(message) is _wire.Fatal:
                events.append(self._fatal(message))
                return events
            else:
                events.append(Ended(Ending.CRASHED,
                                    error="Jev sandbox worker broke the protocol"))
                return events
        return events

    def _settled(self, ok: bool, value: Any) -> Ended:
        if ok:
            return Ended(Ending.COMPLETED, result=value)
        text = str(value)
        if "out of memory" in text:
            text = memory_message(self._limits.memory_bytes)
        return Ended(Ending.FAILED, error=text)

    def _fatal(self, fatal: _wire.Fatal) -> Ended:
        if fatal.kind is _wire.FatalKind.SLICE:
            return Ended(Ending.TIMED_OUT, error=self.slice_overrun)
        if fatal.kind is _wire.FatalKind.MEMORY:
            return Ended(Ending.FAILED, error=memory_message(self._limits.memory_bytes))
        if fatal.kind is _wire.FatalKind.STACK:
            return Ended(Ending.FAILED, error=STACK_EXCEEDED)
        return Ended(Ending.FAILED, error=fatal.message or "Jev program failed")

    async def _exit(self) -> Ended:
        code = await self._worker.exit_code(1.0)
        if code == -signal.SIGPROF:
            return Ended(Ending.TIMED_OUT, error=self.slice_overrun)
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            return Ended(Ending.KILLED, error=f"Jev sandbox worker was killed by {name}")
        return Ended(Ending.CRASHED, error=f"Jev sandbox worker exited unexpectedly (code {code})")

    def close(self) -> None:
        """Kill the worker (if still alive) and release it. Safe to call twice."""
        self._replies.clear()
        self._worker.close()
