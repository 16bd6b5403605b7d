"""The host under plain `asyncio.run`, as a user's script or a Ray actor drives it (not `anyio.run`)."""

from __future__ import annotations

import asyncio

from fabric_jev import JevHost, RunState
from fabric_jev.evaluators import FixtureEvaluator

PROGRAM = {
    "name": "asks-twice", "requires": ["jev.evaluate"],
    "code": """
        let yes = 0;
        for (let i = 0; i < 2; i++) {
            const e = await jev.evaluate({state: "s" + i, questions: {ok: {type: "noul", instructions: "ok?"}}});
            if (e.answers.ok.noul >= 0.5) yes++;
            await program.sleep(0);
            program.emit(i);
        }
        return yes;""",
    "inputSchema": {}, "outputSchema": {"type": "integer"},
}


def test_host_calls_work_under_plain_asyncio_run() -> None:
    async def main() -> list[RunState]:
        evaluator = FixtureEvaluator({"answers": {"ok": {"noul": 0.9}}})
        envelopes = []
        async with JevHost(evaluator=evaluator) as host:
            for _ in range(3):  # four at a time: the default concurrent-run limit
                envelopes += await asyncio.gather(*(host.run(PROGRAM, None) for _ in range(4)))
        for envelope in envelopes:
            assert envelope.error is None, envelope.error
            assert envelope.result == 2 and envelope.evaluations == 2
        return [envelope.state for envelope in envelopes]

    assert asyncio.run(main()) == [RunState.COMPLETED] * 12
