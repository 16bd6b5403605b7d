"""An `ask` over MCP is an elicitation to the client's user: the official SDK's client answers it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install -e '.[mcp]')")
from mcp import ClientSession

from fabric_jev.mcp.asking import NO_ELICITATION
from tests.conftest import program
from tests.mcp_support import mcp_client

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parent.parent
FIXTURE = {"answers": {"q": {"noul": 0.75}}, "usage": {"input_tokens": 1, "output_tokens": 1}}
ASKING = """
const out = [];
for (let i = 0; i < input.n; i++) {
  try {
    const a = await jev.evaluate({state: 'state ' + i, questions: {q: {type: 'noul', instructions: 'ok?'}}});
    out.push(a.answers.q.noul);
  } catch (e) { out.push(e.message); }
}
return out;
"""
DENIED = "Capability call denied: jev.evaluate ({}) (line 5, column 53)"  # the call's place in ASKING


@asynccontextmanager
async def server(tmp_path: Path, elicit: Any = None, *, timeout_ms: int = 60_000) -> AsyncIterator[ClientSession]:
    """`fabric-jev mcp` where every jev.evaluate asks (read: ask); `elicit` is the client's callback."""
    (tmp_path / "fixture.json").write_text(json.dumps(FIXTURE))
    (tmp_path / "config.json").write_text(json.dumps({"approvals": {"read": "ask"},
                                                      "approverTimeoutMs": timeout_ms}))
    async with mcp_client(tmp_path, "--evaluator", f"fixture:{tmp_path / 'fixture.json'}",
                          "--config", str(tmp_path / "config.json"), elicit=elicit) as session:
        yield session


def asker(n: int = 1) -> dict[str, Any]:
    return {"program": program(ASKING, name="asker", requires=["jev.evaluate"]), "input": {"n": n}}


def answering(*results: types.ElicitResult) -> tuple[Any, list[types.ElicitRequestParams]]:
    """A callback that answers with `results` in turn and records what it was asked."""
    asked: list[types.ElicitRequestParams] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return results[len(asked) - 1]

    return callback, asked


def accept(decision: str) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"decision": decision})


def envelope(result: Any) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


async def test_accepting_allows_and_the_question_carries_the_facts(tmp_path: Path) -> None:
    callback, asked = answering(accept("allow"))
    async with server(tmp_path, callback) as session:
        env = envelope(await session.call_tool("jev_run", asker()))
    assert env["result"] == [0.75]
    [params] = asked
    assert isinstance(params, types.ElicitRequestFormParams)
    assert "program: asker" in params.message and "capability: jev.evaluate (risk read, policy ask)" in params.message
    assert 'arguments: {"state":"state 0"' in params.message
    choices = params.requested_schema["properties"]["decision"]["oneOf"]
    assert [c["const"] for c in choices] == ["allow", "always", "deny", "deny_all"]
    assert params.requested_schema["required"] == ["decision"]
    [entry] = env["approvals"]
    assert (entry["decidedBy"], entry["allowed"], entry["approver"]) == ("approver", True, "mcp elicitation")


async def test_the_elicitation_says_which_rule_led_to_the_question(tmp_path: Path) -> None:
    """The same facts as the terminal: the rule that asks (the read policy alone would allow)."""
    (tmp_path / "fixture.json").write_text(json.dumps(FIXTURE))
    (tmp_path / "config.json").write_text(json.dumps({"rules": [
        {"ask": 'jev.evaluate(questions.q.instructions: "ok?")'}]}))
    callback, asked = answering(accept("deny"))
    async with mcp_client(tmp_path, "--evaluator", f"fixture:{tmp_path / 'fixture.json'}",
                          "--config", str(tmp_path / "config.json"), elicit=callback) as session:
        env = envelope(await session.call_tool("jev_run", asker()))
    [params] = asked
    assert ('asked because: the rule ask jev.evaluate(questions.q.instructions: "ok?") (config) asks'
            in params.message)
    [entry] = env["approvals"]
    assert entry["rule"] == 'ask jev.evaluate(questions.q.instructions: "ok?")' and entry["allowed"] is False


