"""JevHost: the registry of runs, the worker pool, the limit on concurrent runs, and
the public API (contract §2). Everything of one run lives in its `Run` (host/run.py)."""

from __future__ import annotations

import contextvars
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, overload

import anyio
import anyio.abc
import anyio.lowlevel

from ..contract.config import HostConfig, default_config
from ..contract.envelope import Envelope, ProgressEvent
from ..contract.policy import PolicyOverrides
from ..contract.program import Program
from ..contract.values import JsonInput, JsonObject
from ..errors import ConcurrencyLimitReached, HostClosed, UnknownRun
from ..evaluators.base import Evaluator
from ..sandbox.pool import WorkerPool
from ..typecheck.checker import checker_status
from .calls import CallServices, EvaluationListener
from .gate import PolicyGate, host_rules
from .launch import admit, load_run, queue_run
from .observing import ObservationSource
from .registry import CapabilityRegistry, Connector
from .run import Run, RunServices, WorkerSource, session_limits

if TYPE_CHECKING:
    from ..approval.question import Approver  # loaded when a call must be asked
    from ..approval.rules import Rule
    from .status import HostStatus  # loaded when a status is asked for (start-up of `run`)


class JevHost:
    """Runs judgment programs in sandboxed QuickJS workers.

    Use as an async context manager::

        async with JevHost() as host:
            envelope = await host.run(program, input)

    Runs belong to this object: they are not durable across restarts, and
    `close()` cancels every running one.
    """

    def __init__(self, config: HostConfig | None = None, *, evaluator: Evaluator | str | None = None,
                 capabilities: CapabilityRegistry | None = None,
                 approver: Approver | None = None, rules: Iterable[Rule] = (),
                 workers: WorkerSource | None = None) -> None:
        """`evaluator` is an Evaluator or a spec string as for `--evaluator`
        (``"fixture:FILE"``, ``"typesafe"``, ...); without one, the config's
        route, else the offline local evaluator. The host closes it.
        `approver` decides the calls whose risk policy is `ask` (and what `auto`
        hands on): ``async def approver(call: CapabilityCall) -> Decision``.
        Without one, those calls are refused. `rules` are permission rules besides the
        config's (the command line passes the project's and the user's settings here;
        docs/approvals.md). `workers` is where runs take their worker: by default a warm pool
        of sandboxed worker processes (`warmWorkers` of them), started when the host is
        entered; a test or a benchmark may give its own `WorkerSource`, as httpx's clients take
        a `transport=` (a source that is an async context manager is entered and closed with
        the host; docs/architecture.md, "The worker source")."""
        self.config = config = config or default_config()
        if evaluator is None or isinstance(evaluator, str):
            from ..evaluators.select import build_evaluator

            evaluator = build_evaluator(evaluator, config)
        self.evaluator: Evaluator = evaluator
        self.capabilities = capabilities or CapabilityRegistry()
        self.policy = PolicyGate(
            dict(config.approvals), approver=approver, evaluator=evaluator,
            threshold=config.auto_approval_threshold, approver_timeout_s=config.approver_timeout_ms / 1000,
            classifier_timeout_s=config.request_timeout_ms / 1000, max_request_bytes=config.max_request_bytes,
            overrides=PolicyOverrides(config.allow, config.deny), **host_rules(config, rules, deferred=True))
        self._runs: OrderedDict[str, Run] = OrderedDict()
        self._active = 0  # runs holding a slot (loading or running): at most max_concurrent_runs
        self._queue: deque[Run] = deque()  # launched beyond the slots, first in first out
        # Each queued run's launching context (whose client it asks, over MCP), by run id: it starts
        # in the task of whichever run freed the slot, which may be another client's.
        self._launched_in: dict[str, contextvars.Context] = {}
        self._closed = False
        self._entered = False
        self._stack = AsyncExitStack()
        self._tg: anyio.abc.TaskGroup | None = None
        self._services: RunServices | None = None  # made on entry, once the pool exists
        self._observers: ObservationSource | None = None  # a bound session (bind_session)
        self._connectors: list[Connector] = []
        self._workers = workers
        # Connectors named in the config come from their plugins (fabric_jev.plugins).
        for name, settings in config.connectors.items():
            from ..plugins import build_connector

            self.add_connector(build_connector(name, settings))

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> JevHost:
        if self._entered:
            raise RuntimeError("a JevHost can be entered only once")
        self._entered = True
        try:
            workers = self._workers if self._workers is not None else WorkerPool(warm=self.config.warm_workers)
            if isinstance(workers, AbstractAsyncContextManager):
                await self._stack.enter_async_context(workers)
            self._tg = await self._stack.enter_async_context(anyio.create_task_group())
        except BaseException:
            await self._stack.aclose()
            raise
        config = self.config
        self._services = RunServices(
            workers, session_limits(config.memory_limit_bytes),
            CallServices(self.evaluator, self.capabilities, self.policy,
                         request_timeout_s=config.request_timeout_ms / 1000,
                         max_request_bytes=config.max_request_bytes),
            connectors=self._connectors)  # the live list: connectors added later count
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Cancel every running run, wait for them, clear history. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            for run in list(self._queue):  # first, so that no queued run takes a freed slot
                run.cancel()
            for run in list(self._runs.values()):
                run.cancel()
            for run in list(self._runs.values()):
                await run.done.wait()
            self._runs.clear()
            for connector in self._connectors:
                await connector.aclose()
            await self.evaluator.aclose()
        await self._stack.aclose()

    # ------------------------------------------------------------------ public API

    async def run(self, program: Program | dict[str, Any], input: JsonInput = None, *,
                  on_event: Callable[[ProgressEvent], None] | None = None,
                  intent: str | None = None, grant: Iterable[str] | None = None,
                  on_evaluation: EvaluationListener | None = None) -> Envelope:
        """Launch in the foreground and wait for the terminal envelope.

        Beyond `max_concurrent_runs` the run first waits its turn in the host's queue.
        `on_event` is called with each progress event as it is emitted.
        `on_evaluation(request, evaluation)` is called with each answer the
        program receives from `jev.evaluate`, as it is handed over (an answer
        withheld by a budget is not): the raw judgments behind the result, which
        `fabric-jev eval` keeps per line. Both are called in the run's task and
        must not block.
        Cancelling the caller cancels the run (and still waits for it to end).
        `intent` is what the user asked for (the auto-approval classifier's user
        text; default: the bound session's latest input). `grant` is the caller's
        own capability set: a program that requires more is refused.
        """
        run = await self._launch(program, input, background=False, observe=None,
                                 intent=intent, grant=grant)
        run.ring.listener = on_event
        run.listen_evaluations(on_evaluation)
        try:
            await run.done.wait()
        except BaseException:
            await run.stop()
            raise
        return run.envelope()

    async def spawn(self, program: Program | dict[str, Any], input: JsonInput = None, *,
                    observe: dict[str, Any] | None = None, intent: str | None = None,
                    grant: Iterable[str] | None = None) -> Envelope:
        """Launch in the background; returns the `running` envelope before the first tick,
        or at once the `queued` one when `max_concurrent_runs` are running (it starts, first
        in first out, when a slot is free; `stop` ends it `cancelled` while it waits).

        `intent` and `grant` as for `run`.
        """
        run = await self._launch(program, input, background=True, observe=observe,
                                 intent=intent, grant=grant)
        return run.envelope()

    def envelope(self, id: str, after: int = 0) -> Envelope:
        """A run's envelope now, with the events whose sequence is over `after`."""
        return self._get(id).envelope(after)

    @overload
    def status(self) -> HostStatus: ...

    @overload
    def status(self, id: str, after: int = 0) -> Envelope: ...

    def status(self, id: str | None = None, after: int = 0) -> HostStatus | Envelope:
        """The evaluator's route, model and credential presence, and every retained run.

        `status(id, after)` is deprecated (0.2.0; removed in 0.3.0): use `envelope(id, after)`.
        """
        if id is not None:
            _deprecated("host.status(id) is deprecated and will be removed in 0.3.0: use host.envelope(id, after)")
            return self.envelope(id, after)
        from .status import HostStatus

        ev = self.evaluator.status()
        return HostStatus(ev.credentials, ev.model, ev.route,
                          tuple(run.summary() for run in self._runs.values()), ev.mode, ev.problem,
                          checker_status(self.config))

    def host_status(self) -> JsonObject:
        """Deprecated (0.2.0; removed in 0.3.0): the status as JSON, `status().to_json()`."""
        _deprecated("host.host_status() is deprecated and will be removed in 0.3.0: use host.status(), "
                    "and its to_json() for the JSON")
        return self.status().to_json()

    def worker_pid(self, id: str) -> int:
        """The process id of the worker that ran (or runs) the program: diagnostics only.

        The worker is gone once the run is terminal; the id may then belong to
        another process."""
        return self._get(id).worker_pid

    async def progress(self, id: str, after: int = 0) -> Envelope:
        """Wait until the run has an event with sequence > `after`, or is terminal."""
        return await self._get(id).progress(after)

    async def advise(self, id: str, advice: dict[str, Any]) -> dict[str, Any]:
        """Advice on behalf of an observing run: the same checks as `program.advise`."""
        return await self._get(id).advise(advice)

    async def wait(self, id: str) -> Envelope:
        """Wait for a run to be terminal. Cancelling the wait leaves the run running.

        `join` is the same method under the name seed 001 also gives it."""
        return await self._get(id).wait()

    # Seed 001: "wait is canonical: jev.join({id}) aliases jev.wait({id})" — one method, two names.
    join = wait

    async def stop(self, id: str) -> Envelope:
        """Cancel a run and wait until it is terminal. Idempotent."""
        return await self._get(id).stop()

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

    # ------------------------------------------------------------------ the registry of runs

    def _get(self, id: str) -> Run:
        run = self._runs.get(id) if isinstance(id, str) else None
        if run is None:
            raise UnknownRun(str(id))
        return run

    def _session_text(self) -> str | None:
        """The bound session's latest real input, now."""
        return None if self._observers is None else self._observers.user_text

    async def _launch(self, raw: Program | dict[str, Any], input: JsonInput, *, background: bool,
                      observe: dict[str, Any] | None, intent: str | None = None,
                      grant: Iterable[str] | None = None) -> Run:
        await anyio.lowlevel.checkpoint_if_cancelled()
        if self._closed or self._tg is None or self._services is None:
            raise HostClosed("Jev host is closed" if self._closed else "Jev host is not started; "
                             "use `async with JevHost() as host`")
        # Without an intent of its own, a run's calls weigh the bound session's latest real input
        # as it is when each is decided (an observer spawned before the first input sees later ones).
        admitted = await admit(raw, input, background=background, observe=observe,
                               intent=self._session_text if intent is None else intent,
                               grant=grant, capabilities=self.capabilities, gate=self.policy,
                               session_bound=self._observers is not None, config=self.config)
        limits = self.config.effective_limits(admitted.program.limits)
        config = self.config
        if self._active >= config.max_concurrent_runs or self._queue:  # FIFO: none jumps the queue
            if len(self._queue) >= config.max_queued_runs:
                raise ConcurrencyLimitReached(
                    f"Jev run queue is full ({len(self._queue)} waiting behind "
                    f"{config.max_concurrent_runs} running; maxQueuedRuns {config.max_queued_runs})"
                    if config.max_queued_runs else
                    f"Jev concurrent-run limit reached ({config.max_concurrent_runs}; maxQueuedRuns is 0)")
            run = queue_run(admitted, background=background, services=self._services, limits=limits,
                            observers=self._observers)
            run.left_queue = self._left_queue
            self._queue.append(run)
            self._launched_in[run.id] = contextvars.copy_context()
        else:
            self._active += 1
            try:
                run = await load_run(admitted, background=background, services=self._services,
                                     limits=limits, observers=self._observers)
            except BaseException:
                self._active -= 1
                self._start_queued()
                raise
            self._tg.start_soon(partial(run.drive, self._released))
        self._runs[run.id] = run
        self._prune()
        return run

    def _released(self, run: Run) -> None:
        """A run has ended: its slot goes to the first queued run, and it may now be pruned."""
        self._active -= 1
        self._start_queued()
        self._prune()

    def _left_queue(self, run: Run) -> None:
        """A queued run was cancelled before it started."""
        self._queue.remove(run)
        self._launched_in.pop(run.id, None)
        self._prune()

    def _start_queued(self) -> None:
        """Give free slots to queued runs, oldest first."""
        while self._queue and self._active < self.config.max_concurrent_runs and self._tg is not None:
            run = self._queue.popleft()
            run.start()
            self._active += 1
            launched_in = self._launched_in.pop(run.id, None) or contextvars.copy_context()
            launched_in.run(self._tg.start_soon, self._load_and_drive, run)

    async def _load_and_drive(self, run: Run) -> None:
        """A run that waited: its launch already returned, so failing to load ends it `failed`."""
        try:
            await run.load()
        except BaseException as exc:
            run.end_unstarted(str(exc) if isinstance(exc, Exception) else "Jev host is closing")
            self._released(run)
            if not isinstance(exc, Exception):
                raise
            return
        await run.drive(self._released)

    def _prune(self) -> None:
        """Drop the oldest terminal runs beyond maxRetainedRuns (running and queued ones are kept)."""
        excess = len(self._runs) - self.config.max_retained_runs
        if excess <= 0:
            return
        for rid in [rid for rid, r in self._runs.items() if r.state.terminal][:excess]:
            del self._runs[rid]


def _deprecated(message: str) -> None:
    import warnings

    warnings.warn(message, DeprecationWarning, stacklevel=3)

