"""One run, from launch to envelope.

A `Run` owns everything of one program's life: its worker session, budget,
progress ring, logs, pending timers, audit trail and the terminal precedence
of contract §2. It answers its own host calls; capability calls take the one
path of `CapabilityCalls`. It is given what it needs (`RunServices`: a worker
source, the evaluator, the capability registry, the policy gate) and never
the host.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc

from ..capabilities import Connector
from ..contract.budget import RunBudget
from ..contract.config import EffectiveLimits
from ..contract.envelope import ApprovalCounts, Envelope, RunState, Usage
from ..contract.program import Program
from ..contract.values import JsonValue, ValueRejected, check_decoded
from ..contract.wire_model import utc_now
from ..errors import CompileError, clip_error
from ..sandbox.connection import asyncio_loop
from ..sandbox.session import Ended, Ending, Event, HostCall, Logs, SessionLimits, WorkerLike, WorkerSession
from ..telemetry import run_started
from .calls import CallServices, CapabilityCalls, EvaluationListener, Settler, answer_when_done
from .failures import describe_failure
from .gate import AuditTrail
from .observing import ObserverHandle, UserText, user_text
from .ring import LogBuffer, ProgressRing

if TYPE_CHECKING:
    import asyncio

    from ..typecheck.verdict import CheckReport
    from .status import RunSummary  # loaded when a status is asked for (start-up of `run`)

SLICE_MS = 100
#: The kernel's profiling timer kills a worker whose slice overran by this much.
HARD_SLICE_MS = 250
STACK_BYTES = 256 * 1024
LOAD_TIMEOUT_S = 10.0
DEADLINE_EXCEEDED = "Jev deadline of {timeout_ms} ms exceeded"
EMIT_MAX_BYTES = 4_096


class WorkerSource(Protocol):
    """Where a run takes its worker: the host's warm pool of worker processes by default, or
    what `JevHost(workers=...)` was given (`InProcessWorkers` for the in-process floor). Each
    worker serves one run; the run closes it when it ends."""

    async def acquire(self) -> WorkerLike: ...


def session_limits(memory_bytes: int) -> SessionLimits:
    """The limits every run's worker session gets (contract §3)."""
    return SessionLimits(slice_ms=SLICE_MS, hard_slice_ms=HARD_SLICE_MS, memory_bytes=memory_bytes,
                         stack_bytes=STACK_BYTES)


@dataclass(frozen=True, slots=True)
class RunServices:
    """What every run of one host is given: never the host itself."""

    workers: WorkerSource
    session_limits: SessionLimits
    calls: CallServices
    #: Each is told once per run, when it has ended, to release what the run held.
    connectors: Sequence[Connector] = ()


class RunEndKind(enum.StrEnum):
    """How a run's driver saw it end; `Run._finish` maps each to a terminal `RunState`."""

    COMPLETED = "completed"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class RunEnd:
    """How the run's driver saw it end, before the terminal precedence is applied."""

    kind: RunEndKind
    result: Any = None
    error: str | None = None


