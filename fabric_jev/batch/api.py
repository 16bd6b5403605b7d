"""The batch API: `run_batch` (outcomes to a callback) and `batch` (outcomes as an async iterator)."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any

import anyio

from ..approval.question import Approver
from ..contract.config import HostConfig
from ..contract.program import Program, parse_program
from ..errors import ConfigError, JevError
from ..evaluators.base import Evaluator
from .local_backend import Emit, run_local
from .records import BatchItem, BatchOutcome

#: The inputs of a batch: values or `BatchItem`s, from an iterable or an async iterable.
Inputs = Iterable[Any] | AsyncIterable[Any]


def _item(number: int, value: Any) -> BatchItem:
    return value if isinstance(value, BatchItem) else BatchItem(line=number, key=number, value=value)


def as_items(inputs: Iterable[object]) -> Iterable[BatchItem]:
    """Plain input values are numbered from 1; `BatchItem`s pass through."""
    for number, value in enumerate(inputs, start=1):
        yield _item(number, value)


async def as_async_items(inputs: AsyncIterable[object]) -> AsyncIterator[BatchItem]:
    """`as_items` for an async iterable."""
    number = 0
    async for value in inputs:
        number += 1
        yield _item(number, value)


def host_config(config: HostConfig | None, concurrency: int | None) -> tuple[HostConfig, int]:
    """The host config and the number of runs at a time (default: the config's maxConcurrentRuns)."""
    config = config or HostConfig()
    if concurrency is None:
        return config, config.max_concurrent_runs
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= 16:
        raise ConfigError("batch concurrency must be an integer from 1 to 16 (a host's run limit)")
    if concurrency > config.max_concurrent_runs:
        config = HostConfig.model_validate({**config.model_dump(), "maxConcurrentRuns": concurrency})
    return config, concurrency


async def run_batch(
    program: Program | dict[str, Any],
    inputs: Inputs,
    emit: Emit,
    *,
    config: HostConfig | None = None,
    evaluator: Evaluator | str | None = None,
    concurrency: int | None = None,
    ray: bool | str | None = None,
    actors: int | None = None,
    approver: Approver | None = None,
    judgments: bool = False,
) -> None:
    """Run `program` on every input; `await emit(outcome)` as each one ends.

    `evaluator` is an Evaluator, or a spec string (`local`, `fixture:FILE`,
    `typesafe`, ...) as for `fabric-jev run --evaluator`; with Ray it must be a
    spec, since every actor builds its own. `ray` runs on a Ray cluster: True
    for `ray.init()`'s default, or a cluster address; `actors` overrides one
    actor per CPU of the cluster. A malformed or non-compiling program raises
    (LaunchRejected) instead of rejecting every input. `approver` answers the
    calls whose policy asks, for every run (one question at a time); on Ray
    there is none: those calls are refused. With `judgments`, each outcome
    keeps the answers its program received (`outcome.judgments`; on Ray they
    come back from the actor with the outcome): `fabric-jev eval` runs on this
    engine and scores them.
    """
    try:
        await _run(program, inputs, emit, config=config, evaluator=evaluator,
                   concurrency=concurrency, ray=ray, actors=actors, approver=approver, judgments=judgments)
    except BaseExceptionGroup as group:
        raise first_error(group) from None


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """Task groups wrap errors; a caller wants the one that stopped the batch."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    for leaf in leaves:
        if isinstance(leaf, JevError):
            return leaf
    return leaves[0] if len(leaves) == 1 else group


def ray_evaluator(evaluator: Evaluator | str | None, config: HostConfig) -> str | None:
    """The spec every Ray actor builds its own evaluator from; ConfigError for one that cannot go.

    An Evaluator object is not sent to the actors: it may hold credentials, which
    must stay where they are looked up, and a cassette recorder (`record:FILE`)
    would write one copy per actor."""
    if evaluator is not None and not isinstance(evaluator, str):
        raise ConfigError("with Ray, give the evaluator as a spec string (for example "
                          "'fixture:FILE'): every actor builds its own")
    from ..evaluators.select import select

    if select(evaluator, config).spec.partition(":")[0] == "record":
        raise ConfigError("record:FILE cannot be used with Ray: every actor would write its own copy "
                          "of the cassette; record with a local run (one evaluator for all runs)")
    return evaluator


async def _run(program: Program | dict[str, Any], inputs: Inputs, emit: Emit, *,
               config: HostConfig | None, evaluator: Evaluator | str | None,
               concurrency: int | None, ray: bool | str | None, actors: int | None,
               approver: Approver | None = None, judgments: bool = False) -> None:
    parsed = parse_program(program)
    config, concurrency = host_config(config, concurrency)
    if ray is not None and ray is not False:
        from .ray_backend import run_ray

        evaluator = ray_evaluator(evaluator, config)
        if isinstance(inputs, AsyncIterable):
            raise ConfigError("with Ray, give the inputs as a plain iterable, not an async one")
        await run_ray(parsed, as_items(inputs), emit, config=config, evaluator=evaluator,
                      concurrency=concurrency, address=None if ray is True else ray, actors=actors,
                      judgments=judgments)
        return
    if isinstance(evaluator, str) or evaluator is None:
        from ..evaluators.select import build_evaluator

        evaluator = build_evaluator(evaluator, config)
    items = as_async_items(inputs) if isinstance(inputs, AsyncIterable) else as_items(inputs)
    await run_local(parsed, items, emit, config=config, evaluator=evaluator,
                    concurrency=concurrency, approver=approver, judgments=judgments)


async def batch(
    program: Program | dict[str, Any],
    inputs: Inputs,
    *,
    config: HostConfig | None = None,
    evaluator: Evaluator | str | None = None,
    concurrency: int | None = None,
    ray: bool | str | None = None,
    actors: int | None = None,
) -> AsyncIterator[BatchOutcome]:
    """`async for outcome in batch(program, inputs):` — outcomes in the order they end.

    The batch runs while you iterate; a slow consumer holds it back (no
    outcome is buffered). To leave the loop early, wrap the call in
    `contextlib.aclosing` so the runs in flight are cancelled at once.
    """
    send, receive = anyio.create_memory_object_stream[BatchOutcome](0)
    failure: list[Exception] = []

    async def produce() -> None:
        async with send:
            try:
                await run_batch(program, inputs, send.send, config=config, evaluator=evaluator,
                                concurrency=concurrency, ray=ray, actors=actors)
            except Exception as exc:  # re-raised to the iterating caller below, unwrapped
                failure.append(exc)

    async with anyio.create_task_group() as tg, receive:
        tg.start_soon(produce)
        try:
            async for outcome in receive:
                yield outcome
        except GeneratorExit:
            # The caller left the loop (aclose): cancel the runs in flight and end
            # quietly, rather than let GeneratorExit leave the task group as an error.
            tg.cancel_scope.cancel()
            return
    if failure:
        raise failure[0]
