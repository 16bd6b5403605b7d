"""Observers over MCP: a whole observer session driven by the official SDK's client."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install -e '.[mcp]')")
from mcp import ClientSession

from tests.conftest import program
from tests.mcp_support import mcp_client

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "observer-session"
FAILED_TURN = [
    {"event": "input", "text": "Are we done?"},
    {"event": "turn_end", "assistantText": ["Yes, everything passes now!"],
     "toolResults": [{"toolName": "pytest", "isError": True, "text": "1 FAILED tests/test_login.py"}]}]
ADVICE = "Check the reported failing verification before claiming completion."
#: Advises once on the first event it sees and returns what advise answered.
ONE_SHOT = program("const e = await program.nextEvent();\n"
                   "return await program.advise({eventId: e.id, message: 'look at ' + e.event});",
                   name="one-shot", requires=["jev.advise"])


@asynccontextmanager
async def server(tmp_path: Path, *args: str, elicit: Any = None) -> AsyncIterator[ClientSession]:
    async with mcp_client(tmp_path, "--evaluator", f"fixture:{EXAMPLE / 'fixture.json'}", *args,
                          elicit=elicit) as session:
        yield session


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def error(session: ClientSession, tool: str, arguments: dict[str, Any]) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error
    return str(result.content[0].text)


async def test_fresh_advice_is_delivered_once_and_overtaken_advice_is_marked_stale(tmp_path: Path) -> None:
    advisor = json.loads((EXAMPLE / "advisor.json").read_text())
    observe = json.loads((EXAMPLE / "observe.json").read_text())
    async with server(tmp_path, "--allow", "agent") as session:
        opened = await call(session, "jev_session_open", {"sessionId": "main-1"})
        observer = await call(session, "jev_observe", {"sessionId": "main-1", "program": advisor,
                                                       "observe": observe})
        await call(session, "jev_session_post", {"sessionId": "main-1", "events": FAILED_TURN})
        peeked = await call(session, "jev_advice", {"sessionId": "main-1", "waitMs": 30_000, "peek": True})
        taken = await call(session, "jev_advice", {"sessionId": "main-1"})
        again = await call(session, "jev_advice", {"sessionId": "main-1"})

        # A second failing turn: advice again (new input reset the one-advice latch)...
        await call(session, "jev_session_post", {"sessionId": "main-1", "events": FAILED_TURN})
        await call(session, "jev_advice", {"sessionId": "main-1", "waitMs": 30_000, "peek": True})
        # ...but Main completes a newer turn before the agent reads it.
        state = await call(session, "jev_session_post", {"sessionId": "main-1", "events": [
            {"event": "turn_start"},
            {"event": "turn_end", "assistantText": ["Fixed it."],
             "toolResults": [{"toolName": "pytest", "isError": False, "text": "42 passed"}]}]})
        late = await call(session, "jev_advice", {"sessionId": "main-1"})
        closed = await call(session, "jev_session_close", {"sessionId": "main-1"})
    assert opened["sessionId"] == "main-1" and observer["state"] == "running"
    [fresh] = peeked["advice"]
    assert fresh["message"] == ADVICE and fresh["stale"] is False and fresh["delivery"] == "steer"
    assert fresh["observerId"] == observer["id"]
    assert taken["advice"] == [fresh] and again["advice"] == []
    [stale] = late["advice"]
    assert stale["sequence"] == 2 and stale["stale"] is True and stale["staleReason"] == "a newer turn completed"
    assert state["completedTurns"] == 3 and state["turnIndex"] == 2
    [watcher] = closed["observers"]
    assert watcher["state"] == "cancelled" and watcher["observation"]["adviceDelivered"] == 2
    assert closed["session"]["halted"] is True and closed["advice"] == []


async def test_a_newer_turn_while_the_user_decides_makes_the_advice_stale(tmp_path: Path) -> None:
    """Advice is an `agent` call: the client's user is asked; meanwhile Main moves on."""
    asked: list[types.ElicitRequestParams] = []
    question = anyio.Event()
    decided = anyio.Event()

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        question.set()
        await decided.wait()
        return types.ElicitResult(action="accept", content={"decision": "allow"})

    async with server(tmp_path, elicit=elicit) as session:
        await call(session, "jev_session_open", {"sessionId": "s"})
        observer = await call(session, "jev_observe", {"sessionId": "s", "program": ONE_SHOT,
                                                       "observe": {"events": ["turn_end"], "delivery": "steer"}})
        await call(session, "jev_session_post", {"sessionId": "s", "events": FAILED_TURN})
        await question.wait()
        await call(session, "jev_session_post", {"sessionId": "s", "events": [
            {"event": "turn_end", "assistantText": ["one more thing"]}]})
        decided.set()
        done = await call(session, "jev_wait", {"id": observer["id"]})
        advice = await call(session, "jev_advice", {"sessionId": "s"})
    assert done["result"] == {"delivered": False, "reason": "stale"}
    assert advice["advice"] == [] and advice["observers"][0]["observation"]["adviceSuppressed"] == 1
    [params] = asked
    assert "capability: jev.advise (risk agent, policy ask)" in params.message
    assert "look at turn_end" in params.message
    assert [(a["ref"], a["approver"]) for a in done["approvals"] if a["ref"] == "jev.advise"] == [
        ("jev.advise", "mcp elicitation")]


