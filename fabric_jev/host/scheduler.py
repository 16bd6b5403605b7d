"""The host's runs in time: every retained run by id, the slots, the queue, and pruning.

At most `maxConcurrentRuns` runs hold a slot (loading or running); a launch beyond
them waits in a first-in first-out queue of at most `maxQueuedRuns`, and takes the
first slot freed. Terminal runs are kept for `envelope`/`status` until there are
more than `maxRetainedRuns`, oldest dropped first. `JevHost` (host.py) admits a
launch and hands it here; this module decides when it runs.
"""

from __future__ import annotations

import contextvars
from collections import OrderedDict, deque
from collections.abc import Iterator
from functools import partial

import anyio.abc

from ..contract.config import EffectiveLimits, HostConfig
from ..errors import ConcurrencyLimitReached, UnknownRun
from .launch import Admission, load_run, queue_run
from .observing import ObservationSource
from .run import Run, RunServices


class RunScheduler:
    """The runs of one host: retained by id, given slots oldest first, driven in its task group."""

    def __init__(self, config: HostConfig) -> None:
        self._config = config
        self._runs: OrderedDict[str, Run] = OrderedDict()
        self._active = 0  # runs holding a slot (loading or running): at most max_concurrent_runs
        self._queue: deque[Run] = deque()  # launched beyond the slots, first in first out
        # Each queued run's launching context (whose client it asks, over MCP), by run id: it starts
        # in the task of whichever run freed the slot, which may be another client's.
        self._launched_in: dict[str, contextvars.Context] = {}
        self._tg: anyio.abc.TaskGroup | None = None  # the host's, given on entry

    def start(self, tg: anyio.abc.TaskGroup) -> None:
        """Drive runs in `tg` (the host's task group) from now on."""
        self._tg = tg

    def get(self, id: str) -> Run:
        """The retained run `id`; UnknownRun if there is none (or `id` is not a string)."""
        run = self._runs.get(id) if isinstance(id, str) else None
        if run is None:
            raise UnknownRun(str(id))
        return run

    def __iter__(self) -> Iterator[Run]:
        """Every retained run, oldest first."""
        return iter(self._runs.values())

    async def place(self, admitted: Admission, *, background: bool, services: RunServices,
                    limits: EffectiveLimits, observers: ObservationSource | None) -> Run:
        """Start an admitted launch in a free slot, or queue it; ConcurrencyLimitReached when the
        queue is full (or none is allowed)."""
        assert self._tg is not None, "the host starts the scheduler before any launch"
        config = self._config
        if self._active >= config.max_concurrent_runs or self._queue:  # FIFO: none jumps the queue
            if len(self._queue) >= config.max_queued_runs:
                raise ConcurrencyLimitReached(
                    f"Jev run queue is full ({len(self._queue)} waiting behind "
                    f"{config.max_concurrent_runs} running; maxQueuedRuns {config.max_queued_runs})"
                    if config.max_queued_runs else
                    f"Jev concurrent-run limit reached ({config.max_concurrent_runs}; maxQueuedRuns is 0)")
            run = queue_run(admitted, background=background, services=services, limits=limits,
                            observers=observers)
            run.left_queue = self._left_queue
            self._queue.append(run)
            self._launched_in[run.id] = contextvars.copy_context()
        else:
            self._active += 1
            try:
                run = await load_run(admitted, background=background, services=services,
                                     limits=limits, observers=observers)
            except BaseException:
                self._active -= 1
                self._start_queued()
                raise
            self._tg.start_soon(partial(run.drive, self._released))
        self._runs[run.id] = run
        self._prune()
        return run

    async def cancel_all(self) -> None:
        """Cancel every run, queued ones first (so that none takes a freed slot), wait for each to
        end, and forget them all."""
        for run in list(self._queue):
            run.cancel()
        for run in list(self._runs.values()):
            run.cancel()
        for run in list(self._runs.values()):
            await run.done.wait()
        self._runs.clear()

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
        while self._queue and self._active < self._config.max_concurrent_runs and self._tg is not None:
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
        excess = len(self._runs) - self._config.max_retained_runs
        if excess <= 0:
            return
        for rid in [rid for rid, r in self._runs.items() if r.state.terminal][:excess]:
            del self._runs[rid]
