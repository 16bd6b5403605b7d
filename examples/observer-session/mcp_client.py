"""The same observer session as simulate.py, driven entirely from an MCP client.

Run:  .venv/bin/python examples/observer-session/mcp_client.py   (needs the mcp extra)

It starts `fabric-jev mcp` (the official `mcp` SDK's stdio client does that),
opens a Main session, binds the verification-advisor observer to it, posts two
turns — the agent claims success while a check failed — and waits for the
advice. Advice steers the agent, an `agent`-risk call: the server asks this
client's user through an elicitation, which this script prints and answers
"yes, this once" (an agent host would show it to its user). Answers come from
the example's fixture, so the run is deterministic.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent


async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    print("asked:", params.message.replace("\n", " | "))
    return types.ElicitResult(action="accept", content={"decision": "allow"})


async def tool(session: ClientSession, name: str, arguments: dict[str, Any]) -> Any:
    result = await session.call_tool(name, arguments)
    if result.is_error:
        raise SystemExit(f"{name}: {result.content[0].text}")
    return result.structured_content


async def main() -> None:
    server = StdioServerParameters(command=sys.executable, args=[
        "-m", "fabric_jev.cli", "mcp", "--evaluator", f"fixture:{HERE / 'fixture.json'}"])
    async with stdio_client(server) as (read, write), \
            ClientSession(read, write, elicitation_callback=elicit) as session:
        await session.initialize()
        sid = (await tool(session, "jev_session_open", {"sessionId": "demo-session"}))["sessionId"]
        await tool(session, "jev_observe", {
            "sessionId": sid, "program": json.loads((HERE / "advisor.json").read_text()),
            "observe": json.loads((HERE / "observe.json").read_text())})

        await tool(session, "jev_session_post", {"sessionId": sid, "events": [
            {"event": "input", "text": "Fix the failing login test."},
            {"event": "turn_end", "assistantText": ["I changed the session check."],
             "toolResults": [{"toolName": "pytest", "isError": False, "text": "41 passed"}]}]})
        await tool(session, "jev_session_post", {"sessionId": sid, "events": [
            {"event": "input", "text": "Are we done?"},
            {"event": "turn_end", "assistantText": ["Yes, everything passes now!"],
             "toolResults": [{"toolName": "pytest", "isError": True, "text": "1 FAILED tests/test_login.py"}]}]})

        got = await tool(session, "jev_advice", {"sessionId": sid, "waitMs": 60_000})
        for advice in got["advice"]:  # where an agent host would steer its model
            print(f"advice ({advice['delivery']}): {advice['message']}" + (" [stale]" if advice["stale"] else ""))

        closed = await tool(session, "jev_session_close", {"sessionId": sid})
        for watcher in closed["observers"]:
            print("observation:", json.dumps(watcher["observation"]))
            print("observer state:", watcher["state"])


if __name__ == "__main__":
    anyio.run(main)
