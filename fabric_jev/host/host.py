"""JevHost: launch, drive, inspect and stop judgment programs (contract §2)."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable
from contextlib import AsyncExitStack
from functools import partial
from types import TracebackType
from typing import Any, overload

import anyio
import anyio.abc
import anyio.lowlevel

from ..contract.config import HostConfig
from ..contract.envelope import Envelope, ProgressEvent, RunState
from ..contract.policy import BUILTIN_RISKS, denial_message
from ..contract.program import JEV_PROGRAM_REFS, Program, parse_program
from ..contract.values import ValueRejected, check_value
from ..errors import (
    CapabilityError,
    CompileError,
    ConcurrencyLimitReached,
    HostClosed,
    InputInvalid,
    ProgramInvalid,
    UnknownRun,
    clip_error,
)
from ..evaluators.base import Evaluator
from ..plugins import build_connector
from ..sandbox.pool import WorkerPool
from ..sandbox.session import (
    Ended,
    Ending,
    Event,
    HostCall,
    Logs,
    SessionLimits,
    WorkerLike,
    WorkerSession,
)
from .calls import HostCalls
from .observing import Observation, ObservationSource
from .policy import CALLER_GRANT, Approver, PolicyGate
from .registry import CapabilityRegistry, Connector
from .ring import utc_now
from .run import Outcome, RunRecord

SLICE_MS = 100
#: The kernel's profiling timer kills a worker whose slice overran by this much.
HARD_SLICE_MS = 250
STACK_BYTES = 256 * 1024
LOAD_TIMEOUT_S = 10.0
DEADLINE_EXCEEDED = "Jev deadline exceeded"


async def _erase_types(code: str, as_javascript: CompileError) -> str:
    import anyio.to_thread

    from ..contract.typescript import TypeScriptError, strip_types

    try:
        # In a thread: parsing is capped (PARSE_CAP_S) but the event loop keeps serving other runs.
        stripped = await anyio.to_thread.run_sync(strip_types, code)
    except TypeScriptError as exc:
        raise CompileError(clip_error(f"{as_javascript} ({exc})")) from None
    if stripped == code:
        raise as_javascript  # nothing TypeScript-specific to erase: the JavaScript error stands
    return stripped


class JevHost:
    """Runs judgment programs in sandboxed QuickJS workers.

    Use as an async context manager::

        async with JevHost() as host:
            envelope = await host.run(program, input)

    Runs belong to this object: they are not durable across restarts, and
    `close()` cancels every running one.
    """

    def __init__(
        self,
        config: HostConfig | None = None,
        *,
        evaluator: Evaluator | None = None,
        capabilities: CapabilityRegistry | None = None,
        approver: Approver | None = None,
    ) -> None:
        """`approver` decides the calls whose risk policy is `ask` (and what `auto`
        hands on): ``async def approver(call: CapabilityCall) -> Decision``.
        Without one, those calls are refused."""
        self.config = config or HostConfig()
        if evaluator is None:
            # No evaluator given: the configured route, else the offline local evaluator.
            from ..evaluators.select import build_evaluator

            evaluator = build_evaluator(None, self.config)
        self.evaluator: Evaluator = evaluator
        self.capabilities = capabilities or CapabilityRegistry()
        self._runs: OrderedDict[str, RunRecord] = OrderedDict()
        self._active = 0
        self._closed = False
        self._entered = False
        self._stack = AsyncExitStack()
        self._tg: anyio.abc.TaskGroup | None = None
        self._pool: WorkerPool | None = None
        self._observers: ObservationSource | None = None  # a bound session (bind_session)
        self._connectors: list[Connector] = []
        self.policy = PolicyGate(
            dict(self.config.approvals), approver=approver, evaluator=self.evaluator,
            threshold=self.config.autoApprovalThreshold,
            approver_timeout_s=self.config.approverTimeoutMs / 1000,
            classifier_timeout_s=self.config.requestTimeoutMs / 1000,
            max_request_bytes=self.config.maxRequestBytes)
        self._calls = HostCalls(self.evaluator, self.capabilities,
                                max_request_bytes=self.config.maxRequestBytes,
                                request_timeout_s=self.config.requestTimeoutMs / 1000,
                                gate=self.policy)
        # Connectors named in the config come from their plugins (fabric_jev.plugins).
        for name, settings in self.config.connectors.items():
            self.add_connector(build_connector(name, settings))

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> JevHost:
        if self._entered:
            raise RuntimeError("a JevHost can be entered only once")
        self._entered = True
        try:
            self._pool = await self._stack.enter_async_context(
                WorkerPool(warm=self.config.warmWorkers))
            self._tg = await self._stack.enter_async_context(anyio.create_task_group())
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Cancel every running run, wait for them, clear history. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            for record in list(self._runs.values()):
                self._request_cancel(record)
            for record in list(self._runs.values()):
                await record.done.wait()
            self._runs.clear()
            for connector in self._connectors:
                await connector.aclose()
            await self.evaluator.aclose()
        await self._stack.aclose()

    # ------------------------------------------------------------------ public API

    async def run(
        self,
        program: Program | dict[str, Any],
        input: Any = None,
        *,
        on_event: Callable[[ProgressEvent], None] | None = None,
        intent: str | None = None,
        grant: Iterable[str] | None = None,
    ) -> Envelope:
        """Launch in the foreground and wait for the terminal envelope.

        `on_event` is called with each progress event as it is emitted.
        Cancelling the caller cancels the run (and still waits for it to end).
        `intent` is what the user asked for (the auto-approval classifier's user
        text; default: the bound session's latest input). `grant` is the caller's
        own capability set: a program that requires more is refused.
        """
        record = await self._launch(program, input, background=False, observe=None,
                                    intent=intent, grant=grant)
        record.ring.listener = on_event
        try:
            await record.done.wait()
        except BaseException:
            with anyio.CancelScope(shield=True):
                self._request_cancel(record)
                await record.done.wait()
            raise
        return record.envelope()

    async def spawn(
        self,
        program: Program | dict[str, Any],
        input: Any = None,
        *,
        observe: dict[str, Any] | None = None,
        intent: str | None = None,
        grant: Iterable[str] | None = None,
    ) -> Envelope:
        """Launch in the background; returns the `running` envelope before the first tick.

        `intent` and `grant` as for `run`.
        """
        record = await self._launch(program, input, background=True, observe=observe,
                                    intent=intent, grant=grant)
        return record.envelope()

    @overload
    def status(self, id: None = None, after: int = 0) -> dict[str, Any]: ...

    @overload
    def status(self, id: str, after: int = 0) -> Envelope: ...

    def status(self, id: str | None = None, after: int = 0) -> Envelope | dict[str, Any]:
        """A run's envelope with events after `after`, or host status without an id."""
        if id is None:
            return self.host_status()
        return self._get(id).envelope(after)

    def host_status(self) -> dict[str, Any]:
        ev = self.evaluator.status()
        return {
            "credentials": ev.get("credentials"),
            "model": ev.get("model", self.config.model),
            "route": ev.get("route"),
            "runs": [
                {"id": r.id, "name": r.program.name, "state": r.state.value,
                 "background": r.background, "startedAt": r.started_at,
                 "approvals": {"allowed": r.audit.allowed, "denied": r.audit.denied}}
                for r in self._runs.values()
            ],
        }

    async def progress(self, id: str, after: int = 0) -> Envelope:
        """Wait until the run has an event with sequence > `after`, or is terminal."""
        record = self._get(id)
        while record.ring.next_sequence <= after + 1 and not record.state.terminal:
            changed = record.ring.changed()
            async with anyio.create_task_group() as tg:
                async def on_done() -> None:
                    await record.done.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(on_done)
                await changed.wait()
                tg.cancel_scope.cancel()
        return record.envelope(after)

    async def advise(self, id: str, advice: dict[str, Any]) -> dict[str, Any]:
        """Advice on behalf of an observing run: the same checks as `program.advise`."""
        record = self._get(id)
        if record.observation is None:
            raise ProgramInvalid("advise needs a run spawned with observe")
        if "jev.advise" not in record.program.requires:
            raise CapabilityError("Capability not granted to Jev program: jev.advise")
        policy, outcome, probability = await self.policy.decide(
            "jev.advise", "agent", run_id=record.id, run_name=record.program.name, arguments=advice,
            intent=self._intent(record.intent), actions=record.audit.actions())
        record.audit.add("jev.advise", "agent", policy, outcome, probability)
        if not outcome.allowed:
            raise CapabilityError(denial_message("jev.advise", outcome))
        result: dict[str, Any] = await record.observation.advise(advice)
        return result

    async def wait(self, id: str) -> Envelope:
        """Wait for a run to be terminal. Cancelling the wait leaves the run running."""
        record = self._get(id)
        await record.done.wait()
        return record.envelope()

    join = wait

    async def stop(self, id: str) -> Envelope:
        """Cancel a run and wait until it is terminal. Idempotent."""
        record = self._get(id)
        self._request_cancel(record)
        with anyio.CancelScope(shield=True):
            await record.done.wait()
        return record.envelope()

    def bind_session(self, session: ObservationSource) -> None:
        """Bind a `MainSession`: programs may then be spawned with `observe`."""
        self._observers = session

    def add_connector(self, connector: Connector) -> None:
        """Register a connector's capabilities (see `fabric_jev.protocol`)."""
        if self._closed:
            raise HostClosed("Jev host is closed")
        for ref, capability in connector.capabilities().items():
            self.capabilities.register(ref, capability.handler, capability.risk)
        self._connectors.append(connector)

    # ------------------------------------------------------------------ launch

    def _get(self, id: str) -> RunRecord:
        record = self._runs.get(id) if isinstance(id, str) else None
        if record is None:
            raise UnknownRun(str(id))
        return record

    @staticmethod
    def _request_cancel(record: RunRecord) -> None:
        record.cancel_requested = True
        if record.scope is not None:
            record.scope.cancel()

    def _check_refs(self, program: Program, observe: dict[str, Any] | None) -> None:
        for ref in program.requires:
            if ref.startswith("jev."):
                if ref not in JEV_PROGRAM_REFS:
                    raise CapabilityError(
                        f"{ref} is a Jev lifecycle call; programs may require only "
                        "jev.evaluate and jev.advise (recursive lifecycle calls are not allowed)")
                if ref == "jev.advise" and observe is None:
                    raise CapabilityError("jev.advise needs spawn with observe")
            elif ref not in self.capabilities:
                raise CapabilityError(f"Missing capability for Jev program: {ref}")

    def _intent(self, intent: str | None) -> str | None:
        if intent is not None:
            return intent
        latest = getattr(self._observers, "user_text", None)  # a bound MainSession's latest input
        return latest if isinstance(latest, str) else None

    def _check_grant(self, program: Program, grant: Iterable[str] | None) -> bool:
        """No widening: a launch holds no more than its caller. True when nested in a program."""
        parent = CALLER_GRANT.get()
        for holder, held in (("the program whose capability call launched it", parent),
                             ("the caller's grant", None if grant is None else frozenset(grant))):
            if held is None:
                continue
            wider = sorted(set(program.requires) - held)
            if wider:
                raise CapabilityError(f"a program may not hold more capabilities than {holder}: "
                                      f"{', '.join(wider)}")
        return parent is not None

    async def _launch_decision(self, ref: str, program: Program, arguments: Any,
                               intent: str | None) -> tuple[Any, ...]:
        """The risk policy of a launch-time capability (spawn from a program, observe)."""
        risk = BUILTIN_RISKS[ref]
        policy, outcome, probability = await self.policy.decide(
            ref, risk, run_id="", run_name=program.name, arguments=arguments, intent=intent)
        if not outcome.allowed:
            raise CapabilityError(denial_message(ref, outcome))
        return (ref, risk, policy, outcome, probability)

    async def _launch(
        self, raw: Program | dict[str, Any], input: Any, *, background: bool,
        observe: dict[str, Any] | None, intent: str | None = None,
        grant: Iterable[str] | None = None,
    ) -> RunRecord:
        await anyio.lowlevel.checkpoint_if_cancelled()
        if self._closed or self._tg is None or self._pool is None:
            raise HostClosed("Jev host is closed" if self._closed else "Jev host is not started; "
                             "use `async with JevHost() as host`")
        program = parse_program(raw)
        if observe is not None and not background:
            raise ProgramInvalid("observe is only available with spawn, not run")
        try:
            value = check_value(input, program.inputSchema, "input")
        except ValueRejected as exc:
            raise InputInvalid(str(exc)) from None
        self._check_refs(program, observe)
        nested = self._check_grant(program, grant)
        intent = self._intent(intent)
        decisions: list[tuple[Any, ...]] = []
        if nested:  # a program launched from inside another program's capability call
            decisions.append(await self._launch_decision(
                "jev.spawn", program, {"name": program.name, "requires": list(program.requires)}, intent))
        observer: Observation | None = None
        if observe is not None:
            from ..contract.observe import parse_observe

            parse_observe(observe)  # invalid options reject the launch even without a session
            if self._observers is None:
                raise ProgramInvalid("observe needs a Main session bound to this host "
                                     "(host.bind_session)")
            # Subscribing to the session's future events needs read approval of it.
            decisions.append(await self._launch_decision("jev.observe", program, observe, intent))
            observer = self._observers.create(observe, program)
        if self._active >= self.config.maxConcurrentRuns:
            raise ConcurrencyLimitReached(
                f"Jev concurrent-run limit reached ({self.config.maxConcurrentRuns})")
        self._active += 1
        try:
            session = await self._load_program(program.code, value)
        except BaseException:
            self._active -= 1
            if observer is not None:
                observer.cancel()
            raise
        record = RunRecord(program=program, limits=self.config.effective_limits(program.limits),
                           background=background, input=value)
        record.observation = observer
        record.intent = intent
        for decision in decisions:
            record.audit.add(*decision)
        record.worker_pid = session.pid
        if observer is not None:
            observer.attach(record.id, partial(self._request_cancel, record))
        self._runs[record.id] = record
        self._prune()
        self._tg.start_soon(self._drive, record, session)
        return record

    async def _acquire_worker(self) -> WorkerLike:
        assert self._pool is not None
        return await self._pool.acquire()

    async def _load_program(self, code: str, value: Any) -> WorkerSession:
        """A worker running the program: as JavaScript first; only code that does
        not compile as JavaScript is tried again with its TypeScript annotations erased."""
        input_json = json.dumps(value)
        session = await self._session()
        try:
            await session.load(code, input_json, timeout_s=LOAD_TIMEOUT_S)
            return session
        except CompileError as as_javascript:
            session.close()
            stripped = await _erase_types(code, as_javascript)
            session = await self._session()
            try:
                await session.load(stripped, input_json, timeout_s=LOAD_TIMEOUT_S)
                return session
            except CompileError as as_typescript:
                session.close()
                raise CompileError(clip_error(
                    f"{as_javascript} (as TypeScript, after erasing annotations: "
                    f"{str(as_typescript).removeprefix('Jev program does not compile: ')})")) from None
            except BaseException:
                session.close()
                raise
        except BaseException:
            session.close()
            raise

    async def _session(self) -> WorkerSession:
        return WorkerSession(await self._acquire_worker(), SessionLimits(
            slice_ms=SLICE_MS, hard_slice_ms=HARD_SLICE_MS,
            memory_bytes=self.config.memoryLimitBytes, stack_bytes=STACK_BYTES))

    def _prune(self) -> None:
        """Drop the oldest terminal runs beyond maxRetainedRuns (running ones are kept)."""
        excess = len(self._runs) - self.config.maxRetainedRuns
        if excess <= 0:
            return
        for rid in [rid for rid, r in self._runs.items() if r.state.terminal][:excess]:
            del self._runs[rid]

    # ------------------------------------------------------------------ driving a run

    async def _drive(self, record: RunRecord, session: WorkerSession) -> None:
        outcome = Outcome("cancelled")
        try:
            with anyio.CancelScope() as scope:
                record.scope = scope
                if record.cancel_requested:
                    scope.cancel()
                with anyio.move_on_after(record.limits.timeout_ms / 1000) as deadline:
                    async with anyio.create_task_group() as calls:
                        calls.start_soon(session.flusher)
                        outcome = await self._pump(record, session, calls)
                        calls.cancel_scope.cancel()
                if deadline.cancelled_caught:
                    outcome = Outcome("timeout", error=DEADLINE_EXCEEDED)
        except Exception as exc:  # a host bug must still end the run, not the host
            outcome = Outcome("error", error=f"Jev host error: {type(exc).__name__}: {exc}")
        finally:
            for timer in record.timers:
                timer.cancel()
            record.timers.clear()
            session.close()
            if record.observation is not None:
                record.observation.cancel()
            if self._connectors:
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    for connector in self._connectors:
                        await connector.run_ended(record.id)
            self._finish(record, outcome)
            self._active -= 1
            self._prune()
            record.done.set()

    def _finish(self, record: RunRecord, outcome: Outcome) -> None:
        """Apply the terminal precedence of contract §2."""
        error: str | None
        if record.budget.failure is not None:
            state, error, result = RunState.FAILED, record.budget.failure, None
        elif outcome.kind == "timeout":
            state, error, result = RunState.TIMED_OUT, outcome.error, None
        elif outcome.kind == "cancelled" or record.cancel_requested:
            state, error, result = RunState.CANCELLED, None, None
        elif outcome.kind == "error":
            state, error, result = RunState.FAILED, outcome.error, None
        else:
            state, error, result = RunState.COMPLETED, None, outcome.result
        record.state = state
        record.error = clip_error(error) if error is not None else None
        record.result = result
        record.ended_at = utc_now()

    async def _pump(self, record: RunRecord, session: WorkerSession,
                    calls: anyio.abc.TaskGroup) -> Outcome:
        dispatch = self._calls.dispatch
        reply = session.reply
        outcome: list[Outcome] = []

        def handle(events: list[Event]) -> bool:
            for event in events:
                if type(event) is HostCall:
                    dispatch(record, reply, calls, event.call_id, event.kind, event.args)
                elif type(event) is Logs:
                    record.logs.extend(event.lines)
                elif type(event) is Ended:
                    outcome.append(self._outcome(record, event))
                    return True
            return False

        await session.run(handle)
        return outcome[0]

    @staticmethod
    def _outcome(record: RunRecord, ended: Ended) -> Outcome:
        if ended.ending is Ending.COMPLETED:
            try:
                result = check_value(ended.result, record.program.outputSchema, "output")
            except ValueRejected as exc:
                return Outcome("error", error=str(exc))
            return Outcome("completed", result=result)
        if ended.ending is Ending.TIMED_OUT:
            return Outcome("timeout", error=ended.error)
        return Outcome("error", error=ended.error)
