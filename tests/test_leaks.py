from __future__ import annotations

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
