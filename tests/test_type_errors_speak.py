"""Type errors are never silent: a file's suffix gives its language, warn-mode errors are printed
before the run starts (run, batch, MCP), and pack refuses TypeScript with errors (real tsgo, real workers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric_jev import HostConfig, JevHost, RunState, TypeScriptError
from fabric_jev.program_files import load_program
from fabric_jev.typecheck import cache
from tests.cli_support import cli
from tests.mcp_support import mcp_client

pytestmark = pytest.mark.anyio

HEADER = """/* @program
{"inputSchema": {"type": "object", "properties": {"ticket": {"type": "string"}}, "required": ["ticket"]},
 "outputSchema": {}}
*/
"""
#: A misspelled field, in code with nothing TypeScript-only in it.
MISSPELLED = HEADER + "const t = input.tickt;\nreturn t ?? 'none';\n"
CLEAN = HEADER + "return input.ticket;\n"
INPUT = '{"ticket": "refund please"}'
WARNING = "warning TS2551: Property 'tickt' does not exist on type 'JevInput'. Did you mean 'ticket'?"


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("FABRIC_JEV_HOME", str(tmp_path / "home"))
    cache.forget_all()
    return {"FABRIC_JEV_HOME": str(tmp_path / "home")}


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


def test_a_file_suffix_gives_the_language(tmp_path: Path) -> None:
    assert load_program(write(tmp_path, "a.ts", CLEAN))["language"] == "typescript"
    assert load_program(write(tmp_path, "a.mts", CLEAN))["language"] == "typescript"
    assert load_program(write(tmp_path, "a.js", CLEAN))["language"] == "javascript"
    assert "language" not in load_program(write(tmp_path, "a.txt", CLEAN))  # the code decides


async def test_a_ts_file_without_typescript_syntax_is_checked_as_typescript_and_refused(tmp_path: Path) -> None:
    program = load_program(write(tmp_path, "triage.ts", MISSPELLED))
    async with JevHost() as host:
        with pytest.raises(TypeScriptError, match=r"Jev program has type errors \(TypeScript, 1 error\): "
                                                  r"line 5, column 17: Property 'tickt'"):
            await host.run(program, {"ticket": "x"})
        # The same code as a .js file is JavaScript: mode warn, it runs and its envelope lists the error.
        envelope = await host.run(load_program(write(tmp_path, "triage.js", MISSPELLED)), {"ticket": "x"})
    assert envelope.state is RunState.COMPLETED
    assert envelope.typecheck is not None and envelope.typecheck.language == "javascript"
    assert envelope.typecheck.outcome == "errors"


async def test_a_declared_typescript_program_is_strict() -> None:
    # strictNullChecks: TypeScript's, not JavaScript's relaxed options.
    code = "let n: number = 1;\nconst s: string | null = null;\nn = s.length;\nreturn n;"
    program = {"name": "strict", "code": code, "inputSchema": {}, "outputSchema": {}, "language": "typescript"}
    async with JevHost() as host:
        with pytest.raises(TypeScriptError, match="TS18047"):
            await host.run(program)


def test_run_prints_each_type_error_on_stderr_before_the_run(tmp_path: Path, fresh_cache: dict[str, str]) -> None:
    path = write(tmp_path, "triage.js", MISSPELLED)
    # The program emits first: its progress line comes after the warning on standard error.
    emitting = write(tmp_path, "emits.js", MISSPELLED.replace("const t", "await program.emit('started');\nconst t"))
    done = cli("run", emitting, "--input-json", INPUT, env=fresh_cache)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == f"{emitting}:6:17: {WARNING}"
    assert lines[1].startswith(f"{emitting}: 1 error (JavaScript, checked by TypeScript); "
                               "typecheck.javascript is warn, so it runs anyway")
    assert lines[2] == '[1] "started"'
    assert json.loads(done.stdout)["typecheck"]["outcome"] == "errors"
    quiet = cli("run", write(tmp_path, "clean.js", CLEAN), "--input-json", INPUT, env=fresh_cache)
    assert quiet.returncode == 0 and quiet.stderr == ""
    refused = cli("run", write(tmp_path, "triage.ts", MISSPELLED), "--input-json", INPUT, env=fresh_cache)
    assert refused.returncode == 2 and "Jev program has type errors (TypeScript, 1 error)" in refused.stderr
    assert path  # the .js twin runs (above); the .ts file is refused before anything runs


def test_batch_prints_each_type_error_once_before_the_inputs_run(tmp_path: Path, fresh_cache: dict[str, str]) -> None:
    path = write(tmp_path, "triage.js", MISSPELLED)
    inputs = write(tmp_path, "in.jsonl", INPUT + "\n" + INPUT + "\n")
    done = cli("batch", path, "--inputs", inputs, "--out", str(tmp_path / "out.jsonl"), "--quiet", env=fresh_cache)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(WARNING) == 1
    assert done.stderr.index(WARNING) < done.stderr.index("batch summary")


async def test_mcp_run_says_the_type_errors_in_its_result_and_on_stderr(tmp_path: Path) -> None:
    program = load_program(write(tmp_path, "triage.js", MISSPELLED))
    async with mcp_client(tmp_path) as session:
        result = await session.call_tool("jev_run", {"program": program, "input": {"ticket": "x"}})
        spawned = await session.call_tool("jev_spawn", {"program": program, "input": {"ticket": "x"}})
    assert not result.is_error
    assert json.loads(result.content[0].text)["state"] == "completed"  # type: ignore[union-attr]
    note = result.content[1].text  # type: ignore[union-attr]
    assert note.splitlines()[0].startswith("type error: line 5, column 17: Property 'tickt' does not exist")
    assert "typecheck.javascript is warn, so the program ran anyway" in note
    assert spawned.content[1].text == note  # type: ignore[union-attr]
    assert result.structured_content is not None and result.structured_content["state"] == "completed"
    assert f"fabric-jev mcp: triage:5:17: {WARNING}" in (tmp_path / "server.log").read_text()


def test_pack_refuses_typescript_with_type_errors_unless_no_check(tmp_path: Path, fresh_cache: dict[str, str]) -> None:
    path = write(tmp_path, "triage.ts", MISSPELLED)
    refused = cli("pack", path, env=fresh_cache)
    assert refused.returncode == 2 and refused.stdout == ""
    assert f"{path}:5:17: error TS2551: Property 'tickt'" in refused.stderr
    assert "not packed: 1 error (TypeScript)" in refused.stderr and "--no-check" in refused.stderr
    packed = cli("pack", path, "--no-check", env=fresh_cache)
    assert packed.returncode == 0 and json.loads(packed.stdout)["language"] == "typescript"
    clean = cli("pack", write(tmp_path, "clean.ts", CLEAN), env=fresh_cache)
    assert clean.returncode == 0 and clean.stderr == ""
    assert json.loads(clean.stdout)["language"] == "typescript"
    # JavaScript's errors are listed and packed: a launch runs them (mode warn).
    js = cli("pack", write(tmp_path, "triage.js", MISSPELLED), env=fresh_cache)
    assert js.returncode == 0 and "warning TS2551" in js.stderr


def test_a_packed_artifact_keeps_its_language_for_the_launch(tmp_path: Path, fresh_cache: dict[str, str]) -> None:
    artifact = json.loads(cli("pack", write(tmp_path, "triage.ts", MISSPELLED), "--no-check", env=fresh_cache).stdout)
    refused = cli("run", write(tmp_path, "triage.json", json.dumps(artifact)), "--input-json", INPUT,
                  env=fresh_cache)
    assert refused.returncode == 2 and "(TypeScript, 1 error)" in refused.stderr


def test_host_config_modes_still_apply_to_a_declared_language() -> None:
    config = HostConfig.parse({"typecheck": {"typescript": "warn"}})
    assert config.typecheck.typescript.value == "warn"
