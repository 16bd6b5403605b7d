"""`fabric-jev mcp --programs DIR`: program files as resources and (with --program-tools) as typed
tools of their own; `input` typed as any JSON. Driven by both official clients: the Python SDK's and
the MCP Inspector CLI from npm (pinned, installed by scripts/setup into .tools/)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install -e '.[mcp]')")
from mcp import ClientSession

from tests.mcp_support import mcp_client

ROOT = Path(__file__).resolve().parent.parent
INSPECTOR_VERSION = "2.12.0"
FIXTURE = {"answers": {"topic": {"choice": "billing", "probabilities": {"billing": 0.8, "technical": 0.1,
                                                                        "other": 0.1}, "confidence": 0.8},
                       "urgent": {"noul": 0.2}, "q": {"noul": 0.75}},
           "usage": {"input_tokens": 30, "output_tokens": 3}}
DOUBLE = """/* @program
{"name": "double it", "inputSchema": {"type": "integer", "description": "a whole number"},
 "outputSchema": {"type": "integer"}}
*/
await program.emit({doubling: input});
return input * 2;
"""


def folder(tmp: Path) -> Path:
    """A programs folder as `fabric-jev new` leaves it, plus a non-object program and clutter."""
    done = subprocess.run([sys.executable, "-m", "fabric_jev", "new", "triage", "--dir", str(tmp / "programs")],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    programs = tmp / "programs"
    (programs / "more").mkdir()
    (programs / "more" / "double.ts").write_text(DOUBLE)
    (programs / "broken.js").write_text("/* @program {not json} */ return 1")
    (programs / "notes.txt").write_text("not a program")
    (tmp / "fixture.json").write_text(json.dumps(FIXTURE))
    return programs


def server_args(tmp: Path, *extra: str) -> list[str]:
    """What follows `fabric-jev mcp`: the fixture evaluator and the programs folder under `tmp`."""
    return ["--evaluator", f"fixture:{tmp / 'fixture.json'}", "--programs", str(tmp / "programs"), *extra]


def server_argv(tmp: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "fabric_jev", "mcp", *server_args(tmp, *extra)]


@asynccontextmanager
async def session(tmp: Path, *extra: str) -> AsyncIterator[ClientSession]:
    async with mcp_client(tmp, *server_args(tmp, *extra)) as client:
        yield client


# ---------------------------------------------------------------- the Python SDK


@pytest.mark.anyio
async def test_program_files_are_listed_and_read_as_resources(tmp_path: Path) -> None:
    folder(tmp_path)
    async with session(tmp_path) as client:
        resources = (await client.list_resources()).resources
        listed = {str(r.uri): r for r in resources}
        assert set(listed) == {"fabric-jev://programs/more/double.ts", "fabric-jev://programs/triage.js"}
        assert listed["fabric-jev://programs/triage.js"].name == "triage"
        assert listed["fabric-jev://programs/more/double.ts"].mime_type == "application/json"
        read = await client.read_resource("fabric-jev://programs/more/double.ts")
        artifact = json.loads(read.contents[0].text)
        assert artifact["name"] == "double it" and artifact["code"].rstrip().endswith("return input * 2;")
        tools = {t.name for t in (await client.list_tools()).tools}
        assert "triage" not in tools  # program tools are offered only with --program-tools
        with pytest.raises(Exception, match="unknown resource 'file:///etc/passwd'"):
            await client.read_resource("file:///etc/passwd")


@pytest.mark.anyio
async def test_jev_run_takes_a_program_file_by_path_and_typed_input(tmp_path: Path) -> None:
    folder(tmp_path)
    async with session(tmp_path) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        declared = tools["jev_run"].input_schema["properties"]["input"]
        assert {b["type"] for b in declared["anyOf"]} == {"object", "array", "string", "number", "boolean", "null"}
        result = await client.call_tool("jev_run", {"programPath": "more/double.ts", "input": 21})
        assert result.structured_content["result"] == 42, result.content


@pytest.mark.anyio
async def test_each_program_is_a_typed_tool_of_its_own(tmp_path: Path) -> None:
    folder(tmp_path)
    async with session(tmp_path, "--program-tools") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"triage", "double_it"} <= set(tools) and "broken" not in tools
        triage = tools["triage"]
        assert triage.input_schema["required"] == ["message"]  # the program's own inputSchema
        assert triage.output_schema["properties"]["result"]["required"] == ["topic", "confidence", "urgent"]
        assert tools["double_it"].input_schema == {
            "type": "object", "properties": {"input": {"type": "integer", "description": "a whole number"}},
            "required": ["input"], "additionalProperties": False}
        done = await client.call_tool("triage", {"message": "I was charged twice"})
        assert not done.is_error, done.content
        assert done.structured_content["result"] == {"topic": "billing", "confidence": 0.8, "urgent": False}
        doubled = await client.call_tool("double_it", {"input": 5})
        assert doubled.structured_content["result"] == 10
        refused = await client.call_tool("triage", {"message": ""})  # minLength 1
        assert refused.is_error and "input does not match its declared schema" in refused.content[0].text
        extra = await client.call_tool("double_it", {"input": 1, "other": 2})
        assert extra.is_error and "unexpected: other" in extra.content[0].text


@pytest.mark.anyio
async def test_a_program_tool_whose_run_fails_is_a_tool_error_with_its_envelope(tmp_path: Path) -> None:
    programs = folder(tmp_path)
    (programs / "fails.js").write_text('/* @program {"inputSchema": {}, "outputSchema": {}} */\n'
                                       "await tools.call({ref: 'kv.get'});")
    async with session(tmp_path, "--program-tools") as client:
        failed = await client.call_tool("fails", {})
    assert failed.is_error
    assert failed.content[0].text == ("the run ended failed: Error: Capability not granted to Jev program: kv.get "
                                      "(line 2, column 13)")
    assert json.loads(failed.content[1].text)["state"] == "failed"


def test_program_tools_need_a_programs_folder(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "fabric_jev", "mcp", "--program-tools"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "--program-tools needs --programs DIR" in done.stderr


# ---------------------------------------------------------------- the MCP Inspector CLI (npm)


def inspector() -> list[str]:
    """The pinned Inspector: scripts/setup's project-local copy, else npx fetches the same version."""
    local = ROOT / ".tools" / "mcp-inspector" / "node_modules" / ".bin" / "mcp-inspector"
    if local.exists():
        return [str(local)]
    if shutil.which("npx") is None:
        pytest.skip("npx (Node.js) is not installed: the MCP Inspector CLI cannot be run")
    return ["npx", "-y", f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}"]


