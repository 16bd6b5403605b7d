"""docs/first-program.md: every command on the page runs, in order, as written (the real command,
the offline evaluator, the official MCP Inspector), with the exit code the page gives it."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_mcp_programs import inspector

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "first-program.md"
FABRIC_JEV = str(Path(sys.executable).with_name("fabric-jev"))
INSPECTOR = ["npx", "-y", "@modelcontextprotocol/inspector"]


def commands() -> list[tuple[str, list[str], int]]:
    """(the line as written, its argv, its expected exit code) for each line of the page's sh blocks."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", PAGE.read_text(), re.S):
        for line in block.splitlines():
            if not line.strip():
                continue
            expected = re.search(r"#\s*exit (\d+)", line)
            found.append((line, shlex.split(line, comments=True), int(expected.group(1)) if expected else 0))
    return found


def resolved(argv: list[str]) -> list[str]:
    """The page's commands as this checkout runs them: its fabric-jev, the pinned Inspector."""
    if argv[:3] == INSPECTOR:
        argv = [*inspector(), *argv[3:]]
    return [FABRIC_JEV if a == "fabric-jev" else a for a in argv]


def test_the_page_runs_new_check_run_pack_batch_and_mcp_in_order() -> None:
    lines = commands()
    firsts = [argv[1] if argv[0] == "fabric-jev" else argv[argv.index("--method") + 1] for _, argv, _ in lines]
    assert firsts == ["new", "check", "run", "run", "run", "pack", "batch", "batch", "tools/list", "tools/call"]


@pytest.mark.timeout(900)  # several processes load the offline model; the Inspector starts Node
def test_every_command_on_the_page_runs_as_written(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path / "home"), "FABRIC_JEV_HOME": str(tmp_path / "home")}
    outputs: list[str] = []
    for line, argv, expected in commands():
        done = subprocess.run(resolved(argv), capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
        assert done.returncode == expected, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        outputs.append(done.stdout)
    _new, _check, run, result, rejected, pack, _dry_run, _batch, listed, called = outputs
    envelope = json.loads(run)
    assert envelope["state"] == "completed" and set(envelope["result"]) == {"topic", "confidence", "urgent"}
    assert set(json.loads(result)) == {"topic", "confidence", "urgent"} and rejected == ""
    assert json.loads(pack)["requires"] == ["jev.evaluate"]
    results = [json.loads(r) for r in (tmp_path / "triage" / "results.jsonl").read_text().splitlines()]
    assert [r["state"] for r in results] == ["completed"] * 3
    assert "triage" in {tool["name"] for tool in json.loads(listed)["tools"]}
    structured = json.loads(called)["structuredContent"]
    assert structured["state"] == "completed" and structured["result"]["topic"] in ("billing", "technical", "other")


def test_the_check_error_the_page_quotes_is_the_one_its_program_gives(tmp_path: Path) -> None:
    """The page quotes `check`'s error for a misspelled `input.mesage`: its place and text are the real ones."""
    [quoted] = re.findall(r"`(triage/triage\.js:\d+:\d+: Property 'mesage'.*?)`", " ".join(PAGE.read_text().split()))
    env = {**os.environ, "HOME": str(tmp_path / "home"), "FABRIC_JEV_HOME": str(tmp_path / "home")}
    subprocess.run([FABRIC_JEV, "new", "triage"], check=True, capture_output=True, cwd=tmp_path, env=env)
    source = tmp_path / "triage" / "triage.js"
    source.write_text(source.read_text().replace("input.message", "input.mesage", 1))
    done = subprocess.run([FABRIC_JEV, "check", "triage/triage.js"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 1, done.stderr
    assert done.stdout.strip() == quoted
