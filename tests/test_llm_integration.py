"""The model routes wherever a spec works: the command line (`evaluate`, `status`, `login`), `serve`, `mcp`,
`batch`, the classifier and the pytest plugin, against the SDK-judged stub servers of tests/llm_stubs.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from fabric_jev import HostConfig
from fabric_jev.approval import ApprovalRequest, ProposedAction, classify
from fabric_jev.batch import batch
from fabric_jev.evaluators.status import status_report
from tests.conftest import program
from tests.llm_stubs import Stub, stub_server
from tests.mcp_support import mcp_client
from tests.test_mcp import structured
from tests.test_serve import served
from tests.test_testing_plugin import PLUGIN

KEY = "sk-integration-canary-5d1e8a7b33c94f20"
QUESTION = {"refund": {"type": "noul", "instructions": "Does the customer ask for money back?"}}
ASK = program("const r = await jev.evaluate({state: input, questions: " + json.dumps(QUESTION) + "});"
              "return r.answers.refund.noul", requires=["jev.evaluate"], inputSchema={"type": "string"})


def model(text: str) -> dict[str, float]:
    if text.endswith("Answer Yes or No."):
        return {"Yes": 0.8, "No": 0.2} if "refund" in text.lower() else {"Yes": 0.1, "No": 0.9}
    return {"A": 0.7, "B": 0.3}


def home(tmp: Path, **env: str) -> dict[str, str]:
    """A child's environment: its own auth store, and no key but the ones given."""
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.endswith("_BASE_URL")}
    return {**clean, "FABRIC_JEV_HOME": str(tmp / "home"), **env}


def run_cli(tmp: Path, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabric_jev", *args], input=stdin, capture_output=True, text=True,
                          timeout=120, cwd=tmp, env=home(tmp, **env))


def test_evaluate_on_the_command_line_with_a_key_from_the_environment(tmp_path: Path) -> None:
    (tmp_path / "req.json").write_text(json.dumps({"state": "please refund me", "questions": QUESTION}))
    with stub_server(Stub(model)) as stub:
        done = run_cli(tmp_path, "evaluate", "req.json", "--evaluator", "openai:gpt-judge",
                       FABRIC_JEV_OPENAI_BASE_URL=stub.url, OPENAI_API_KEY=KEY)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["answers"]["refund"]["noul"] == pytest.approx(0.8)
    assert out["evaluator"]["route"] == "openai" and out["evaluator"]["readout"] == "logprobs"
    assert stub.seen[0].headers["authorization"] == f"Bearer {KEY}" and stub.problems == []
    assert KEY not in done.stdout + done.stderr


def test_status_shows_the_model_routes_their_readiness_and_key_presence(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "status", "--evaluator", "ollama:qwen3:8b", "--json", OPENAI_API_KEY=KEY)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["ready"], report["route"], report["model"], report["mode"]) == (True, "ollama", "qwen3:8b",
                                                                                   "offline")
    rows = {r["name"]: r for r in report["routes"]}
    assert rows["ollama"]["selected"] and rows["ollama"]["endpoint"] == "http://127.0.0.1:11434/v1/chat/completions"
    assert rows["ollama"]["credentials"]["source"] == "not needed"
    assert rows["openai"]["ready"] and rows["openai"]["credentials"]["from"] == "OPENAI_API_KEY"
    assert rows["openai"]["endpoint"] == "https://api.openai.com/v1/chat/completions"
    assert not rows["anthropic"]["ready"] and "fabric-jev login anthropic" in rows["anthropic"]["problem"]
    assert rows["anthropic"]["endpoint"] == "https://api.anthropic.com/v1/messages"
    assert KEY not in done.stdout + done.stderr


