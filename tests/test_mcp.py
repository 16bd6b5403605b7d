"""`fabric-jev mcp` as a subprocess, driven by the official SDK's own stdio client."""

from __future__ import annotations

import json
import os
import queue
import resource
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install -e '.[mcp]')")
from mcp import ClientSession

from tests.conftest import program
from tests.mcp_support import mcp_client

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = {
    "answers": {"q": {"noul": 0.75}, "label": {"choice": "bug"},
                "safe": {"noul": 0.9}, "secrets": {"noul": 0.1}, "destructive": {"noul": 0.05},
                "sessionOwned": {"noul": 0.5}},
    "usage": {"input_tokens": 10, "output_tokens": 2},
}
TOOL_NAMES = {"jev_run", "jev_spawn", "jev_status", "jev_wait", "jev_join", "jev_stop", "jev_evaluate", "jev_approve",
              "jev_check",
              # Observers over MCP (tests/test_mcp_observers.py).
              "jev_session_open", "jev_observe", "jev_session_post", "jev_advice", "jev_session_close"}


@asynccontextmanager
async def server(tmp_path: Path, *args: str) -> AsyncIterator[ClientSession]:
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps(FIXTURE))
    async with mcp_client(tmp_path, "--evaluator", f"fixture:{fixture}", *args) as session:
        yield session


def structured(result: Any) -> Any:
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def error_text(result: Any) -> str:
    assert result.is_error
    [content] = result.content
    assert "\n" not in content.text and "Traceback" not in content.text
    return str(content.text)


@pytest.mark.anyio
async def test_lists_the_tools_with_full_schemas(tmp_path: Path) -> None:
    async with server(tmp_path) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == TOOL_NAMES
    run = tools["jev_run"].input_schema
    assert run["additionalProperties"] is False
    assert set(run["properties"]) == {"program", "programPath", "input", "intent"}
    assert tools["jev_spawn"].input_schema["properties"]["intent"] == run["properties"]["intent"]
    assert run["properties"]["program"]["required"] == ["name", "code", "inputSchema", "outputSchema"]
    assert tools["jev_wait"].input_schema["required"] == ["id"]
    assert tools["jev_run"].output_schema is not None
    assert "state" in tools["jev_run"].output_schema["properties"]
    assert all(tool.description for tool in tools.values())


@pytest.mark.anyio
async def test_run_returns_the_envelope_and_sends_progress(tmp_path: Path) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    code = ("await program.emit({step: 1}); await program.emit({step: 2}); "
            "const a = await jev.evaluate({state: input, questions: {q: {type: 'noul', instructions: 'ok?'}}}); "
            "return {n: input.n * 2, ok: a.answers.q.noul}")
    async with server(tmp_path) as session:
        result = await session.call_tool("jev_run", {
            "program": program(code, requires=["jev.evaluate"]), "input": {"n": 21}},
            progress_callback=on_progress)
    envelope = structured(result)
    assert envelope["state"] == "completed" and envelope["result"] == {"n": 42, "ok": 0.75}
    assert envelope["evaluations"] == 1 and envelope["usage"] == {"input_tokens": 10, "output_tokens": 2}
    # Who answered: the fixture the server was started with.
    assert envelope["evaluator"]["route"] == "fixture" and envelope["evaluator"]["readout"] == "fixture"
    assert progress == [(1.0, '{"step":1}'), (2.0, '{"step":2}')]


@pytest.mark.anyio
async def test_spawn_then_status_and_wait(tmp_path: Path) -> None:
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    code = "for (let i = 0; i < 3; i++) { await program.emit(i); await program.sleep(1); } return 'done'"
    async with server(tmp_path) as session:
        spawned = structured(await session.call_tool("jev_spawn", {"program": program(code)}))
        assert spawned["state"] == "running" and spawned["background"] is True
        host = structured(await session.call_tool("jev_status", {}))
        assert spawned["id"] in [r["id"] for r in host["runs"]]
        done = structured(await session.call_tool("jev_wait", {"id": spawned["id"]}, progress_callback=on_progress))
        later = structured(await session.call_tool("jev_status", {"id": spawned["id"], "after": 2}))
        stopped = structured(await session.call_tool("jev_stop", {"id": spawned["id"]}))
    assert done["state"] == "completed" and done["result"] == "done"
    assert progress == ["0", "1", "2"]
    assert [e["value"] for e in later["events"]] == [2]
    assert stopped["state"] == "completed"  # stop is idempotent on a finished run