async def test_one_advice_per_user_input_across_observers(tmp_path: Path) -> None:
    async with server(tmp_path, "--allow", "agent") as session:
        sid = (await call(session, "jev_session_open", {}))["sessionId"]  # an id is generated
        options = {"events": ["turn_end"], "delivery": "followUp"}
        first = await call(session, "jev_observe", {"sessionId": sid, "program": ONE_SHOT, "observe": options})
        second = await call(session, "jev_observe", {"sessionId": sid, "program": ONE_SHOT, "observe": options})
        await call(session, "jev_session_post", {"sessionId": sid, "events": FAILED_TURN})
        results = [(await call(session, "jev_wait", {"id": run["id"]}))["result"] for run in (first, second)]
        advice = await call(session, "jev_advice", {"sessionId": sid})
    assert sorted(results, key=json.dumps) == [{"delivered": False, "reason": "feedback"}, {"delivered": True}]
    [delivered] = advice["advice"]
    assert delivered["delivery"] == "followUp" and delivered["message"] == "look at turn_end"


async def test_event_text_is_redacted_and_the_queue_is_bounded(tmp_path: Path) -> None:
    reader = program("return await program.nextEvent();", name="reader")
    async with server(tmp_path) as session:
        await call(session, "jev_session_open", {"sessionId": "s"})
        observer = await call(session, "jev_observe", {"sessionId": "s", "program": reader, "observe": {
            "events": ["tool_error"], "include": ["toolResults"], "queueSize": 1}})
        # Three events in one post reach the queue before the observer can take one: two are dropped.
        await call(session, "jev_session_post", {"sessionId": "s", "events": [
            {"event": "tool_error", "toolName": "curl", "text": "first"},
            {"event": "tool_error", "toolName": "curl", "text": "second"},
            {"event": "tool_error", "toolName": "curl",
             "text": "401 with Authorization: Bearer abcDEF123456ghiJKL789mnoPQR"}]})
        done = await call(session, "jev_wait", {"id": observer["id"]})
    event = done["result"]
    assert event["event"] == "tool_error" and event["sessionId"] == "s"
    [result] = event["payload"]["toolResults"]
    assert "abcDEF123456ghiJKL789mnoPQR" not in result["text"] and "[redacted" in result["text"]
    assert done["observation"]["dropped"] == 2 and done["observation"]["received"] == 3


async def test_session_tools_refuse_what_the_library_refuses(tmp_path: Path) -> None:
    async with server(tmp_path) as session:
        unknown = await error(session, "jev_advice", {"sessionId": "nope"})
        await call(session, "jev_session_open", {"sessionId": "s"})
        twice = await error(session, "jev_session_open", {"sessionId": "t"})
        bad_options = await error(session, "jev_observe", {"sessionId": "s", "program": ONE_SHOT,
                                                           "observe": {"events": ["turn_end"], "queueSize": 99}})
        bad_event = await error(session, "jev_session_post", {"sessionId": "s", "events": [{"event": "lunch"}]})
        closed = await call(session, "jev_session_close", {"sessionId": "s"})
        after = await error(session, "jev_session_post", {"sessionId": "s", "events": [{"event": "turn_start"}]})
        reopened = await call(session, "jev_session_open", {"sessionId": "t"})
    assert unknown == "no open session 'nope' (open one with jev_session_open)"
    assert twice == "session 's' is open; close it first (jev_session_close)"
    assert bad_options.startswith("launch rejected: Invalid observe options") and "queueSize" in bad_options
    assert bad_event.startswith("invalid arguments for jev_session_post: ")
    assert closed["observers"] == [] and after.startswith("no open session 's'")
    assert reopened["sessionId"] == "t"


def test_the_mcp_client_example_runs() -> None:
    done = subprocess.run([sys.executable, str(EXAMPLE / "mcp_client.py")], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines.count(f"advice (steer): {ADVICE}") == 1
    [asked] = [line for line in lines if line.startswith("asked: ")]
    assert "capability: jev.advise (risk agent, policy ask)" in asked
    assert "observer state: cancelled" in lines
    [observation] = [json.loads(line.removeprefix("observation: ")) for line in lines
                     if line.startswith("observation: ")]
    assert observation["adviceDelivered"] == 1 and observation["received"] == 2


def test_the_session_tools_are_listed_and_dispatched_by_one_set_of_names() -> None:
    from fabric_jev.mcp.session_tools import SESSION_TOOL_NAMES
    from fabric_jev.mcp.tools import TOOLS

    assert set(TOOLS) >= SESSION_TOOL_NAMES
    for name in SESSION_TOOL_NAMES:
        assert TOOLS[name]["input"]["additionalProperties"] is False and TOOLS[name]["description"]


async def test_the_late_intent_an_observer_started_before_the_input_asks_with_it(tmp_path: Path) -> None:
    # The normal order over MCP: open, observe, then the user's input arrives. The question about
    # the observer's advice shows that input: it is read when the call is asked, not at launch.
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow"})

    async with server(tmp_path, elicit=elicit) as session:
        await call(session, "jev_session_open", {"sessionId": "s"})
        observer = await call(session, "jev_observe", {"sessionId": "s", "program": ONE_SHOT,
                                                       "observe": {"events": ["turn_end"], "delivery": "steer"}})
        await call(session, "jev_session_post", {"sessionId": "s", "events": FAILED_TURN})
        done = await call(session, "jev_wait", {"id": observer["id"]})
    assert done["result"] == {"delivered": True}
    [message] = asked
    assert "user asked: Are we done?" in message
