"""The host is anyio-native: the same behaviours on the trio backend."""

from __future__ import annotations

import pytest

from fabric_jev import CompileError, FixtureEvaluator, JevHost, RunState
from tests.conftest import child_pids, own_threads, program, wait_gone

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


async def test_runs_budgets_and_evaluations_on_trio() -> None:
    evaluator = FixtureEvaluator({"answers": {"q": {"noul": 0.7}}, "usage": {"input_tokens": 3, "output_tokens": 1}})
    async with JevHost(evaluator=evaluator) as host:
        env = await host.run(program(
            "let s = 0; for (let i = 0; i < 5; i++) { await program.sleep(1); await program.emit(i); s += i; }"
            " const r = await jev.evaluate({state: 'x', questions: {q: {type: 'noul', instructions: '?'}}});"
            " return [s, r.answers.q.noul];", requires=["jev.evaluate"]), None)
        assert env.state is RunState.COMPLETED and env.result == [10, 0.7]
        assert len(env.events) == 5 and env.usage.input_tokens == 3
        with pytest.raises(CompileError):
            await host.run(program("return 1 +"), None)


async def test_runaways_stop_and_close_leave_nothing_on_trio() -> None:
    before_children, before_threads = child_pids(), own_threads()
    async with JevHost() as host:
        assert (await host.run(program("const s = 'x'.repeat(1 << 24); for (;;) s.indexOf('y');"),
                               None)).state is RunState.TIMED_OUT
        env = await host.spawn(program("for (;;) await program.sleep(5);"), None)
        assert (await host.stop(env.id)).state is RunState.CANCELLED
        await host.spawn(program("await program.sleep(10000)"), None)
    assert own_threads() == before_threads
    await wait_gone(child_pids(apart_from=before_children))
