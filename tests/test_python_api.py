"""The Python API takes evaluator spec strings wherever it takes an evaluator, and exports
`evaluator_from_spec` and `load_program`. Real hosts, workers and evaluators."""

from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path

import pydantic
import pytest

import fabric_jev
from fabric_jev import ConfigError, FixtureEvaluator, JevHost, RunState, evaluator_from_spec, run_program
from fabric_jev.approval import QUESTIONS, ApprovalRequest, ProposedAction, classify
from fabric_jev.verification import compile_verification
from tests.conftest import program

ROOT = Path(__file__).resolve().parent.parent
ASK = program("const r = await jev.evaluate({state: 'x', questions: {q: {type: 'noul', instructions: 'y?'}}});"
              "return [r.answers.q.noul, r.model]", requires=["jev.evaluate"])

#: The packages whose public functions and classes a library user calls.
PUBLIC = ("fabric_jev", "fabric_jev.batch", "fabric_jev.verification", "fabric_jev.approval",
          "fabric_jev.serve", "fabric_jev.host", "fabric_jev.evaluators")


@pytest.fixture
def fixture_file(tmp_path: Path) -> str:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({"answers": {"q": {"noul": 0.25}}, "model": "fixture-model"}))
    return str(path)


def test_every_public_callable_that_takes_an_evaluator_takes_a_spec_string() -> None:
    takers = []
    for package in PUBLIC:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            target = getattr(module, name)
            # A model's `evaluator` is data it holds (an envelope's answerer), not an evaluator to build.
            if not callable(target) or (isinstance(target, type) and issubclass(target, pydantic.BaseModel)):
                continue
            try:
                parameters = inspect.signature(target).parameters
            except (TypeError, ValueError):
                continue
            if "evaluator" in parameters:
                takers.append(f"{package}.{name}")
                annotation = str(parameters["evaluator"].annotation)
                assert "str" in annotation.replace("Evaluator", ""), f"{package}.{name}: evaluator: {annotation}"
    assert {"fabric_jev.run_program", "fabric_jev.JevHost", "fabric_jev.batch.batch", "fabric_jev.batch.run_batch",
            "fabric_jev.verification.compile_verification", "fabric_jev.approval.classify",
            "fabric_jev.serve.serve", "fabric_jev.serve.JevServer"} <= set(takers)


def test_run_program_takes_a_spec_string(fixture_file: str) -> None:
    env = run_program(ASK, None, evaluator=f"fixture:{fixture_file}")
    assert env.state is RunState.COMPLETED, env.error
    assert env.result == [0.25, "fixture-model"]


@pytest.mark.anyio
async def test_a_host_takes_a_spec_string(fixture_file: str) -> None:
    async with JevHost(evaluator=f"fixture:{fixture_file}") as host:
        assert isinstance(host.evaluator, FixtureEvaluator)
        env = await host.run(ASK, None)
    assert env.result == [0.25, "fixture-model"]


def test_a_bad_spec_is_a_config_error_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown evaluator 'nonsense'"):
        run_program(ASK, None, evaluator="nonsense")
    with pytest.raises(ConfigError, match="needs a file: fixture:FILE"):
        evaluator_from_spec("fixture:")
    with pytest.raises(ConfigError, match="an evaluator spec is a string"):
        evaluator_from_spec(3)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_evaluator_from_spec_builds_what_the_command_line_builds(fixture_file: str) -> None:
    from fabric_jev.contract import validate_request
    from fabric_jev.evaluators import LocalEvaluator

    evaluator = evaluator_from_spec(f"fixture:{fixture_file}")
    try:
        answer = await evaluator.evaluate(validate_request(
            {"state": "x", "questions": {"q": {"type": "noul", "instructions": "y?"}}}), timeout=5)
    finally:
        await evaluator.aclose()
    assert answer.answers["q"]["noul"] == 0.25
    local = evaluator_from_spec("local")
    assert isinstance(local, LocalEvaluator)
    await local.aclose()
    assert fabric_jev.evaluators.evaluator_from_spec is evaluator_from_spec


@pytest.mark.anyio
async def test_compile_verification_and_classify_take_spec_strings(tmp_path: Path) -> None:
    plan = await compile_verification(
        "The draft review page shows the editable composer with Review notes, no model error, and the Run task "
        "button.", json.loads((ROOT / "examples/verify/dictionary.json").read_text()),
        f"fixture:{ROOT / 'examples/verify/fixture.json'}")
    assert plan.status == "ready", plan.reason
    answers = tmp_path / "approve.json"
    answers.write_text(json.dumps({"answers": {qid: {"noul": 0.9 if qid == "safe" else 0.1} for qid in QUESTIONS}}))
    request = ApprovalRequest(user_text="list the files", action=ProposedAction(ref="fs.list", risk="read", description="list files"))
    decision = await classify(request, evaluator=f"fixture:{answers}")
    assert decision.decision == "allow", decision.reason
    refused = await classify(request, evaluator="no-such-route", headless=True)
    assert refused.decision == "deny" and "the classifier cannot be built (unknown evaluator" in refused.reason


@pytest.mark.anyio
async def test_a_jev_server_built_from_a_spec_answers_and_closes_it(fixture_file: str) -> None:
    from fabric_jev.serve import JevServer

    server = JevServer(f"fixture:{fixture_file}")
    body = json.dumps({"state": "x", "model": "jev-latest", "questions": {"q": {"type": "noul", "instructions": "?"}}})
    status, answer = await server.handle("POST", "/v1/systemone", {}, body.encode())
    await server.aclose()
    assert status == 200 and answer["answers"]["q"]["noul"] == 0.25


def test_load_program_is_exported(tmp_path: Path) -> None:
    path = tmp_path / "p.js"
    path.write_text('/* @program {"inputSchema": {}, "outputSchema": {}} */\nreturn 5')
    env = run_program(fabric_jev.load_program(path), None, evaluator="local")
    assert env.state is RunState.COMPLETED and env.result == 5