@pytest.mark.anyio
async def test_jev_join_is_an_alias_of_jev_wait(tmp_path: Path) -> None:
    # Seed 001: join aliases wait — the same arguments, progress notifications, timeout and result.
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    code = "for (let i = 0; i < 3; i++) { await program.emit(i); await program.sleep(1); } return 'done'"
    async with server(tmp_path) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        spawned = structured(await session.call_tool("jev_spawn", {"program": program(code)}))
        joined = structured(await session.call_tool("jev_join", {"id": spawned["id"]}, progress_callback=on_progress))
        waited = structured(await session.call_tool("jev_wait", {"id": spawned["id"]}))
        sleeper = structured(await session.call_tool("jev_spawn", {
            "program": program("await program.sleep(30000); return 1")}))
        still = structured(await session.call_tool("jev_join", {"id": sleeper["id"], "timeoutMs": 1}))
        stopped = structured(await session.call_tool("jev_stop", {"id": sleeper["id"]}))
        unknown = error_text(await session.call_tool("jev_join", {"id": "nope"}))
    assert tools["jev_join"].input_schema == tools["jev_wait"].input_schema
    assert tools["jev_join"].output_schema == tools["jev_wait"].output_schema
    assert "alias of jev_wait" in (tools["jev_join"].description or "").lower()
    assert joined == waited and joined["state"] == "completed" and joined["result"] == "done"
    assert progress == ["0", "1", "2"]
    assert still["state"] == "running" and stopped["state"] == "cancelled"  # cancelling a join stops nothing
    assert "Unknown or expired Jev run ID" in unknown


@pytest.mark.anyio
async def test_stop_cancels_a_running_program(tmp_path: Path) -> None:
    async with server(tmp_path) as session:
        spawned = structured(await session.call_tool("jev_spawn", {
            "program": program("await program.sleep(30000); return 1")}))
        waited = structured(await session.call_tool("jev_wait", {"id": spawned["id"], "timeoutMs": 1}))
        stopped = structured(await session.call_tool("jev_stop", {"id": spawned["id"]}))
    assert waited["state"] == "running"
    assert stopped["state"] == "cancelled"


@pytest.mark.anyio
async def test_evaluate_and_approve_with_a_fixture(tmp_path: Path) -> None:
    async with server(tmp_path) as session:
        answer = structured(await session.call_tool("jev_evaluate", {
            "state": "the app crashes on save",
            "questions": {"label": {"type": "choice", "instructions": "What kind of ticket?",
                                    "criteria": {"bug": None, "feature": None}}}}))
        decision = structured(await session.call_tool("jev_approve", {
            "action": {"ref": "fs.write", "description": "write notes.md", "arguments": {"path": "notes.md"}},
            "userText": "please save my notes to notes.md"}))
        no_user = structured(await session.call_tool("jev_approve", {
            "action": {"ref": "fs.write"}, "headless": True}))
    assert answer["answers"]["label"]["choice"] == "bug"
    assert answer["answers"]["label"]["probabilities"] == {"bug": 1.0, "feature": 0.0}
    assert answer["usage"] == {"input_tokens": 10, "output_tokens": 2}
    assert {k: answer["evaluator"][k] for k in ("route", "readout")} == {"route": "fixture", "readout": "fixture"}
    assert decision["decision"] == "allow"
    assert decision["probabilities"] == {"safe": 0.9, "secrets": 0.1, "destructive": 0.05, "sessionOwned": 0.5}
    assert no_user["decision"] == "deny"