class Run:
    """One program's run: load it, drive it to its end, and show it as an envelope."""

    def __init__(self, program: Program, input_json: str, *, limits: EffectiveLimits, background: bool,
                 services: RunServices, intent: str | UserText | None = None,
                 observation: ObserverHandle | None = None, audit: AuditTrail | None = None,
                 checked: CheckReport | None = None, queued: bool = False) -> None:
        self.id = str(uuid.uuid4())
        self.program = program
        self._input_json = input_json
        self.limits = limits
        self.background = background
        self.started_at = utc_now()
        self.ended_at: datetime | None = None
        self.state = RunState.QUEUED if queued else RunState.RUNNING
        #: Told when a queued run is cancelled before it starts (the host's queue lets go of it).
        self.left_queue: Callable[[Run], None] | None = None
        self.result: Any = None
        self.error: str | None = None
        self.worker_pid = 0  # the worker's process id: diagnostics only, the guest never learns it
        self.ring = ProgressRing()
        self.logs = LogBuffer()
        self.audit = audit or AuditTrail()
        self.budget = RunBudget(limits)
        self.observation = observation
        self.checked = checked  # what the type check found at launch (fabric_jev.typecheck)
        self.done = anyio.Event()
        self._services = services
        self._session: WorkerSession | None = None
        self._scope: anyio.CancelScope | None = None
        self._cancel_requested = False
        self._timers: set[asyncio.TimerHandle] = set()  # pending program.sleep timers (asyncio)
        self._trace = run_started(self.id, program, input_json, background=background)  # None: no tracing
        self._calls = CapabilityCalls(services.calls, program, self.audit, self.budget,
                                      run_id=self.id, intent=user_text(intent), observation=observation,
                                      input_json=input_json, trace=self._trace)

    # ------------------------------------------------------------------ seen from outside

    def envelope(self, after: int = 0) -> Envelope:
        budget, audit = self.budget, self.audit
        # Every value is the run's own, of its field's type already (the guest's were validated
        # at the boundary): made without a second pass, and without building the schema.
        return Envelope.model_construct(
            id=self.id, name=self.program.name, state=self.state, background=self.background,
            started_at=self.started_at, ended_at=self.ended_at, result=self.result, error=self.error,
            evaluations=budget.evaluations, tool_calls=budget.tool_calls,
            usage=Usage.model_construct(input_tokens=budget.input_tokens, output_tokens=budget.output_tokens),
            events=self.ring.after(after), next_sequence=self.ring.next_sequence,
            logs=tuple(self.logs.lines),
            observation=None if self.observation is None else self.observation.counts(),
            approvals=tuple(audit.entries),
            approval_counts=ApprovalCounts.model_construct(allowed=audit.allowed, denied=audit.denied),
            typecheck=None if self.checked is None else self.checked.report(),
            evaluator=self._calls.answerers(),
        )

    def summary(self) -> RunSummary:
        from .status import RunSummary

        return RunSummary(self.id, self.program.name, self.state, self.background, self.started_at,
                          self.audit.allowed, self.audit.denied)

    def listen_evaluations(self, listener: EvaluationListener | None) -> None:
        """Tell `listener` each answer the program receives (set before the run's first tick)."""
        self._calls.listener = listener

    def cancel(self) -> None:
        """Ask the run to stop; it ends `cancelled` unless something earlier decided it."""
        self._cancel_requested = True
        if self.state is RunState.QUEUED:
            self.end_unstarted()
            if self.left_queue is not None:
                self.left_queue(self)
        elif self._scope is not None:
            self._scope.cancel()

    def start(self) -> None:
        """A queued run leaves the queue: it is running from now on (its worker is taken next)."""
        self.state = RunState.RUNNING
        self.started_at = utc_now()

    def end_unstarted(self, error: str | None = None) -> None:
        """End a run that never reached its worker: cancelled while queued (no error), or
        failed to load after waiting in the queue (`error`, e.g. a compile error)."""
        if self.observation is not None:
            self.observation.cancel()
        self._finish(RunEnd(RunEndKind.CANCELLED) if error is None else RunEnd(RunEndKind.ERROR, error=error))
        self.done.set()

    async def stop(self) -> Envelope:
        """Cancel the run and wait, shielded from the caller's cancellation, until it is terminal."""
        self.cancel()
        with anyio.CancelScope(shield=True):
            await self.done.wait()
        return self.envelope()

    async def wait(self) -> Envelope:
        """The terminal envelope, once there is one. Cancelling the wait leaves the run running."""
        await self.done.wait()
        return self.envelope()

    async def progress(self, after: int) -> Envelope:
        """The envelope once there is an event with sequence > `after`, or the run is terminal."""
        while self.ring.next_sequence <= after + 1 and not self.state.terminal:
            changed = self.ring.changed()
            async with anyio.create_task_group() as tg:
                async def on_done() -> None:
                    await self.done.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(on_done)
                await changed.wait()
                tg.cancel_scope.cancel()
        return self.envelope(after)

    async def advise(self, advice: JsonValue) -> dict[str, object]:
        """Advice on the run's behalf from its caller: the same path as `program.advise`."""
        return await self._calls.call_now("jev.advise", advice)

    # ------------------------------------------------------------------ launch

    async def load(self) -> None:
        """Take a worker and start the program in it: as JavaScript first; only code that
        does not compile as JavaScript is tried again with its TypeScript annotations erased.
        Raises `CompileError` or `SandboxUnavailable`; then nothing is left running."""
        try:
            self._session = await self._load_session()
        except BaseException as exc:
            if self._trace is not None:  # the run's span, started with the run, ends with its launch
                if isinstance(exc, anyio.get_cancelled_exc_class()):
                    self._trace.ended("cancelled", None, None, self.budget)  # no error (contract §2)
                else:
                    self._trace.ended("failed", str(exc) or type(exc).__name__, None, self.budget)
            raise
        self.worker_pid = self._session.pid

    async def _load_session(self) -> WorkerSession:
        input_json = self._input_json
        # A checked TypeScript program comes with its erased code: it loads at the first try.
        code = self.program.code if self.checked is None else self.checked.code(self.program.code)
        try:
            return await self._start(code, input_json)
        except CompileError as as_javascript:
            stripped = await _erase_types(code, as_javascript)
            try:
                return await self._start(stripped, input_json)
            except CompileError as as_typescript:
                raise CompileError(clip_error(
                    f"{as_javascript} (as TypeScript, after erasing annotations: "
                    f"{str(as_typescript).removeprefix('Jev program does not compile: ')})")) from None

    async def _start(self, code: str, input_json: str) -> WorkerSession:
        services = self._services
        session = WorkerSession(await services.workers.acquire(), services.session_limits)
        try:
            await session.load(code, input_json, timeout_s=LOAD_TIMEOUT_S)
        except BaseException:
            session.close()
            raise
        return session

    # ------------------------------------------------------------------ driving

    async def drive(self, released: Callable[[Run], None]) -> None:
        """Run the loaded program to its end. `released` is told before waiters wake."""
        session = self._session
        assert session is not None, "load() first"
        end = RunEnd(RunEndKind.CANCELLED)
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._cancel_requested:
                    scope.cancel()
                with anyio.move_on_after(self.limits.timeout_ms / 1000) as deadline:
                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(session.flusher)
                        end = await self._pump(session, tasks)
                        tasks.cancel_scope.cancel()
                if deadline.cancelled_caught:
                    end = RunEnd(RunEndKind.TIMEOUT, error=DEADLINE_EXCEEDED.format(timeout_ms=self.limits.timeout_ms))
        except Exception as exc:  # a host bug must still end the run, not the host; it names its cause
            end = RunEnd(RunEndKind.ERROR, error=clip_error(f"Jev host error: {describe_failure(exc)}"))
        finally:
            for timer in self._timers:
                timer.cancel()
            self._timers.clear()
            session.close()
            if self.observation is not None:
                self.observation.cancel()
            if self._services.connectors:
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    for connector in self._services.connectors:
                        await connector.run_ended(self.id)
            self._finish(end)
            released(self)
            self.done.set()

    async def _pump(self, session: WorkerSession, tasks: anyio.abc.TaskGroup) -> RunEnd:
        reply = session.reply
        ends: list[RunEnd] = []

        def handle(events: list[Event]) -> bool:
            for event in events:
                if type(event) is HostCall:
                    call_id = event.call_id

                    def settle(ok: bool, text: str, call_id: int = call_id) -> None:
                        reply(call_id, ok, text)

                    self._answer(event.kind, event.args, settle, tasks)
                elif type(event) is Logs:
                    self.logs.extend(event.lines)
                elif type(event) is Ended:
                    ends.append(self._ended(event))
                    return True
            return False

        await session.run(handle)
        return ends[0]

    def _ended(self, ended: Ended) -> RunEnd:
        if ended.ending is Ending.COMPLETED:
            try:
                result = check_decoded(ended.result, self.program.output_schema, "output")
            except ValueRejected as exc:
                return RunEnd(RunEndKind.ERROR, error=str(exc))
            return RunEnd(RunEndKind.COMPLETED, result=result)
        if ended.ending is Ending.TIMED_OUT:
            return RunEnd(RunEndKind.TIMEOUT, error=ended.error)
        return RunEnd(RunEndKind.ERROR, error=ended.error)

    def _finish(self, end: RunEnd) -> None:
        """Apply the terminal precedence of contract §2."""
        error: str | None
        if self.budget.failure is not None:
            # The guest's own report of it, when it let it escape, also says where the call was.
            failure = self.budget.failure
            said = (end.error or "").removeprefix("Error: ")
            if end.kind is RunEndKind.ERROR and said.startswith(failure):
                failure = said
            state, error, result = RunState.FAILED, failure, None
        elif end.kind is RunEndKind.TIMEOUT:
            state, error, result = RunState.TIMED_OUT, end.error, None
        elif end.kind is RunEndKind.CANCELLED or self._cancel_requested:
            state, error, result = RunState.CANCELLED, None, None
        elif end.kind is RunEndKind.ERROR:
            state, error, result = RunState.FAILED, end.error, None
        else:
            state, error, result = RunState.COMPLETED, None, end.result
        self.state = state
        self.error = clip_error(error) if error is not None else None
        self.result = result
        self.ended_at = utc_now()
        if self._trace is not None:
            self._trace.ended(state, error, result, self.budget)

    # ------------------------------------------------------------------ host calls

    def _answer(self, kind: str, args: Any, settle: Settler, tasks: anyio.abc.TaskGroup) -> None:
        """Each host call is counted against the budgets first, then answered through
        `settle`, which settles the guest's promise. Calls that wait run as tasks of the
        run, so its end cancels them."""
        if kind not in CALL_KINDS:
            settle(False, f"unknown host call {kind!r}")
            return
        denied = self.budget.begin_call()
        if denied is not None:
            settle(False, denied)
        elif kind == "emit":
            self._emit(args, settle)
        elif kind == "sleep":
            self._sleep(args, settle, tasks)
        elif kind == "nextEvent":
            if self.observation is None:
                settle(False, "program.nextEvent needs spawn with observe")
            else:
                tasks.start_soon(answer_when_done, self.observation.next_event(), settle)
        else:
            self._calls.start(kind, args, settle, tasks)

    def _emit(self, value: Any, settle: Settler) -> None:
        if not _surely_small(value):
            try:
                check_decoded(value, {}, "program.emit value", EMIT_MAX_BYTES)
            except ValueRejected as exc:
                settle(False, str(exc))
                return
        self.ring.append(value)
        settle(True, "null")

    def _sleep(self, ms: Any, settle: Settler, tasks: anyio.abc.TaskGroup) -> None:
        if (isinstance(ms, bool) or not isinstance(ms, int | float)
                or not 0 <= ms <= self.limits.timeout_ms):
            settle(False, "Invalid program.sleep duration")
            return
        loop = asyncio_loop()
        if loop is None:
            tasks.start_soon(_sleep_then_settle, ms / 1000, settle)
            return
        # On asyncio a loop timer answers the guest directly: far cheaper than a
        # task per sleep, which matters for many paced programs. The run's end
        # cancels whatever is still pending.
        timers = self._timers

        def wake() -> None:
            timers.discard(handle)
            settle(True, "null")

        handle = loop.call_later(ms / 1000, wake)
        timers.add(handle)