def test_status_text_shows_where_each_model_route_would_send(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "status", "--evaluator", "ollama:qwen3:8b", OPENAI_API_KEY=KEY,
                   FABRIC_JEV_OLLAMA_BASE_URL="http://127.0.0.1:8080/v1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith(" * ollama "))
    assert lines[row].split()[-4:] == ["ready", "no", "key", "needed"]
    assert lines[row + 1].strip() == "http://127.0.0.1:8080/v1/chat/completions"
    openai = next(i for i, line in enumerate(lines) if line.startswith("   openai "))
    assert lines[openai].endswith("key from environment (OPENAI_API_KEY)")
    assert lines[openai + 1].strip() == "https://api.openai.com/v1/chat/completions"
    assert "no server is contacted" in done.stdout and KEY not in done.stdout + done.stderr


def test_status_of_a_loopback_openai_server_needs_no_key() -> None:
    config = HostConfig.parse({"evaluator": {"kind": "openai:llama", "baseUrls": {"openai": "http://localhost:8080/v1"}}})
    report = status_report(None, config, environ={})
    row = next(r for r in report["routes"] if r["name"] == "openai")
    assert report["ready"] and row["ready"] and row["mode"] == "offline"
    assert row["credentials"]["source"] == "not needed" and row["model"] == "llama"


def test_login_and_logout_take_openai_and_anthropic(tmp_path: Path) -> None:
    for name in ("openai", "anthropic"):
        stored = run_cli(tmp_path, "login", name, stdin=KEY + "\n")
        assert stored.returncode == 0, stored.stderr
        shown = json.loads(run_cli(tmp_path, "status", "--evaluator", f"{name}:m", "--json").stdout)
        assert shown["ready"] and shown["credentials"]["source"] == "store"
        assert KEY not in stored.stdout + stored.stderr
        assert run_cli(tmp_path, "logout", name).returncode == 0
        after = json.loads(run_cli(tmp_path, "status", "--evaluator", f"{name}:m", "--json").stdout)
        assert not after["ready"]


@pytest.mark.timeout(120)
def test_serve_is_a_gateway_to_the_model(tmp_path: Path) -> None:
    with stub_server(Stub(model)) as stub, \
            served("--evaluator", "ollama:judge", env={"FABRIC_JEV_OLLAMA_BASE_URL": stub.url}) as url:
        body = httpx.post(url + "/v1/systemone", json={"state": "refund please", "model": "jev-latest",
                                                       "questions": QUESTION}, timeout=30).json()
    assert body["answers"]["refund"]["noul"] == pytest.approx(0.8)
    assert body["x_evaluator"] == "ollama"
    assert body["x_provenance"]["route"] == "ollama" and body["x_provenance"]["model"] == "stub-model-2025"


@pytest.mark.anyio
async def test_mcp_answers_from_the_configured_model_route(tmp_path: Path) -> None:
    with stub_server(Stub(model)) as stub:
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"evaluator": {"kind": "ollama:judge", "baseUrls": {"ollama": stub.url}}}))
        async with mcp_client(tmp_path, "--config", str(config)) as session:
            result = await session.call_tool("jev_evaluate", {"state": "refund please", "questions": QUESTION})
    answer = structured(result)
    assert answer["answers"]["refund"]["noul"] == pytest.approx(0.8)
    assert answer["evaluator"]["route"] == "ollama"


@pytest.mark.anyio
async def test_batch_lines_name_the_model(tmp_path: Path) -> None:
    with stub_server(Stub(model)) as stub:
        config = HostConfig.parse({"evaluator": {"baseUrls": {"openai": stub.url}}})
        outcomes = [o async for o in batch(ASK, ["refund please", "thanks!"], config=config,
                                           evaluator="openai:judge")]
    assert sorted(o.result for o in outcomes) == pytest.approx([0.1, 0.8])  # type: ignore[type-var]
    assert {o.to_json()["evaluator"]["route"] for o in outcomes} == {"openai"}


@pytest.mark.anyio
async def test_the_classifier_decides_with_a_model_route(tmp_path: Path) -> None:
    def judge(text: str) -> dict[str, float]:
        if "safe to run this action now" in text:
            return {"Yes": 0.9, "No": 0.1}
        return {"Yes": 0.05, "No": 0.95}

    with stub_server(Stub(judge)) as stub:
        config = HostConfig.parse({"evaluator": {"baseUrls": {"openai": stub.url}}})
        from fabric_jev.evaluators import evaluator_from_spec

        evaluator = evaluator_from_spec("openai:judge", config)
        decision = await classify(ApprovalRequest(
            user_text="format the notes file", action=ProposedAction(
                "fs.write", "write", "write notes.md", {"path": "notes.md"})), evaluator=evaluator)
        await evaluator.aclose()
    assert decision.decision == "allow", decision.reason
    assert decision.probabilities is not None and decision.probabilities["safe"] == pytest.approx(0.9)
    assert decision.model == "stub-model-2025" and len(stub.seen) == 4  # four noul questions


