"""A short simulated agent session with a verification-advisor observer.

Run:  .venv/bin/python examples/observer-session/simulate.py

The "agent" claims success while a check failed; the observer (a judgment
program spawned with `observe`) notices and sends one piece of advice, which
the session's delivery callback prints. `advisor.json` and `observe.json` are
the verification-advisor of the Jev skill seed (001), unchanged. Answers come from a fixture so the
run is deterministic; drop `evaluator=` to use the configured evaluator.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from fabric_jev import Advice, FixtureEvaluator, HostConfig, JevHost, MainSession, ToolResult

HERE = Path(__file__).resolve().parent


async def main() -> list[str]:
    delivered: list[str] = []

    async def deliver(advice: Advice) -> None:  # where an agent host would steer its model
        delivered.append(advice.message)
        print(f"advice ({advice.delivery}): {advice.message}")

    session = MainSession("demo-session", deliver=deliver)
    evaluator = FixtureEvaluator.from_file(HERE / "fixture.json")
    program = json.loads((HERE / "advisor.json").read_text())
    # Advice steers the agent: an `agent`-risk call, which this application allows.
    config = HostConfig(approvals={"agent": "allow"})
    async with JevHost(config, evaluator=evaluator) as host:
        host.bind_session(session)
        # The seed's observe options, unchanged (observe.json).
        observe = json.loads((HERE / "observe.json").read_text())
        observer = await host.spawn(program, None, observe=observe)

        session.user_input("Fix the failing login test.")
        session.turn_end(["I changed the session check."],
                         tool_results=[ToolResult("pytest", False, "41 passed")])
        await host.progress(observer.id, after=0)

        session.user_input("Are we done?")
        session.turn_end(["Yes, everything passes now!"],
                         tool_results=[ToolResult("pytest", True, "1 FAILED tests/test_login.py")])
        status = await host.progress(observer.id, after=1)

        for event in host.envelope(observer.id).events:
            print("observer progress:", json.dumps(event.value))
        print("observation:", json.dumps(status.to_json().get("observation")))
        session.shutdown()  # the agent host reloads: observers end and are not restarted
        print("observer state:", (await host.wait(observer.id)).state.value)
    return delivered


if __name__ == "__main__":
    anyio.run(main)