@pytest.mark.anyio
async def test_errors_are_tool_errors_with_one_line(tmp_path: Path) -> None:
    async with server(tmp_path) as session:
        compile_error = error_text(await session.call_tool("jev_run", {"program": program("return 1 +")}))
        bad_arguments = error_text(await session.call_tool("jev_run", {"program": {"name": "x"}}))
        both = error_text(await session.call_tool("jev_run", {"program": program("return 1"), "programPath": "p.json"}))
        unknown = error_text(await session.call_tool("jev_wait", {"id": "nope"}))
        no_folder = error_text(await session.call_tool("jev_spawn", {"programPath": "p.json"}))
        bad_request = error_text(await session.call_tool("jev_evaluate", {
            "state": "x", "questions": {"q": {"type": "text", "instructions": "say something"}}}))
        off_schema = error_text(await session.call_tool("jev_run", {
            "program": program("return input", inputSchema={"type": "integer"}), "input": "seven"}))
        # The server is still serving after every error.
        fine = structured(await session.call_tool("jev_run", {"program": program("return 7")}))
    assert compile_error.startswith("launch rejected: Jev program does not compile")
    assert bad_arguments.startswith("invalid arguments for jev_run: ") and "at .program" in bad_arguments
    assert both == "invalid arguments for jev_run: give exactly one of program (inline) or programPath"
    assert unknown == "Unknown or expired Jev run ID"
    assert no_folder == "programs by path are off: start the server with --programs DIR"
    assert bad_request.startswith("invalid arguments for jev_evaluate: ")
    assert off_schema == "launch rejected: input does not match its declared schema: 'seven' is not of type 'integer' at $"
    assert fine["result"] == 7


@pytest.mark.anyio
async def test_programs_by_path_only_under_the_allowed_folder(tmp_path: Path) -> None:
    folder = tmp_path / "programs"
    (folder / "triage").mkdir(parents=True)
    (folder / "triage" / "double.json").write_text(json.dumps(program("return input * 2")))
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps(program("return 'outside'")))
    (folder / "link.json").symlink_to(outside)
    async with server(tmp_path, "--programs", str(folder)) as session:
        doubled = structured(await session.call_tool("jev_run", {"programPath": "triage/double.json", "input": 4}))
        escape = error_text(await session.call_tool("jev_run", {"programPath": "../secret.json"}))
        absolute = error_text(await session.call_tool("jev_run", {"programPath": str(outside)}))
        link = error_text(await session.call_tool("jev_run", {"programPath": "link.json"}))
        missing = error_text(await session.call_tool("jev_run", {"programPath": "none.json"}))
    assert doubled["result"] == 8
    assert escape == "program path '../secret.json' is outside the programs folder"
    assert absolute == f"program path {str(outside)!r} is outside the programs folder"
    assert link == "program path 'link.json' is outside the programs folder"
    assert missing == "no program file 'none.json' in the programs folder"


# ---------------------------------------------------------------- lines the SDK cannot read


class RawSession:
    """`fabric-jev mcp` driven with raw JSON-RPC lines (the SDK client cannot send broken ones)."""

    def __init__(self, tmp_path: Path, *args: str, memory: int = 0) -> None:
        fixture = tmp_path / "fixture.json"
        fixture.write_text(json.dumps(FIXTURE))
        self.errlog = (tmp_path / "server.log").open("w")

        def limit() -> None:  # the server's address space, when `memory` is given
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fabric_jev.cli", "mcp", "--evaluator", f"fixture:{fixture}", *args],
            preexec_fn=limit if memory else None,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errlog, cwd=ROOT,
            env={**os.environ, "FABRIC_JEV_HOME": str(tmp_path / "home")})
        self.lines: queue.Queue[bytes] = queue.Queue()
        stdout = self.proc.stdout
        assert stdout is not None
        self.reader = threading.Thread(target=lambda: [self.lines.put(line) for line in stdout], daemon=True)
        self.reader.start()
        self.send(b'{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": '
                  b'"2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}')
        assert "result" in self.reply()
        self.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any]:
        """The next message from the server (the per-test timeout bounds the wait)."""
        message: dict[str, Any] = json.loads(self.lines.get())
        return message

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)
        self.reader.join(30)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self.errlog.close()


def call_line(request_id: int, tool: str, arguments: bytes, *, id_last: bool = False) -> bytes:
    params = b'"params": {"name": "' + tool.encode() + b'", "arguments": ' + arguments + b"}"
    head = b'{"jsonrpc": "2.0", "method": "tools/call", '
    rid = b'"id": ' + str(request_id).encode()
    return head + (params + b", " + rid if id_last else rid + b", " + params) + b"}"