CALL_KINDS = frozenset({"sleep", "emit", "evaluate", "tool", "nextEvent", "advise"})


def _surely_small(value: Any) -> bool:
    """True when `value` cannot exceed EMIT_MAX_BYTES as JSON, known without encoding it:
    a scalar from the guest (numbers are at most 25 characters), or a short string
    (a character takes at most 6 bytes, as an escape)."""
    if value is None or isinstance(value, bool | int | float):
        return True
    return isinstance(value, str) and len(value) * 6 + 2 <= EMIT_MAX_BYTES


async def _sleep_then_settle(seconds: float, settle: Settler) -> None:
    await anyio.sleep(seconds)
    settle(True, "null")


async def _erase_types(code: str, as_javascript: CompileError) -> str:
    import anyio.to_thread

    from ..errors import TypeScriptError
    from ..typecheck.erasure import strip_types

    try:
        # In a thread: parsing is capped (PARSE_CAP_S) but the event loop keeps serving other runs.
        stripped = await anyio.to_thread.run_sync(strip_types, code)
    except TypeScriptError as exc:
        raise CompileError(clip_error(f"{as_javascript} ({exc})")) from None
    if stripped == code:
        raise as_javascript  # nothing TypeScript-specific to erase: the JavaScript error stands
    return stripped