def inspect(tmp: Path, *args: str, extra: tuple[str, ...] = ()) -> Any:
    argv = [*inspector(), "--cli", *server_argv(tmp, *extra), *args]
    # Its catalog file defaults to ~/.mcp-inspector: a home of the test's own keeps it out of the user's.
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=tmp,
                          env={**os.environ, "HOME": str(tmp / "home"), "FABRIC_JEV_HOME": str(tmp / "home")})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.timeout(300)
def test_the_inspector_sends_input_as_json_and_calls_program_tools(tmp_path: Path) -> None:
    folder(tmp_path)
    listed = inspect(tmp_path, "--method", "tools/list", extra=("--program-tools",))
    assert {"jev_run", "triage", "double_it"} <= {t["name"] for t in listed["tools"]}
    # An object typed on the command line arrives as an object, not as its text.
    ran = inspect(tmp_path, "--method", "tools/call", "--tool-name", "jev_run",
                  "--tool-arg", "programPath=triage.js", "--tool-arg", 'input={"message": "charged twice"}')
    assert ran["structuredContent"]["state"] == "completed", ran
    assert ran["structuredContent"]["result"]["topic"] == "billing"
    doubled = inspect(tmp_path, "--method", "tools/call", "--tool-name", "double_it", "--tool-arg", "input=21",
                      extra=("--program-tools",))
    assert doubled["structuredContent"]["result"] == 42
    typed = inspect(tmp_path, "--method", "tools/call", "--tool-name", "triage",
                    "--tool-arg", "message=the app crashes", extra=("--program-tools",))
    assert typed["structuredContent"]["state"] == "completed"
    resources = inspect(tmp_path, "--method", "resources/list")
    assert sorted(r["uri"] for r in resources["resources"]) == ["fabric-jev://programs/more/double.ts",
                                                                "fabric-jev://programs/triage.js"]