def test_unreadable_requests_get_an_error_reply_and_serving_goes_on(tmp_path: Path) -> None:
    deep = b'{"state": ' + b"[" * 50_000 + b"]" * 50_000 + b', "questions": {"q": {"type": "noul"}}}'
    session = RawSession(tmp_path)
    try:
        session.send(call_line(1, "jev_evaluate", b'{"state": "\\ud800", "questions": {"q": {"type": "noul"}}}'))
        surrogate = session.reply()
        session.send(call_line(2, "jev_evaluate", deep))
        too_deep = session.reply()
        session.send(call_line(3, "jev_evaluate", deep, id_last=True))
        deep_id_last = session.reply()
        # A notification is never answered, readable or not: the next reply is request 4's.
        session.send(b'{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"x": "\\udfff"}}')
        session.send(call_line(4, "jev_run", json.dumps({"program": program("return 7")}).encode()))
        fine = session.reply()
        session.send(b"not json at all")
        garbage = session.reply()
    finally:
        session.close()
    for reply, request_id in ((surrogate, 1), (too_deep, 2), (deep_id_last, 3)):
        assert reply["id"] == request_id and reply["error"]["code"] == -32700, reply
        assert reply["error"]["message"].startswith("Parse error: ")
    assert "surrogate" in surrogate["error"]["message"]
    assert "recursion" in too_deep["error"]["message"]
    assert fine["id"] == 4 and fine["result"]["structuredContent"]["result"] == 7
    assert garbage["id"] is None and garbage["error"]["code"] == -32700
    assert "Traceback" not in (tmp_path / "server.log").read_text()


@pytest.mark.timeout(120)
def test_a_line_past_the_limit_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    from fabric_jev.mcp.lines import MAX_LINE_BYTES

    session = RawSession(tmp_path, memory=768 << 20)
    try:
        # 100 MB in one line, with a lone surrogate at its end: read whole, the SDK's reader and
        # parser and the answer to it held a gigabyte, and this server (768 MiB of address
        # space) ended with MemoryError.
        session.send(b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "jev_evaluate", '
                     b'"arguments": {"state": "' + b"a" * 100_000_000 + b'\\ud800", "questions": {}}}}')
        cut = session.reply()
        session.send(b'{"jsonrpc": "2.0", "id": 10, "method": "ping"}')
        fine = session.reply()
    finally:
        session.close()
    assert cut == {"jsonrpc": "2.0", "id": 9, "error": {
        "code": -32700, "message": f"Parse error: the message is longer than {MAX_LINE_BYTES} bytes"}}
    assert fine == {"jsonrpc": "2.0", "id": 10, "result": {}}
    assert session.proc.returncode == 0


def test_lines_are_read_whole_up_to_the_limit_and_cut_past_it() -> None:
    import io

    from fabric_jev.mcp.lines import CUT_MARK, BoundedLines

    data = (b'{"a": 1}\r\n' + b"x" * 10 + b"\n" + b"y" * 11 + b"\n" + b"\xff\xfe z" + b"\n"
            + b"z" * 40 + b"\n" + b"no \\n")
    lines = BoundedLines(io.BytesIO(data), limit=11)
    read = [lines.readline() for _ in range(7)]
    assert read == ['{"a": 1}\r\n', "x" * 10 + "\n", "y" * 11 + "\n", "\ufffd\ufffd z\n",
                    "z" * 12 + CUT_MARK + "\n", "no \\n", ""]  # the head: what one read took


def test_a_request_whose_id_is_a_lone_surrogate_is_answered_and_serving_goes_on(tmp_path: Path) -> None:
    session = RawSession(tmp_path)
    try:
        # Its reply used to carry the id back: a text nothing can encode, which ended the server.
        session.send(b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}')
        refused = session.reply()
        session.send(b'{"jsonrpc": "2.0", "id": 7, "method": "ping"}')
        fine = session.reply()
    finally:
        session.close()
    assert refused["id"] is None and refused["error"]["code"] == -32700
    assert fine == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert session.proc.returncode == 0


