"""JevHost: the registry of runs, the worker pool, the limit on concurrent runs, and
the public API (contract §2). Everything of one run lives in its `Run` (host/run.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any, overload

import anyio
import anyio.lowlevel

from ..capabilities import Connector
from ..contract.config import HostConfig, default_config
from ..contract.envelope import Envelope, ProgressEvent
from ..contract.policy import PolicyOverrides
from ..contract.program import Program
from ..contract.values import JsonInput, JsonObject
from ..errors import HostClosed
from ..evaluators.base import Evaluator
from ..sandbox.pool import WorkerPool
from ..typecheck.checker import checker_status
from .calls import CallServices, EvaluationListener
from .gate import PolicyGate, host_rules
from .launch import admit
from .observing import ObservationSource
from .registry import CapabilityRegistry
from .run import Run, RunServices, WorkerSource, session_limits
from .scheduler import RunScheduler

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
        self._scheduler = RunScheduler(config)  # the runs: retained, holding a slot, or queued
        self._closed = False
        self._entered = False
        self._stack = AsyncExitStack()
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
            self._scheduler.start(await self._stack.enter_async_context(anyio.create_task_group()))
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
            await self._scheduler.cancel_all()
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
                          tuple(run.summary() for run in self._scheduler), ev.mode, ev.problem,
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

    # ------------------------------------------------------------------ launching

    def _get(self, id: str) -> Run:
        return self._scheduler.get(id)

    def _session_text(self) -> str | None:
        """The bound session's latest real input, now."""
        return None if self._observers is None else self._observers.user_text

    async def _launch(self, raw: Program | dict[str, Any], input: JsonInput, *, background: bool,
                      observe: dict[str, Any] | None, intent: str | None = None,
                      grant: Iterable[str] | None = None) -> Run:
        await anyio.lowlevel.checkpoint_if_cancelled()
        if self._closed or self._services is None:
            raise HostClosed("Jev host is closed" if self._closed else "Jev host is not started; "
                             "use `async with JevHost() as host`")
        # Without an intent of its own, a run's calls weigh the bound session's latest real input
        # as it is when each is decided (an observer spawned before the first input sees later ones).
        admitted = await admit(raw, input, background=background, observe=observe,
                               intent=self._session_text if intent is None else intent,
                               grant=grant, capabilities=self.capabilities, gate=self.policy,
                               session_bound=self._observers is not None, config=self.config)
        limits = self.config.effective_limits(admitted.program.limits)
        return await self._scheduler.place(admitted, background=background, services=self._services,
                                           limits=limits, observers=self._observers)


def _deprecated(message: str) -> None:
    import warnings

    warnings.warn(message, DeprecationWarning, stacklevel=3)