@pytest.mark.timeout(180)
def test_the_pytest_plugin_records_from_a_model_route_and_replays_without_it(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytester.makepyprojecttoml(textwrap.dedent("""
        [tool.pytest.ini_options]
        addopts = "-p no:cacheprovider"
        filterwarnings = ["error"]
    """))
    pytester.makepyfile(test_judge=f'''
        from fabric_jev import run_program

        def test_judge(jev_evaluator):
            env = run_program({ASK!r}, "refund please", evaluator=jev_evaluator)
            assert env.state == "completed", env.error
            assert round(env.result, 3) == 0.8
            assert env.evaluator.route == "ollama"
    ''')
    monkeypatch.setenv("FABRIC_JEV_HOME", str(tmp_path / "home"))
    with stub_server(Stub(model)) as stub:
        monkeypatch.setenv("FABRIC_JEV_OLLAMA_BASE_URL", stub.url)
        pytester.runpytest_subprocess(*PLUGIN, "--jev-record-mode=once", "--jev-evaluator=ollama:judge"
                                      ).assert_outcomes(passed=1)
    [tape] = (pytester.path / "cassettes").rglob("*.jsonl")
    recorded = json.loads(tape.read_text().splitlines()[1])["evaluation"]
    assert recorded["evaluator"]["route"] == "ollama" and recorded["evaluator"]["readout"] == "logprobs"
    # The server is gone: the cassette replays, naming the model that answered then.
    pytester.runpytest_subprocess(*PLUGIN, "--jev-evaluator=ollama:judge").assert_outcomes(passed=1)


def test_run_names_the_model_that_answered(tmp_path: Path) -> None:
    (tmp_path / "ask.json").write_text(json.dumps(ASK))
    with stub_server(Stub(model)) as stub:
        done = run_cli(tmp_path, "run", "ask.json", "--input-json", '"refund please"', "--evaluator",
                       "ollama:judge", "--result", FABRIC_JEV_OLLAMA_BASE_URL=stub.url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == pytest.approx(0.8)
    assert done.stderr == "fabric-jev: answered by ollama stub-model-2025 (logprobs)\n"


@pytest.mark.timeout(300)
def test_serve_in_front_of_a_model_route_passes_jevcompat(tmp_path: Path) -> None:
    """Every MUST and SHOULD of the wire spec, 255-option choices (read in rounds) and 128 questions
    included, with `serve --evaluator ollama:…` in front of the stub."""
    from tests.test_serve import conformance

    def steady(text: str) -> dict[str, float]:
        if text.endswith("Answer Yes or No."):
            return {"Yes": 0.7, "No": 0.3}
        if "Answer with one letter" in text:
            return {"A": 0.5, "B": 0.3, "C": 0.2}
        return {"0": 0.2, "1": 0.5, "2": 0.3}

    with stub_server(Stub(steady)) as stub, \
            served("--evaluator", "ollama:judge", env={"FABRIC_JEV_OLLAMA_BASE_URL": stub.url}) as url:
        report = conformance(url, tmp_path)
    summary = report["summary"]
    assert summary["verdict"] == "conformant" and summary["SHOULD"]["failed"] == 0, json.dumps(summary)  # type: ignore[index]
    assert stub.problems == []


def test_serve_takes_the_evaluation_timeout_from_the_command_line(tmp_path: Path) -> None:
    """A gateway to a slow local model needs more than 60 s for a large choice: `--request-timeout`."""
    from tests.llm_stubs import Fault

    body = {"state": "refund please", "questions": QUESTION}
    with stub_server(Stub(model, always=Fault(stall=True))) as stub, \
            served("--evaluator", "ollama:judge", "--request-timeout", "1.5",
                   env={"FABRIC_JEV_OLLAMA_BASE_URL": stub.url}) as url:
        response = httpx.post(url + "/v1/systemone", json=body, timeout=30)
        stub.release.set()
    assert response.status_code == 502
    assert response.json()["detail"]["message"] == "evaluation timed out after 1.5 s"
    bad = run_cli(tmp_path, "serve", "--request-timeout", "0")
    assert bad.returncode == 2 and "'0' is not a number of seconds from 1 to 3600" in bad.stderr