@pytest.mark.anyio
async def test_program_paths_with_a_nul_byte_or_a_symlink_loop_are_one_line_tool_errors(tmp_path: Path) -> None:
    folder = tmp_path / "programs"
    folder.mkdir()
    (folder / "loop.json").symlink_to(folder / "loop.json")
    (folder / "a").symlink_to(folder / "b")
    (folder / "b").symlink_to(folder / "a")
    async with server(tmp_path, "--programs", str(folder)) as session:
        nul = error_text(await session.call_tool("jev_run", {"programPath": "p\x00.json"}))
        loop = error_text(await session.call_tool("jev_run", {"programPath": "loop.json"}))
        pair = error_text(await session.call_tool("jev_run", {"programPath": "a/x.json"}))
    assert nul == "program path 'p\\x00.json' contains a NUL byte"
    assert loop == "program path 'loop.json' is a symlink loop"
    assert pair == "program path 'a/x.json' is a symlink loop"
    assert "Traceback" not in (tmp_path / "server.log").read_text()


@pytest.mark.parametrize(("line", "expected"), [
    ('{"jsonrpc": "1.0", "id": 5, "method": "x"}', (5, -32600, "Invalid request: Input should be '2.0' at jsonrpc")),
    ('{"jsonrpc": "2.0", "id": "a", "method": "x", "params": [1]}',
     ("a", -32600, "Invalid request: Input should be an object at params")),
    ('{"jsonrpc": "2.0", "method": "x", "params": {"s": "\\ud800"}}', None),  # a notification
    ('{"jsonrpc": "2.0", "id": 3, "result": 5}', None),  # a response to us
    ('{"jsonrpc": "2.0", "id": true, "method": "x", "params": {"s": "\\ud800"}}', (None, -32700, None)),
    # Ids that are not a string or an integer, or that JSON cannot carry back: answered with id null.
    ('{"jsonrpc": "2.0", "id": 1.5, "method": "x", "params": {"s": "\\ud800"}}', (None, -32700, None)),
    ('{"jsonrpc": "2.0", "id": 1e400, "method": "x", "params": {"s": "\\ud800"}}', (None, -32700, None)),
    ('{"jsonrpc": "2.0", "id": [1], "method": "x", "params": {"s": "\\ud800"}}', (None, -32700, None)),
    ('{"id": {"a": [1]}, "jsonrpc": "2.0", "method": "x", "params": "\\ud800"}', (None, -32700, None)),
    ('{"jsonrpc": "2.0", "id": "\\ud800", "method": "x"}', (None, -32700, None)),
    ("[1, 2]", (None, -32600, "Invalid request: Input should be an object")),
])
def test_each_unreadable_line_gets_the_answer_json_rpc_asks_for(line: str, expected: Any) -> None:
    import mcp_types as types

    from fabric_jev.mcp.unreadable import error_for

    with pytest.raises(Exception) as refused:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    reply = error_for(refused.value)
    if expected is None:
        assert reply is None
        return
    assert reply is not None
    assert (reply.id, reply.error.code) == expected[:2]
    assert expected[2] is None or reply.error.message == expected[2]
    reply.model_dump_json(by_alias=True, exclude_unset=True)  # what the SDK sends: it must be writable


_PARAMS = '"params": {"name": "jev_run", "arguments": {"input": "' + "a" * 200 + '"}}'


@pytest.mark.parametrize(("line", "head", "expected_id"), [
    ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", ' + _PARAMS + "}", 60, 7),
    # Only the head is read: an id past it (clients may send it last) or cut in its digits is not
    # known, so the answer has id null; the line cannot be told from a notification, and a
    # client waiting for its reply would wait for ever.
    ('{"jsonrpc": "2.0", "method": "tools/call", ' + _PARAMS + ', "id": 7}', 60, None),
    ('{"jsonrpc": "2.0", "method": "tools/call", "id": 123456, ' + _PARAMS + "}", 53, None),
    # A method past the head: with its id read, a request is answered, not taken for a response.
    ('{"jsonrpc": "2.0", "id": 8, ' + _PARAMS + ', "method": "tools/call"}', 60, 8),
    # A response to one of our requests is never answered, cut or not.
    ('{"jsonrpc": "2.0", "result": {"content": "' + "a" * 200 + '"}, "id": 3}', 60, "no reply"),
])
def test_a_line_cut_at_the_limit_is_answered_with_its_id_only_when_its_head_holds_it(
        line: str, head: int, expected_id: Any) -> None:
    import io

    import mcp_types as types

    from fabric_jev.mcp.lines import CUT_MARK, MAX_LINE_BYTES, BoundedLines
    from fabric_jev.mcp.unreadable import error_for

    cut = BoundedLines(io.BytesIO(line.encode() + b"\n"), limit=head - 1).readline()
    assert cut == line[:head] + CUT_MARK + "\n"
    with pytest.raises(Exception) as refused:
        types.jsonrpc_message_adapter.validate_json(cut, by_name=False)
    reply = error_for(refused.value)
    if expected_id == "no reply":
        assert reply is None
        return
    assert reply is not None
    assert (reply.id, reply.error.code) == (expected_id, -32700)
    assert reply.error.message == f"Parse error: the message is longer than {MAX_LINE_BYTES} bytes"


