from __future__ import annotations

import os

import pytest

from fabric_jev import JevHost, RunState
from tests.conftest import child_pids, open_fds, own_threads, program, wait_gone

pytestmark = pytest.mark.anyio


async def test_close_leaves_no_process_thread_or_fd() -> None:
    fds_before = open_fds()
    threads_before = own_threads()
    children_before = child_pids()  # e.g. a session-wide Chromium started by other tests
    async with JevHost() as host:
        await host.run(program("return 1"), None)
        await host.run(program("for(;;){}"), None)  # killed mid-slice
        await host.run(program("const s='x'.repeat(1<<24); for(;;) s.indexOf('y')"), None)
        await host.spawn(program("await program.sleep(10000)"), None)
        await host.spawn(program("for (;;) await program.sleep(1)"), None)
        assert child_pids(apart_from=children_before), "workers should exist while the host is open"
    # Workers die with the zygote (PDEATHSIG): wait for each to exit.
    await wait_gone(child_pids(apart_from=children_before))
    assert open_fds() == fds_before
    assert own_threads() == threads_before


async def test_each_run_gets_a_fresh_process() -> None:
    async with JevHost() as host:
        first = await host.run(program("globalThis.leak = 'secret'; return 1"), None)
        second = await host.run(program("return typeof globalThis.leak"), None)
    assert first.state is RunState.COMPLETED
    assert second.result == "undefined"


async def test_an_early_zygote_is_the_pools_and_goes_with_it() -> None:
    """`fabric-jev run` starts the zygote before it imports the host (docs/performance.md):
    the host's pool takes that zygote over instead of starting one, and closing the host
    leaves nothing."""
    from fabric_jev.sandbox.pool import early_zygote

    fds_before, children_before = open_fds(), child_pids()
    async with early_zygote():
        zygotes = _direct_children(child_pids(apart_from=children_before))
        assert len(zygotes) == 1, "one zygote, started at once"
        async with JevHost() as host:
            env = await host.spawn(program("await program.sleep(10000)"), None)
            assert _parent(host.worker_pid(env.id)) in zygotes, "the run's worker is the early zygote's"
            assert _direct_children(child_pids(apart_from=children_before)) == zygotes, "no second zygote"
            await host.stop(env.id)
    await wait_gone(child_pids(apart_from=children_before))
    assert open_fds() == fds_before


async def test_an_early_zygote_no_pool_took_over_is_killed_and_reaped() -> None:
    from fabric_jev.sandbox.pool import early_zygote

    fds_before, children_before = open_fds(), child_pids()
    async with early_zygote():
        zygotes = _direct_children(child_pids(apart_from=children_before))
        assert len(zygotes) == 1
    # Reaped on leaving (no zombie left: its /proc entry is gone), its workers dying with it.
    assert not any(os.path.exists(f"/proc/{pid}") for pid in zygotes)
    await wait_gone(child_pids(apart_from=children_before))
    assert open_fds() == fds_before


async def test_a_host_left_with_its_callers_scope_cancelled_leaves_no_zygote_or_fd() -> None:
    """Leaving the host after the caller's scope was cancelled, with no await in between (the
    cancellation first seen while closing), still kills and reaps the zygote and closes its socket:
    the pool's reader task group re-raising the cancellation must not skip the rest of closing."""
    import anyio

    fds_before, children_before = open_fds(), child_pids()
    with anyio.CancelScope() as outer:
        async with JevHost():
            outer.cancel()
    assert not _direct_children(child_pids(apart_from=children_before)), "the zygote is reaped"
    await wait_gone(child_pids(apart_from=children_before))
    assert open_fds() == fds_before


def _parent(pid: int) -> int | None:
    """The parent of a live process, None once it has exited."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return None


def _direct_children(pids: set[int]) -> set[int]:
    return {pid for pid in pids if _parent(pid) == os.getpid()}
