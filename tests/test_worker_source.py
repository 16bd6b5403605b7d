"""`JevHost(workers=...)`: where runs take their worker is a public seam, as httpx's `transport=`."""

from __future__ import annotations

from types import TracebackType

import pytest

from fabric_jev import FixtureEvaluator, JevHost, SandboxUnavailable
from fabric_jev.testing import InProcessWorkers, WorkerSource
from tests.conftest import child_pids, program

pytestmark = pytest.mark.anyio


class Counting:
    """A source of in-process workers that counts what it handed out."""

    def __init__(self) -> None:
        self.inner = InProcessWorkers()
        self.acquired = 0

    async def acquire(self) -> object:
        self.acquired += 1
        return await self.inner.acquire()


async def test_runs_take_their_workers_from_the_given_source_and_no_pool_is_started() -> None:
    source = Counting()
    before = child_pids()
    async with JevHost(evaluator=FixtureEvaluator({}), workers=source) as host:  # type: ignore[arg-type]
        # The default source is a pool of worker processes forked by a zygote: none was started.
        assert child_pids() - before == set()
        first = await host.run(program("await program.emit({n: input}); return input * 2"), 21)
        second = await host.run(program("return 'again'"))
    assert (first.state.value, first.result, second.result) == ("completed", 42, "again")
    assert [e.value for e in first.events] == [{"n": 21}]
    assert source.acquired == 2


async def test_the_default_source_is_the_pool_of_worker_processes() -> None:
    before = child_pids()
    async with JevHost(evaluator=FixtureEvaluator({})) as host:
        assert child_pids() - before, "the pool's zygote runs while the host is open"
        done = await host.run(program("return 1"))
    assert done.result == 1


class Entered:
    """A source that is an async context manager: the host enters it and closes it with itself."""

    def __init__(self) -> None:
        self.log: list[str] = []

    async def __aenter__(self) -> Entered:
        self.log.append("entered")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.log.append("closed")

    async def acquire(self) -> object:
        self.log.append("acquire")
        raise SandboxUnavailable("no workers here")


async def test_a_source_that_is_a_context_manager_lives_as_long_as_the_host() -> None:
    source = Entered()
    host = JevHost(evaluator=FixtureEvaluator({}), workers=source)  # type: ignore[arg-type]
    assert source.log == []
    async with host:
        assert source.log == ["entered"]
        with pytest.raises(SandboxUnavailable, match="no workers here"):
            await host.run(program("return 1"))
        assert source.log == ["entered", "acquire"]
    assert source.log == ["entered", "acquire", "closed"]


def test_the_in_process_source_is_a_worker_source() -> None:
    source: WorkerSource = InProcessWorkers()
    assert callable(source.acquire)