@pytest.mark.anyio
async def test_check_before_running(tmp_path: Path) -> None:
    schemas = {"inputSchema": {"type": "object", "properties": {"ticket": {"type": "string"}}},
               "outputSchema": {"enum": ["billing", "technical"]}}
    async with server(tmp_path) as session:
        bad = structured(await session.call_tool("jev_check", {"program": program(
            "const t = input.ticket;\nreturn 'sales';", **schemas)}))
        good = structured(await session.call_tool("jev_check", {"program": program("return 'billing';", **schemas)}))
        observer = structured(await session.call_tool("jev_check", {"program": program(
            "const e = await program.nextEvent();\nreturn e.truncated ? 'billing' : 'technical';", **schemas),
            "observe": True}))
        not_observed = structured(await session.call_tool("jev_check", {"program": program(
            "const e = await program.nextEvent();\nreturn 'billing';", **schemas)}))
        invalid = error_text(await session.call_tool("jev_check", {"program": {**program("return 1"), "extra": 1}}))
    assert bad["clean"] is False and bad["language"] == "javascript" and bad["errors"] == 1
    assert bad["diagnostics"] == [{"line": 2, "column": 1, "code": "TS2322", "message": (
        "Type '\"sales\"' is not assignable to type 'JevOutput'. (JevOutput is \"billing\" | \"technical\")")}]
    assert good["clean"] is True and good["diagnostics"] == [] and good["compiler"].startswith("tsgo ")
    assert observer["clean"] is True
    [missing] = not_observed["diagnostics"]
    assert missing["line"] == 1 and "program.nextEvent exists only in a run spawned with observe" in missing["message"]
    assert invalid.startswith("invalid arguments for jev_check: ")


#: The classifier judges jev.evaluate (a read) safe only when the user's words are in its evidence.
JUDGED_BY_INTENT = {
    "answers": {**FIXTURE["answers"], "safe": {"noul": 0.1}},
    "rules": [{"question": "safe", "stateContains": "summarise the ticket", "answer": {"noul": 0.95}}],
}


@pytest.mark.anyio
async def test_jev_run_and_jev_spawn_take_the_users_intent(tmp_path: Path) -> None:
    fixture = tmp_path / "judged.json"
    fixture.write_text(json.dumps(JUDGED_BY_INTENT))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"approvals": {"read": "auto"}}))
    code = "const a = await jev.evaluate({state: 't', questions: {q: {type: 'noul', instructions: 'ok?'}}}); " \
           "return a.answers.q.noul"
    asked = program(code, requires=["jev.evaluate"])
    async with mcp_client(tmp_path, "--evaluator", f"fixture:{fixture}", "--config", str(config)) as session:
        with_intent = structured(await session.call_tool("jev_run", {"program": asked,
                                                                     "intent": "summarise the ticket"}))
        without = structured(await session.call_tool("jev_run", {"program": asked}))
        spawned = structured(await session.call_tool("jev_spawn", {"program": asked,
                                                                   "intent": "summarise the ticket"}))
        waited = structured(await session.call_tool("jev_wait", {"id": spawned["id"]}))
        too_long = error_text(await session.call_tool("jev_run", {"program": asked, "intent": "x" * 100_001}))
    assert with_intent["state"] == "completed" and with_intent["result"] == 0.75
    assert waited["state"] == "completed" and waited["result"] == 0.75
    # No user text: the classifier cannot allow, and this client cannot be asked.
    assert without["state"] == "failed" and "jev.evaluate" in without["error"]
    assert "invalid arguments for jev_run" in too_long and "intent" in too_long
