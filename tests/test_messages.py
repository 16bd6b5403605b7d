"""The common first-day mistakes get a message that says what to do (issue 31, "Messages"):
one test per message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric_jev import (
    AnswerInvalid,
    ConfigError,
    HostConfig,
    JevHost,
    ProgramInvalid,
    RequestInvalid,
    RunState,
    SchemaInvalid,
    TypeScriptError,
)
from fabric_jev.contract.evaluation import validate_request
from fabric_jev.contract.program import parse_program
from fabric_jev.testing import ScriptedEvaluator
from fabric_jev.typecheck import cache
from fabric_jev.typecheck.declarations import render
from tests.cli_support import ROOT, cli
from tests.conftest import program

pytestmark = pytest.mark.anyio

NOUL = "{state: 'x', questions: {ok: {type: 'noul', instructions: 'Is it ok?'}}}"


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRIC_JEV_HOME", str(tmp_path / "home"))
    cache.forget_all()


def test_limits_timeout_says_did_you_mean_timeout_ms() -> None:
    with pytest.raises(ProgramInvalid, match=r"limits\.timeout: Extra inputs are not permitted "
                                             r"\(did you mean timeoutMs\?\)"):
        parse_program(program("return 1", limits={"timeout": 5000}))


def test_an_unknown_program_key_says_which_it_meant() -> None:
    with pytest.raises(ProgramInvalid, match=r"require: Extra inputs are not permitted \(did you mean requires\?\)"):
        parse_program(program("return 1", require=["jev.evaluate"]))
    with pytest.raises(ProgramInvalid, match=r"input_schema: Extra inputs .*\(did you mean inputSchema\?\)"):
        parse_program({"name": "x", "code": "return 1", "input_schema": {}, "outputSchema": {}})


def test_an_unknown_config_key_says_which_it_meant() -> None:
    with pytest.raises(ConfigError, match=r"maxConcurentRuns: .*\(did you mean maxConcurrentRuns\?\)"):
        HostConfig.parse({"maxConcurentRuns": 3})
    with pytest.raises(ConfigError, match=r"defaults has unknown keys: timeout \(did you mean timeoutMs\?\)"):
        HostConfig.parse({"defaults": {"timeout": 5000}})
    with pytest.raises(ConfigError, match=r"typecheck\.typeScript: .*\(did you mean typescript\?\)"):
        HostConfig.parse({"typecheck": {"typeScript": "warn"}})


def test_an_unknown_question_key_says_which_it_meant() -> None:
    with pytest.raises(RequestInvalid, match=r"has unknown keys: instruction \(did you mean instructions\?\)"):
        validate_request({"state": "x", "questions": {"q": {"type": "noul", "instruction": "ok?"}}})


def test_a_schema_keyword_typo_says_which_it_meant() -> None:
    with pytest.raises(SchemaInvalid, match=r"keyword 'propertes' is not supported \(did you mean properties\?\)"):
        parse_program(program("return 1", inputSchema={"type": "object", "propertes": {}}))


def test_a_type_array_gets_the_any_of_hint() -> None:
    with pytest.raises(SchemaInvalid, match=r'outputSchema at \$\.type: type must be a single string; for a value '
                                            r'of any of several types write anyOf instead: '
                                            r'\{"anyOf": \[\{"type": "string"\}, \{"type": "null"\}\]\}'):
        parse_program(program("return null", outputSchema={"type": ["string", "null"]}))


async def test_reading_probability_on_a_noul_answer_names_the_noul_field() -> None:
    code = f"const r = await jev.evaluate({NOUL});\nreturn r.answers.ok.probability;"
    async with JevHost() as host:
        with pytest.raises(TypeScriptError) as caught:
            await host.run(program(code, requires=["jev.evaluate"], language="typescript"))
    assert ("Property 'probability' does not exist on type 'JevNoulAnswer'. (a noul answer is {type, noul}: "
            "its probability of yes is the field noul (0 to 1)) (TS2339)") in str(caught.value)
    # The declarations' own documentation says it on hover, in an editor.
    assert "Its probability of yes is the field `noul` (there is no\n *  `probability`)" in render(
        parse_program(program(code, requires=["jev.evaluate"])), observed=False)


async def test_a_forgotten_await_says_did_you_forget_await() -> None:
    code = f"const r = jev.evaluate({NOUL});\nreturn r.answers.ok.noul;"
    async with JevHost() as host:
        with pytest.raises(TypeScriptError) as caught:
            await host.run(program(code, requires=["jev.evaluate"], language="typescript"))
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.message == ("Property 'answers' does not exist on type 'Promise<…>'. (did you forget "
                                  "`await`? jev.evaluate, tools.call, program.sleep and program.nextEvent return "
                                  "promises)")
    assert len(diagnostic.message) < 200  # no type dump


async def test_a_scripted_choice_outside_the_options_lists_them() -> None:
    ask = ("const r = await jev.evaluate({state: 'x', questions: {team: {type: 'choice', instructions: 'Which?', "
           "criteria: {billing: null, technical: null}}}}); return r.answers.team.choice;")
    evaluator = ScriptedEvaluator({"team": {"choice": "sales"}})
    async with JevHost(evaluator=evaluator) as host:
        envelope = await host.run(program(ask, requires=["jev.evaluate"]))
    assert envelope.state is RunState.FAILED
    assert envelope.error is not None
    assert "answer to 'team': choice is not one of the options (billing, technical)" in envelope.error


def test_an_answer_check_lists_the_options() -> None:
    from fabric_jev.contract.evaluation import validate_answers

    request = validate_request({"state": "x", "questions": {"t": {"type": "choice", "instructions": "?",
                                                                  "criteria": {"a": None, "b": None}}}})
    with pytest.raises(AnswerInvalid, match=r"choice is not one of the options \(a, b\)"):
        validate_answers(request, {"answers": {"t": {"type": "choice", "choice": "c",
                                                     "probabilities": {"a": 0.5, "b": 0.5}, "confidence": 0.5}}})


def test_verify_compile_says_why_on_stderr_when_it_exits_1(tmp_path: Path) -> None:
    example = ROOT / "examples" / "verify"
    fixture = tmp_path / "low.json"
    answers = json.loads((example / "fixture.json").read_text())
    answers["answers"]["coverage"] = {"noul": 0.4}
    fixture.write_text(json.dumps(answers))
    done = cli("verify", "compile", str(example / "dictionary.json"), "--intent", "the review page",
               "--evaluator", f"fixture:{fixture}")
    assert done.returncode == 1
    assert json.loads(done.stdout)["status"] == "incomplete"
    assert done.stderr.startswith("fabric-jev: verify compile: the plan is incomplete, not ready: coverage 0.40")
    assert done.stderr.endswith("; nothing to run\n") and done.stderr.count("\n") == 1
