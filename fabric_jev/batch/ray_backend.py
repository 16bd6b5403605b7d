"""Running a batch on a Ray cluster: one actor per CPU slot, each owning a JevHost.

The driver pulls an input only when some actor has a free run slot, so a
file of any size streams through with at most `actors × concurrency` inputs
in flight. Outcomes come back to the caller's `emit` (the same output file,
the same format as a local batch). An actor that dies has its in-flight
inputs retried once on another actor; an input whose second actor dies too
is reported `failed`. When no actor is left, the inputs not yet run are not
reported, and the batch stops with `BatchError` (rerun with `--resume`).
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import anyio

from ..contract.config import HostConfig
from ..contract.program import Program
from ..errors import BatchError, JevError
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


async def run_ray(program: Program, items: Iterable[BatchItem], emit: Emit, *, config: HostConfig,
                  evaluator: str | None, concurrency: int, address: str | None, actors: int | None,
                  on_dispatch: Callable[[BatchItem, Any], None] | None = None) -> None:
    """Run every item on Ray actors. `on_dispatch(item, actor)` is told each hand-out (monitoring)."""
    ray = require_ray()
    from .ray_actor import JevActor

    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise BatchError(f"cannot reach the Ray cluster{f' at {address}' if address else ''}: "
                             f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    handles: list[Any] = []
    try:
        cpus = float(ray.cluster_resources().get("CPU", 1.0))
        count = actors or max(1, int(cpus))
        if count < 1:
            raise BatchError("a Ray batch needs at least one actor")
        remote = ray.remote(num_cpus=min(1.0, cpus / count), max_restarts=0)(JevActor)
        handles = [remote.remote(program.model_dump(), config.model_dump(), evaluator) for _ in range(count)]
        for handle in handles:
            try:
                await handle.start.remote()
            except ray.exceptions.RayError as exc:
                raise _cause(exc, "a Ray actor could not start its host") from None
        dispatch = Dispatch(items)

        async def slot(actor: Any, alive: list[bool]) -> None:
            while alive[0]:
                item = await dispatch.take()
                if item is None:
                    return
                if on_dispatch is not None:
                    on_dispatch(item, actor)
                try:
                    outcome: BatchOutcome = await actor.run.remote(item)
                except ray.exceptions.RayActorError:
                    alive[0] = False  # this actor's other slots stop taking inputs
                    if not dispatch.lost(item):
                        await emit(BatchOutcome.failed(item, ACTOR_DIED_TWICE))
                    return
                except ray.exceptions.RayError as exc:
                    raise _cause(exc, "a Ray actor failed") from None
                dispatch.finished()
                await emit(outcome)

        async with anyio.create_task_group() as tg:
            for handle in handles:
                alive = [True]
                for _ in range(concurrency):
                    tg.start_soon(slot, handle, alive)
        unfinished = dispatch.unfinished
        if unfinished:
            raise BatchError(f"every Ray actor died; {unfinished} inputs were not run "
                             "(rerun with --resume)")
    finally:
        with anyio.CancelScope(shield=True):
            await _stop_all(ray, handles)
            if started_here:
                ray.shutdown()


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
