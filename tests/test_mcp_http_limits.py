"""The per-client limits of `fabric-jev mcp --transport streamable-http` (fabric_jev/mcp/clients.py)
and the compiler slots charged to a client (typecheck.slots.SLOT_OWNER), in process."""

from __future__ import annotations

import anyio
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install -e '.[mcp]')")
from fabric_jev.mcp.clients import ClientLimitReached, ClientRuns
from fabric_jev.typecheck.slots import SLOT_OWNER, FairSlots, slot_owner


@pytest.mark.anyio
async def test_a_clients_runs_beyond_its_places_wait_in_its_own_queue() -> None:
    order: list[str] = []
    release = anyio.Event()
    async with anyio.create_task_group() as tg:
        runs = ClientRuns(1, tg)

        async def run(client: str, name: str) -> None:
            async with runs.placed(client):
                order.append(name)
                if client == "a":
                    await release.wait()

        for i in range(3):
            tg.start_soon(run, "a", f"a{i}")
        await anyio.wait_all_tasks_blocked()
        assert runs.in_flight("a") == 1 and runs.waiting("a") == 2
        await run("b", "b0")  # not behind a's queue
        assert order == ["a0", "b0"]
        release.set()
    assert order == ["a0", "b0", "a1", "a2"]
    assert runs.in_flight("a") == 0 and runs.placed_count == {"a": 3, "b": 1}


@pytest.mark.anyio
async def test_a_spawn_beyond_the_places_is_refused_and_its_place_comes_back_when_the_run_ends() -> None:
    ended = anyio.Event()
    async with anyio.create_task_group() as tg:
        runs = ClientRuns(2, tg)
        runs.place_spawned("a")
        runs.release_when("a", ended.wait)
        runs.place_spawned("a")
        runs.unplace_spawned("a")  # that spawn failed: its place is free at once
        runs.place_spawned("a")
        runs.release_when("a", ended.wait)
        with pytest.raises(ClientLimitReached, match="already has 2 runs queued or running"):
            runs.place_spawned("a")
        runs.place_spawned("b")  # another client's places are its own
        runs.unplace_spawned("b")
        ended.set()
    assert runs.in_flight("a") == 0


@pytest.mark.anyio
async def test_compiles_are_charged_to_the_named_client_not_to_each_program() -> None:
    assert slot_owner("triage") == "program:triage"
    slots = FairSlots(2)
    token = SLOT_OWNER.set("client:a")
    try:
        assert slot_owner("triage") == slot_owner("other") == "client:a"
        async with slots.taken(slot_owner("triage")):
            # A's second program does not get the last slot: it is kept for another owner.
            with anyio.move_on_after(0) as scope:
                async with slots.taken(slot_owner("other")):
                    pass
            assert scope.cancelled_caught
    finally:
        SLOT_OWNER.reset(token)
    async with slots.taken(slot_owner("triage")), slots.taken("client:b"):
        assert slots.free == 0


@pytest.mark.anyio
async def test_a_clients_evaluations_wait_in_its_own_queue_apart_from_its_runs() -> None:
    release = anyio.Event()
    done: list[str] = []
    async with anyio.create_task_group() as tg:
        limits = ClientRuns(2, tg)

        async def call(client: str, name: str) -> None:
            async with limits.calling(client):
                if client == "flood":
                    await release.wait()
                done.append(name)

        async with limits.placed("flood"), limits.placed("flood"):  # its run places are all taken
            for i in range(5):
                tg.start_soon(call, "flood", f"flood{i}")
            await anyio.wait_all_tasks_blocked()
            assert limits.calls_in_flight("flood") == 2 and limits.in_flight("flood") == 2
            await call("quiet", "quiet0")  # another client's call is not behind the flood
            assert done == ["quiet0"] and limits.calls_in_flight("quiet") == 0
            release.set()
    assert done[0] == "quiet0" and sorted(done[1:]) == [f"flood{i}" for i in range(5)]
    assert limits.calls_in_flight("flood") == 0 and limits.in_flight("flood") == 0


@pytest.mark.anyio
async def test_a_call_cancelled_while_it_waits_leaves_no_place_behind() -> None:
    release = anyio.Event()
    async with anyio.create_task_group() as tg:
        limits = ClientRuns(1, tg)

        async def hold() -> None:
            async with limits.calling("a"):
                await release.wait()

        tg.start_soon(hold)
        await anyio.wait_all_tasks_blocked()
        with anyio.move_on_after(0.01):
            async with limits.calling("a"):
                pytest.fail("a second call got the client's only place")
        release.set()
    assert limits.calls_in_flight("a") == 0
