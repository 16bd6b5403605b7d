"""Running a batch on this machine: one JevHost, a bounded number of runs at a time."""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, Awaitable, Callable, Coroutine, Iterable
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream

from ..approval.question import Approver
from ..contract.config import HostConfig
from ..contract.program import Program
from ..errors import InputInvalid
from ..evaluators.base import Evaluator
from ..host import JevHost
from .records import BatchItem, BatchOutcome, Judgment

Emit = Callable[[BatchOutcome], Awaitable[None]]


async def run_item(host: JevHost, program: Program, item: BatchItem, *,
                   judgments: bool = False) -> BatchOutcome:
    """One input → its outcome. An input the host refuses is `rejected`; a bad program raises.
    With `judgments`, the outcome keeps every answer the program received."""
    if item.error is not None:
        return BatchOutcome.rejected(item, item.error)
    kept: list[Judgment] = []
    started, clock = time.time(), time.perf_counter()
    try:
        envelope = await host.run(program, item.value, on_evaluation=(
            (lambda request, evaluation: kept.append(Judgment(request, evaluation))) if judgments else None))
    except InputInvalid as exc:
        return BatchOutcome.rejected(item, str(exc))
    return BatchOutcome.from_envelope(item, envelope, started=started, seconds=time.perf_counter() - clock,
                                      judgments=tuple(kept))


async def feed(items: Iterable[BatchItem] | AsyncIterable[BatchItem], workers: int,
               work: Callable[[ObjectReceiveStream[BatchItem]], Coroutine[Any, Any, None]]) -> None:
    """Hand items to `workers` consumers through an unbuffered stream: reading waits for a free one."""
    send, receive = anyio.create_memory_object_stream[BatchItem](0)
    async with anyio.create_task_group() as tg:
        for _ in range(workers):
            tg.start_soon(work, receive.clone())
        receive.close()
        async with send:
            if isinstance(items, AsyncIterable):
                async for item in items:
                    await send.send(item)
            else:
                for item in items:
                    await send.send(item)


async def run_local(program: Program, items: Iterable[BatchItem] | AsyncIterable[BatchItem], emit: Emit, *,
                    config: HostConfig, evaluator: Evaluator | None, concurrency: int,
                    approver: Approver | None = None, judgments: bool = False) -> None:
    """Run every item on one host; `emit` gets each outcome as it ends (completion order).

    Cancelling the caller cancels the runs in flight; their outcomes are not
    emitted, so a resumed batch runs them again. With `judgments`, each outcome
    keeps the answers its program received (`fabric-jev eval`).
    """
    async with JevHost(config, evaluator=evaluator, approver=approver) as host:
        async def work(receive: ObjectReceiveStream[BatchItem]) -> None:
            async with receive:
                async for item in receive:
                    await emit(await run_item(host, program, item, judgments=judgments))

        await feed(items, concurrency, work)
