"""Running a batch on a Ray cluster: one actor per CPU slot, each owning a JevHost.

The driver pulls an input only when some actor has a free run slot, so a
file of any size streams through with at most `actors × concurrency` inputs
in flight. Outcomes come back to the caller's `emit` (the same output file,
the same format as a local batch). An actor that dies has its in-flight
inputs retried once on another actor; an input whose second actor dies too
is reported `failed`. When no actor is left, the inputs not yet run are not
reported, and the batch stops with `BatchError` (rerun with `--resume`).

The actors of one host config and evaluator are an `ActorPool`: a batch runs
its one program through a pool of its own (`run_ray`); `fabric-jev eval
--ray` runs every variant of a cell's evaluator through one pool, inside one
Ray session (`ray_session`), with each line's judgments coming back with its
outcome.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

import anyio

from ..contract.config import HostConfig
from ..contract.program import Program
from ..errors import BatchError, JevError
from ..evaluators.base import EvaluatorStatus
from .local_backend import Emit
from .records import BatchItem, BatchOutcome

ACTOR_DIED_TWICE = "the Ray actor running this input died, and so did the one it was retried on"
STOP_TIMEOUT_S = 10.0


def require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BatchError("--ray needs the ray extra: pip install 'fabric-jev[ray]'") from None
    return ray


class Dispatch:
    """Hands out inputs (retries first) and knows when nothing is left or in flight."""

    def __init__(self, items: Iterable[BatchItem]) -> None:
        self._items: Iterator[BatchItem] = iter(items)
        self._exhausted = False
        self.retries: deque[BatchItem] = deque()
        self.retried: set[int] = set()
        self.in_flight = 0
        self._changed = anyio.Event()

    async def take(self) -> BatchItem | None:
        """The next input for a free slot; None once every input has ended."""
        while True:
            if self.retries:
                self.in_flight += 1
                return self.retries.popleft()
            if not self._exhausted:
                item = next(self._items, None)  # read lazily: the back-pressure on the inputs file
                if item is not None:
                    self.in_flight += 1
                    return item
                self._exhausted = True
            if self.in_flight == 0:
                return None
            await self._changed.wait()  # an input in flight may still come back as a retry

    def finished(self) -> None:
        self.in_flight -= 1
        self._notify()

    def lost(self, item: BatchItem) -> bool:
        """The actor running `item` died: queue it once more; False if it had its retry."""
        self.in_flight -= 1
        first = item.line not in self.retried
        if first:
            self.retried.add(item.line)
            self.retries.append(item)
        self._notify()
        return first

    @property
    def unfinished(self) -> int:
        """Inputs that were neither run nor reported (only meaningful once no actor is left)."""
        rest = len(self.retries)
        if not self._exhausted:
            rest += sum(1 for _ in self._items)
        return rest

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()


@contextlib.asynccontextmanager
async def ray_session(address: str | None) -> AsyncIterator[Any]:
    """The `ray` module, connected: to the cluster at `address` (None: `ray.init()`'s default,
    `RAY_ADDRESS` or a new local cluster), or as it is if Ray is initialized in this process
    already. A session started here is shut down here; one that was running is left running."""
    ray = require_ray()
    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise BatchError(f"cannot reach the Ray cluster{f' at {address}' if address else ''}: "
                             f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    try:
        yield ray
    finally:
        if started_here:
            ray.shutdown()


class ActorPool:
    """Started actors of one host config and evaluator; any number of programs run through them.

    `status` is the evaluator's, as the first actor built it (route, model,
    credential presence). An actor that dies stays dead for the pool's
    later runs; a run with no actor left reports nothing and raises.
    """

    def __init__(self, ray: Any, handles: list[Any], status: EvaluatorStatus) -> None:
        self._ray = ray
        self._handles = handles
        self._alive = [True] * len(handles)
        self._programs = 0
        self.status = status

    @property
    def actors(self) -> int:
        """How many actors are alive."""
        return sum(self._alive)

    async def run(self, program: Program, items: Iterable[BatchItem], emit: Emit, *, concurrency: int,
                  judgments: bool = False, on_dispatch: Callable[[BatchItem, Any], None] | None = None) -> None:
        """Run every item: `concurrency` at a time on each live actor, so at most
        `actors × concurrency` in flight; `emit` each outcome as it comes back. With
        `judgments`, each outcome keeps the answers its program received.
        `on_dispatch(item, actor)` is told each hand-out (monitoring)."""
        ray = self._ray
        self._programs += 1
        number = self._programs
        shipped = program.model_dump()
        sent = [(index, self._handles[index].add_program.remote(number, shipped))
                for index, alive in enumerate(self._alive) if alive]
        for index, ref in sent:
            try:
                await ref
            except ray.exceptions.RayActorError:
                self._alive[index] = False
            except ray.exceptions.RayError as exc:
                raise _cause(exc, "a Ray actor could not take the program") from None
        dispatch = Dispatch(items)

        async def slot(index: int) -> None:
            actor = self._handles[index]
            while self._alive[index]:
                item = await dispatch.take()
                if item is None:
                    return
                if on_dispatch is not None:
                    on_dispatch(item, actor)
                try:
                    outcome: BatchOutcome = await actor.run.remote(item, number, judgments)
                except ray.exceptions.RayActorError:
                    self._alive[index] = False  # this actor's other slots stop taking inputs
                    if not dispatch.lost(item):
                        await emit(BatchOutcome.failed(item, ACTOR_DIED_TWICE))
                    return
                except ray.exceptions.RayError as exc:
                    raise _cause(exc, "a Ray actor failed") from None
                dispatch.finished()
                await emit(outcome)

        async with anyio.create_task_group() as tg:
            for index, alive in enumerate(self._alive):
                if alive:
                    for _ in range(concurrency):
                        tg.start_soon(slot, index)
        unfinished = dispatch.unfinished
        if unfinished:
            raise BatchError(f"every Ray actor died; {unfinished} inputs were not run "
                             "(rerun with --resume)")


@contextlib.asynccontextmanager
async def actor_pool(ray: Any, config: HostConfig, evaluator: str | None,
                     actors: int | None) -> AsyncIterator[ActorPool]:
    """One actor per CPU of the cluster (or `actors`), each with its host and its evaluator built
    from the spec there; every actor is stopped (its workers with it) when the block ends.

    What travels to an actor is the host config and the spec, as for every Ray batch: an
    evaluator's credentials are looked up on its node, never sent from here."""
    from .ray_actor import JevActor

    handles: list[Any] = []
    try:
        cpus = float(ray.cluster_resources().get("CPU", 1.0))
        count = actors or max(1, int(cpus))
        if count < 1:
            raise BatchError("a Ray batch needs at least one actor")
        remote = ray.remote(num_cpus=min(1.0, cpus / count), max_restarts=0)(JevActor)
        handles = [remote.remote(config.model_dump(), evaluator) for _ in range(count)]
        starting = [handle.start.remote() for handle in handles]  # the hosts start side by side
        statuses: list[EvaluatorStatus] = []
        for ref in starting:
            try:
                _, status = await ref
            except ray.exceptions.RayError as exc:
                raise _cause(exc, "a Ray actor could not start its host") from None
            statuses.append(status)
        yield ActorPool(ray, handles, statuses[0])
    finally:
        with anyio.CancelScope(shield=True):
            await _stop_all(ray, handles)


async def run_ray(program: Program, items: Iterable[BatchItem], emit: Emit, *, config: HostConfig,
                  evaluator: str | None, concurrency: int, address: str | None, actors: int | None,
                  on_dispatch: Callable[[BatchItem, Any], None] | None = None, judgments: bool = False) -> None:
    """Run every item on Ray actors started for this batch (`ActorPool.run`)."""
    async with ray_session(address) as ray, actor_pool(ray, config, evaluator, actors) as pool:
        await pool.run(program, items, emit, concurrency=concurrency, judgments=judgments, on_dispatch=on_dispatch)


def _cause(exc: Any, context: str) -> BaseException:
    """A remote error as ours: our own errors keep their one line; others get a short one."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, JevError):
        return cause
    first = str(cause or exc).strip().splitlines()
    return BatchError(f"{context}: {first[-1] if first else type(exc).__name__}")


async def _stop_all(ray: Any, handles: list[Any]) -> None:
    """Close every host (its workers with it), then end the actors."""
    with anyio.move_on_after(STOP_TIMEOUT_S):
        for handle in handles:
            with contextlib.suppress(ray.exceptions.RayError):  # already dead: its workers died with it
                await handle.stop.remote()
    for handle in handles:
        ray.kill(handle)
