"""Every MCP tool's schemas are derived from typed models, and what the tools return matches them.

(a) The input and output schema each tool advertises over the MCP protocol (the official SDK's
client listing a real `fabric-jev mcp`) is the JSON Schema derived from its model, and no JSON
Schema is written by hand in fabric_jev/mcp/ but the one rule a model cannot state.
(b) Each tool's real result validates against its advertised output schema, with every field the
model always writes present and no key it does not declare. `tests/mcp_support.py` holds every
MCP test's results to the same check; here one scenario calls every tool.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install -e '.[mcp]')")

from fabric_jev.mcp.schemas import derived_schema
from fabric_jev.mcp.tools import TOOL_MODELS, arguments_schema
from tests.conftest import program
from tests.mcp_support import check_result
from tests.test_mcp import TOOL_NAMES, server
from tests.test_mcp_observers import FAILED_TURN
from tests.test_mcp_observers import server as observers_server

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parent.parent
OBSERVER = ROOT / "examples" / "observer-session"


async def test_each_tool_advertises_the_schemas_derived_from_its_models(tmp_path: Path) -> None:
    async with server(tmp_path) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == set(TOOL_MODELS) == TOOL_NAMES
    for name, (given, result) in TOOL_MODELS.items():
        assert tools[name].input_schema == arguments_schema(given), name
        assert tools[name].output_schema == derived_schema(result, mode="serialization"), name


def test_the_derived_output_schemas_require_what_the_models_always_write() -> None:
    envelope = derived_schema(TOOL_MODELS["jev_run"][1], mode="serialization")
    # The fields 0.1.0's hand-written schemas left out are declared now.
    assert {"typecheck", "observation", "approvals", "approvalCounts", "evaluator"} <= set(envelope["properties"])
    status = derived_schema(TOOL_MODELS["jev_status"][1], mode="serialization")["anyOf"][1]
    assert {"mode", "ready", "problem", "typecheck"} <= set(status["properties"])
    assert status["required"] == ["credentials", "model", "route", "runs", "mode", "ready"]
    # Left out when there is nothing to say, so not required: a run's end, error, trail, check.
    assert set(envelope["required"]) == {"id", "name", "state", "background", "startedAt", "evaluations",
                                         "toolCalls", "usage", "events", "nextSequence", "logs"}


#: A JSON Schema keyword as a key of a dict written in source.
_SCHEMA_KEY = re.compile(r'"(type|properties|required|anyOf|oneOf|allOf|items|enum|const|minLength|maxLength|'
                         r'minimum|maximum|additionalProperties|pattern)"\s*:')


def test_no_json_schema_is_written_by_hand_in_mcp_but_what_a_model_cannot_state() -> None:
    found = {}
    for path in sorted((ROOT / "fabric_jev" / "mcp").glob("*.py")):
        lines = [line.strip() for line in path.read_text().splitlines() if _SCHEMA_KEY.search(line)]
        if lines:
            found[path.name] = len(lines)
    assert found == {
        # A launch names exactly one of program and programPath (one line; docs/mcp.md).
        "arguments.py": 1,
        # Not a tool's schema: the elicitation form asking a person about one call, its choices titled
        # with that call's ref (MCP's restricted form schema; docs/mcp.md).
        "asking.py": 3,
        # A program tool's input is the program's own schema, under `input` when it is not an object,
        # and its output the derived envelope with the program's outputSchema as `result`: data, not
        # a model (docs/mcp.md, "Each program as a tool").
        "programs.py": 3,
        # The deriver: the `null` branch it leaves out, and the root of a union of objects.
        "schemas.py": 3,
    }


ASK = program("const r = await jev.evaluate({state: input, questions: {q: {type: 'noul', instructions: 'OK?'}}});"
              " await program.emit(r.answers.q.noul); return r.answers.q.noul;", requires=["jev.evaluate"])
WAITS = program("await program.sleep(60000); return 1")
MISTYPED = {**program("const n: number = 'x'; return n"), "language": "typescript"}


async def test_every_tools_real_result_validates_against_its_advertised_schema(tmp_path: Path) -> None:
    advisor = json.loads((OBSERVER / "advisor.json").read_text())
    observe = json.loads((OBSERVER / "observe.json").read_text())
    results: dict[str, list[Any]] = {}
    listed: dict[str, Any] = {}

    async def call(session: Any, name: str, arguments: dict[str, Any]) -> Any:
        result = await session.call_tool(name, arguments)
        assert not result.is_error, result.content
        results.setdefault(name, []).append(result.structured_content)
        return result.structured_content

    async with server(tmp_path, "--allow", "agent") as session:
        listed.update({tool.name: tool.output_schema for tool in (await session.list_tools()).tools})
        ran = await call(session, "jev_run", {"program": ASK, "input": "refund please"})
        spawned = await call(session, "jev_spawn", {"program": WAITS})
        await call(session, "jev_status", {"id": spawned["id"]})
        await call(session, "jev_status", {})
        await call(session, "jev_wait", {"id": ran["id"]})
        await call(session, "jev_join", {"id": ran["id"]})
        await call(session, "jev_wait", {"id": spawned["id"], "timeoutMs": 1})
        await call(session, "jev_stop", {"id": spawned["id"]})
        await call(session, "jev_check", {"program": MISTYPED})
        await call(session, "jev_check", {"program": program("return 1")})
        await call(session, "jev_evaluate", {"state": "x", "questions": {"q": {"type": "noul", "instructions": "OK?"}}})
        await call(session, "jev_approve", {"action": {"ref": "shell.exec", "arguments": {"cmd": "ls"}},
                                            "userText": "list the files"})
    # The observer example's own evaluator fixture answers its advisor's questions.
    async with observers_server(tmp_path, "--allow", "agent") as session:
        await call(session, "jev_session_open", {"sessionId": "main-1"})
        await call(session, "jev_observe", {"sessionId": "main-1", "program": advisor, "observe": observe})
        await call(session, "jev_session_post", {"sessionId": "main-1", "events": FAILED_TURN})
        await call(session, "jev_advice", {"sessionId": "main-1", "waitMs": 30_000, "peek": True})
        await call(session, "jev_session_close", {"sessionId": "main-1"})
    assert set(results) == TOOL_NAMES
    for name, values in results.items():
        for value in values:
            check_result(name, listed[name], value)
    # The parts the hand-written schemas did not declare are there, and checked.
    assert ran["state"] == "completed" and ran["evaluator"]["readout"] == "fixture" and "typecheck" in ran
    assert {"mode", "ready", "typecheck"} <= set(results["jev_status"][1])
    [errors, clean] = results["jev_check"]
    assert errors["clean"] is False and errors["diagnostics"][0]["code"].startswith("TS") and clean["clean"]
    [advice] = results["jev_advice"]
    assert advice["advice"] and advice["observers"][0]["observation"]["received"] >= 1
