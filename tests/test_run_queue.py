"""Runs beyond maxConcurrentRuns wait in the host's bounded FIFO queue (docs/programs.md, "Queued runs")."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from fabric_jev import ConcurrencyLimitReached, HostConfig, JevHost, RunState
from tests.conftest import program

pytestmark = pytest.mark.anyio

#: Sleeps until stopped: it holds its slot for as long as a test needs it to.
HOLDS_A_SLOT = program("await program.sleep(60000); return 'never'")


def test_a_gather_of_twelve_runs_on_a_host_of_four_all_complete() -> None:
    async def main() -> list[object]:
        async with JevHost() as host:  # the default: four at a time
            assert host.config.max_concurrent_runs == 4
            envelopes = await asyncio.gather(*(
                host.run(program("await program.sleep(1); return input * 2"), i) for i in range(12)))
        for envelope in envelopes:
            assert envelope.state is RunState.COMPLETED, envelope.error
        return [envelope.result for envelope in envelopes]

    assert asyncio.run(main()) == [i * 2 for i in range(12)]


async def test_spawn_beyond_the_limit_returns_at_once_a_queued_envelope() -> None:
    async with JevHost(HostConfig(max_concurrent_runs=1)) as host:
        first = await host.spawn(HOLDS_A_SLOT)
        queued = await host.spawn(program("return 7"))
        assert first.state is RunState.RUNNING
        assert queued.state is RunState.QUEUED and not queued.state.terminal
        assert queued.to_json()["state"] == "queued" and "endedAt" not in queued.to_json()
        assert host.worker_pid(queued.id) == 0  # no worker is taken while it waits
        await host.stop(first.id)
        assert (await host.wait(queued.id)).result == 7


async def test_queued_runs_start_first_in_first_out() -> None:
    async with JevHost(HostConfig(max_concurrent_runs=1)) as host:
        first = await host.spawn(HOLDS_A_SLOT)
        second = await host.spawn(HOLDS_A_SLOT)
        third = await host.spawn(HOLDS_A_SLOT)
        await host.stop(first.id)
        # The freed slot went to the oldest waiting run, synchronously with the end of the first.
        assert host.envelope(second.id).state is RunState.RUNNING
        assert host.envelope(third.id).state is RunState.QUEUED
        await host.stop(second.id)
        assert host.envelope(third.id).state is RunState.RUNNING


async def test_a_new_launch_does_not_jump_the_queue() -> None:
    async with JevHost(HostConfig(max_concurrent_runs=1)) as host:
        first = await host.spawn(HOLDS_A_SLOT)
        waiting = await host.spawn(HOLDS_A_SLOT)
        await host.stop(first.id)
        late = await host.spawn(program("return 1"))
        assert host.envelope(waiting.id).state is RunState.RUNNING
        assert late.state is RunState.QUEUED


async def test_stop_cancels_a_queued_run_before_it_starts() -> None:
    async with JevHost(HostConfig(max_concurrent_runs=1)) as host:
        first = await host.spawn(HOLDS_A_SLOT)
        queued = await host.spawn(program("program.emit('ran'); return 1"))
        after = await host.spawn(program("return 2"))
        stopped = await host.stop(queued.id)
        assert stopped.state is RunState.CANCELLED and stopped.error is None
        assert stopped.events == () and stopped.ended_at is not None
        assert (await host.stop(queued.id)).state is RunState.CANCELLED  # idempotent
        await host.stop(first.id)
        assert (await host.wait(after.id)).result == 2  # the queue moved on past the cancelled run
        assert host.envelope(queued.id).state is RunState.CANCELLED  # it never ran


async def test_a_cancelled_caller_cancels_its_queued_foreground_run() -> None:
    async with JevHost(HostConfig(max_concurrent_runs=1)) as host:
        first = await host.spawn(HOLDS_A_SLOT)
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(host.run, program("return 1"))
                await anyio.wait_all_tasks_blocked()  # the foreground run is queued and waited for
                scope.cancel()
        [_, foreground] = host.status().runs
        assert foreground.state is RunState.CANCELLED
        await host.stop(first.id)
        assert [run.state for run in host.status().runs] == [RunState.CANCELLED, RunState.CANCELLED]


async def test_close_cancels_queued_runs() -> None:
    host = JevHost(HostConfig(max_concurrent_runs=1))
    waited: list[RunState] = []

    async def wait(id: str) -> None:
        waited.append((await host.wait(id)).state)

    async with anyio.create_task_group() as tg, host:
        await host.spawn(HOLDS_A_SLOT)
        queued = await host.spawn(program("return 1"))
        tg.start_soon(wait, queued.id)
        await anyio.wait_all_tasks_blocked()  # the watcher waits on the queued run
    assert waited == [RunState.CANCELLED]


async def test_a_full_queue_raises_concurrency_limit_reached() -> None:
    async with JevHost(HostConfig(max_concurrent_runs=1, max_queued_runs=2)) as host:
        await host.spawn(HOLDS_A_SLOT)
        await host.spawn(HOLDS_A_SLOT)
        await host.spawn(HOLDS_A_SLOT)
        with pytest.raises(ConcurrencyLimitReached,
                           match=r"Jev run queue is full \(2 waiting behind 1 running; maxQueuedRuns 2\)"):
            await host.spawn(program("return 1"))
        assert len(host.status().runs) == 3  # the refused launch made no run


async def test_no_queue_refuses_at_once() -> None:
    async with JevHost(HostConfig(max_concurrent_runs=1, max_queued_runs=0)) as host:
        first = await host.spawn(HOLDS_A_SLOT)
        with pytest.raises(ConcurrencyLimitReached, match=r"concurrent-run limit reached \(1; maxQueuedRuns is 0\)"):
            await host.spawn(program("return 1"))
        await host.stop(first.id)
        assert (await host.run(program("return 1"))).result == 1


async def test_status_shows_queued_runs() -> None:
    async with JevHost(HostConfig(max_concurrent_runs=1)) as host:
        await host.spawn(HOLDS_A_SLOT)
        queued = await host.spawn(HOLDS_A_SLOT)
        states = {run.id: run.state for run in host.status().runs}
        assert states[queued.id] is RunState.QUEUED
        assert [run["state"] for run in host.status().to_json()["runs"]] == ["running", "queued"]


async def test_a_queued_run_that_does_not_compile_ends_failed() -> None:
    # Its launch returned long before a worker could compile it: the envelope says why it failed.
    async with JevHost(HostConfig(max_concurrent_runs=1)) as host:
        first = await host.spawn(HOLDS_A_SLOT)
        broken = await host.spawn(program("return ((("))
        assert broken.state is RunState.QUEUED
        await host.stop(first.id)
        ended = await host.wait(broken.id)
        assert ended.state is RunState.FAILED
        assert ended.error is not None and ended.error.startswith("Jev program does not compile")
        assert (await host.run(program("return 3"))).result == 3  # its slot was given back


def test_max_queued_runs_is_clamped_like_every_config_number() -> None:
    assert HostConfig().max_queued_runs == 1_000
    assert HostConfig.parse({"maxQueuedRuns": 10**9}).max_queued_runs == 100_000
    assert HostConfig.parse({"maxQueuedRuns": -5}).max_queued_runs == 0