async def test_always_answers_the_later_questions_of_the_run(tmp_path: Path) -> None:
    callback, asked = answering(accept("always"))
    async with server(tmp_path, callback) as session:
        env = envelope(await session.call_tool("jev_run", asker(3)))
    assert env["result"] == [0.75] * 3 and len(asked) == 1


@pytest.mark.parametrize("answer", [types.ElicitResult(action="decline"), types.ElicitResult(action="cancel"),
                                    accept("deny"), types.ElicitResult(action="accept", content={"decision": "?"}),
                                    types.ElicitResult(action="accept"),
                                    # Shapes the form did not ask for: a field besides the decision,
                                    # a reply in another case, a reply of another type.
                                    types.ElicitResult(action="accept", content={"decision": "allow", "also": "x"}),
                                    accept("ALLOW"), accept("Always"),
                                    types.ElicitResult(action="accept", content={"decision": True})])
async def test_decline_cancel_and_anything_but_an_allow_deny(tmp_path: Path, answer: types.ElicitResult) -> None:
    callback, asked = answering(answer)
    async with server(tmp_path, callback) as session:
        env = envelope(await session.call_tool("jev_run", asker()))
    assert env["result"] == [DENIED.format("the approver denied it")] and len(asked) == 1


async def test_an_action_in_another_case_is_no_answer(tmp_path: Path) -> None:
    # Built unchecked, as a client that does not follow the schema would send it.
    callback, asked = answering(types.ElicitResult.model_construct(action="ACCEPT", content={"decision": "allow"}))
    async with server(tmp_path, callback) as session:
        env = envelope(await session.call_tool("jev_run", asker()))
    assert env["result"] != [0.75] and len(asked) == 1
    assert not env["approvals"][0]["allowed"]


async def test_deny_all_refuses_every_later_question(tmp_path: Path) -> None:
    callback, asked = answering(accept("deny_all"))
    async with server(tmp_path, callback) as session:
        env = envelope(await session.call_tool("jev_run", asker(2)))
    assert len(asked) == 1
    assert env["result"][1] == DENIED.format("an earlier answer denied every later question of the run")


async def test_no_answer_in_time_denies(tmp_path: Path) -> None:
    cancelled = anyio.Event()

    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    async with server(tmp_path, never, timeout_ms=100) as session:
        env = envelope(await session.call_tool("jev_run", asker()))
        # The server gave up on the question: the client was told to cancel it.
        await cancelled.wait()
    assert env["result"] == [DENIED.format("the approver did not answer in time")]
    [entry] = env["approvals"]
    assert (entry["decidedBy"], entry["approver"]) == ("approver", "mcp elicitation")


async def test_a_client_without_elicitation_is_not_asked_and_the_result_says_why(tmp_path: Path) -> None:
    async with server(tmp_path) as session:
        env = envelope(await session.call_tool("jev_run", asker()))
    assert env["result"] == [DENIED.format(f"read requires approval and {NO_ELICITATION}")]
    [entry] = env["approvals"]
    assert entry["decidedBy"] == "policy" and entry["reason"] == f"read requires approval and {NO_ELICITATION}"


async def test_a_background_run_asks_too(tmp_path: Path) -> None:
    callback, asked = answering(accept("allow"))
    async with server(tmp_path, callback) as session:
        spawned = envelope(await session.call_tool("jev_spawn", asker()))
        done = envelope(await session.call_tool("jev_wait", {"id": spawned["id"]}))
    assert done["result"] == [0.75] and len(asked) == 1


async def test_allow_on_the_command_line_asks_no_one(tmp_path: Path) -> None:
    callback, asked = answering()
    (tmp_path / "fixture.json").write_text(json.dumps(FIXTURE))
    async with mcp_client(tmp_path, "--evaluator", f"fixture:{tmp_path / 'fixture.json'}",
                          "--allow", "jev.evaluate", elicit=callback) as session:
        env = envelope(await session.call_tool("jev_run", asker()))
    assert env["result"] == [0.75] and asked == []
    assert env["approvals"][0]["override"] == "--allow jev.evaluate"
