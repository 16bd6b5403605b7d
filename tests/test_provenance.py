"""Every result says who answered: `Evaluation.provenance`, the envelope's `evaluator`, batch lines,
`fabric-jev run`'s line on standard error. Real hosts, workers, evaluators and a Jev-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric_jev import FixtureEvaluator, HostConfig, JevHost, RunState
from fabric_jev.batch import BatchOutcome, batch
from fabric_jev.contract.evaluation import Evaluation, EvaluationRequest, EvaluationUsage, validate_request
from fabric_jev.contract.provenance import AnswererLog, Provenance, recorded_provenance
from fabric_jev.evaluators import TYPESAFE, AuthStore, CredentialResolver, HttpEvaluator, RecordingEvaluator
from fabric_jev.evaluators.base import EvaluatorStatus
from fabric_jev.testing import ScriptedEvaluator
from tests.cli_support import cli
from tests.conftest import program
from tests.upstream import Front, front, mock

KEY = "sk-provenance-route-key"
REQUEST = validate_request({"state": "the app crashes on save", "questions": {
    "q": {"type": "noul", "instructions": "Is this a bug report?"}}})
ASK = program("const r = await jev.evaluate({state: 'x', questions: {q: {type: 'noul', instructions: 'y?'}}});"
              "return Object.keys(r).sort()", requires=["jev.evaluate"])


def fixture(model: str = "canned") -> FixtureEvaluator:
    return FixtureEvaluator({"answers": {"q": {"noul": 0.8}}, "model": model})


@pytest.mark.anyio
async def test_the_fixture_and_a_scripted_evaluator_name_themselves(tmp_path: Path) -> None:
    fixed = await fixture().evaluate(REQUEST, timeout=5)
    scripted = await ScriptedEvaluator({"q": {"noul": 0.3}}, model="script-1").evaluate(REQUEST, timeout=5)
    assert fixed.provenance == Provenance(route="fixture", model="canned", readout="fixture")
    assert scripted.provenance == Provenance(route="scripted", model="script-1", readout="fixture")
    assert fixed.to_json()["evaluator"] == {"route": "fixture", "model": "canned", "readout": "fixture",
                                            "calibration": "none"}


@pytest.mark.anyio
async def test_the_local_evaluator_says_it_is_the_heuristic() -> None:
    from fabric_jev.evaluators import LocalEvaluator

    evaluation = await LocalEvaluator().evaluate(REQUEST, timeout=30)
    assert evaluation.provenance is not None
    assert (evaluation.provenance.route, evaluation.provenance.readout) == ("local", "heuristic")
    assert evaluation.provenance.model == evaluation.model and evaluation.provenance.profile is None


@pytest.mark.anyio
async def test_a_system_one_route_names_the_model_the_service_reported(tmp_path: Path) -> None:
    with mock(key=KEY) as upstream:
        route = HttpEvaluator(TYPESAFE, base_urls={"typesafe": upstream}, environ={},
                              credentials=CredentialResolver(TYPESAFE, store=AuthStore(tmp_path / "a.json"),
                                                             environ={"TYPESAFE_API_KEY": KEY}))
        evaluation = await route.evaluate(REQUEST, timeout=10)
        await route.aclose()
    assert evaluation.provenance == Provenance(route="typesafe", model="jevcompat-mock-0.1", readout="systemone",
                                               calibration="upstream")


@pytest.mark.anyio
async def test_an_upstream_cannot_name_its_own_answerer(tmp_path: Path) -> None:
    claim = {"route": "local", "model": "trust-me", "readout": "logprobs", "calibration": "temperature"}
    with mock(key=KEY) as upstream, front(Front(upstream=upstream, tamper=lambda b: {**b, "evaluator": claim})) as f:
        route = HttpEvaluator(TYPESAFE, base_urls={"typesafe": f.url}, environ={},
                              credentials=CredentialResolver(TYPESAFE, store=AuthStore(tmp_path / "a.json"),
                                                             environ={"TYPESAFE_API_KEY": KEY}))
        evaluation = await route.evaluate(REQUEST, timeout=10)
        await route.aclose()
    assert evaluation.provenance is not None and evaluation.provenance.readout == "systemone"
    assert evaluation.provenance.route == "typesafe"


@pytest.mark.anyio
async def test_a_cassette_replays_who_answered_and_says_it_replays(tmp_path: Path) -> None:
    tape = tmp_path / "tape.jsonl"
    recorder = RecordingEvaluator(tape, "new", record_from=lambda: fixture("recorded-model"))
    live = await recorder.evaluate(REQUEST, timeout=5)
    await recorder.aclose()
    replayed = await RecordingEvaluator(tape, "none").evaluate(REQUEST, timeout=5)
    assert live.provenance is not None and not live.provenance.replayed
    assert replayed.provenance == live.provenance.model_copy(update={"replayed": True})
    # A cassette recorded before answers named their answerer: "recorded", by the model it names.
    header, *lines = tape.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:
        del record["evaluation"]["evaluator"]
    tape.write_text("\n".join([header, *(json.dumps(r) for r in records)]) + "\n")
    old = await RecordingEvaluator(tape, "none").evaluate(REQUEST, timeout=5)
    assert old.provenance == Provenance(route="cassette", model="recorded-model", readout="recorded", replayed=True)


@pytest.mark.parametrize("claim", [
    {"route": "", "model": "m", "readout": "logprobs"},
    {"route": "x", "model": "m", "readout": "guessed"},
    {"route": "x", "model": "m", "readout": "logprobs", "key": "sk-extra"},
    {"route": "x", "model": "m", "readout": "mixed"},
    "fixture",
])
def test_a_recorded_answerer_that_is_not_a_provenance_counts_as_none(claim: object) -> None:
    assert recorded_provenance({"model": "m1", "evaluator": claim}) == Provenance(
        route="cassette", model="m1", readout="recorded", replayed=True)


class Named:
    """An application's own evaluator: answers in turn from the given answerers (None: says nothing)."""

    def __init__(self, *answerers: Provenance | None) -> None:
        self.answerers = answerers
        self.calls = 0

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        provenance = self.answerers[self.calls % len(self.answerers)]
        self.calls += 1
        return Evaluation({q.id: {"type": "noul", "noul": 0.5} for q in request.questions},
                          EvaluationUsage(3, 1), "own-model", provenance)

    def status(self) -> EvaluatorStatus:
        return EvaluatorStatus("my-route", "own-model")

    async def aclose(self) -> None:
        return None


ASK_TWICE = program("for (const i of [1, 2, 3]) await jev.evaluate({state: 'x', questions: "
                    "{q: {type: 'noul', instructions: 'y?'}}}); return 1", requires=["jev.evaluate"])


@pytest.mark.anyio
async def test_the_envelope_names_the_one_answerer_and_the_guest_sees_only_answers(tmp_path: Path) -> None:
    async with JevHost(HostConfig(), evaluator=fixture()) as host:
        asked = await host.run(ASK, None)
        nothing = await host.run(program("return 1"), None)
    assert asked.state is RunState.COMPLETED, asked.error
    assert asked.result == ["answers", "model", "usage"]
    assert asked.to_json()["evaluator"] == {"route": "fixture", "model": "canned", "readout": "fixture",
                                            "calibration": "none"}
    assert nothing.evaluator is None and "evaluator" not in nothing.to_json()


@pytest.mark.anyio
async def test_several_answerers_show_as_mixed_with_each_listed_once() -> None:
    one = Provenance(route="ollama", model="qwen3:8b", readout="logprobs", valid_mass={"q": 0.3}, low_mass=("q",))
    two = Provenance(route="ollama", model="qwen3:8b", readout="samples", samples=5)
    async with JevHost(HostConfig(), evaluator=Named(one, two)) as host:
        envelope = await host.run(ASK_TWICE, None)
    assert envelope.state is RunState.COMPLETED, envelope.error
    shown = envelope.to_json()["evaluator"]
    assert shown["readout"] == "mixed" and shown["lowMass"] == ["q"]
    assert shown["answerers"] == [
        {"route": "ollama", "model": "qwen3:8b", "readout": "logprobs", "calibration": "none"},
        {"route": "ollama", "model": "qwen3:8b", "readout": "samples", "calibration": "none", "samples": 5}]


@pytest.mark.anyio
async def test_an_evaluator_that_does_not_say_is_named_by_its_route() -> None:
    async with JevHost(HostConfig(), evaluator=Named(None)) as host:
        envelope = await host.run(ASK_TWICE, None)
    assert envelope.evaluator is not None
    assert envelope.evaluator.to_json() == {"route": "my-route", "model": "own-model", "readout": "unknown",
                                            "calibration": "none"}


def test_one_answerer_keeps_the_low_mass_questions_of_every_evaluation() -> None:
    log = AnswererLog()
    base = Provenance(route="openai", model="gpt-x", readout="logprobs")
    log.add(base.model_copy(update={"valid_mass": {"a": 0.2, "b": 0.9}, "low_mass": ("a",)}))
    log.add(base.model_copy(update={"valid_mass": {"c": 0.1}, "low_mass": ("c",)}))
    assert log.summary() == base.model_copy(update={"low_mass": ("a", "c")})


@pytest.mark.anyio
async def test_batch_lines_carry_the_evaluator_and_read_back(tmp_path: Path) -> None:
    outcomes = [o async for o in batch(ASK, [None, None], evaluator=fixture())]
    assert [o.state for o in outcomes] == ["completed", "completed"]
    line = outcomes[0].to_json()
    assert line["evaluator"] == {"route": "fixture", "model": "canned", "readout": "fixture", "calibration": "none"}
    assert BatchOutcome.from_json(json.loads(json.dumps(line))) == outcomes[0]
    with pytest.raises(ValueError, match="evaluator must be a provenance"):
        BatchOutcome.from_json({**line, "evaluator": {"route": "fixture"}})


def test_run_names_the_evaluator_that_answered_on_stderr(tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"answers": {"q": {"noul": 0.8}}, "model": "canned"}))
    path = tmp_path / "ask.json"
    path.write_text(json.dumps(ASK))
    done = cli("run", str(path), "--evaluator", f"fixture:{answers}")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "fabric-jev: answered by fixture canned (fixture)\n"
    assert json.loads(done.stdout)["evaluator"]["route"] == "fixture"


def test_run_warns_when_the_offline_heuristic_answered(tmp_path: Path) -> None:
    path = tmp_path / "ask.json"
    path.write_text(json.dumps(ASK))
    done = cli("run", str(path), "--evaluator", "local", "--result")
    assert done.returncode == 0, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("fabric-jev: warning: answered by the offline heuristic")
    assert "Use the model you already run" in line


def test_run_of_a_program_that_asks_nothing_names_no_evaluator(tmp_path: Path) -> None:
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(program("return 2")))
    done = cli("run", str(path), "--evaluator", "local", "--result")
    assert done.returncode == 0 and done.stderr == "" and json.loads(done.stdout) == 2


def test_the_run_line_flags_questions_whose_labels_got_little_mass() -> None:
    from fabric_jev.cli.run import answered_by

    line = answered_by(Provenance(route="ollama", model="qwen3:8b", readout="logprobs",
                                  low_mass=("urgent", "safe")))
    assert line == ("fabric-jev: answered by ollama qwen3:8b (logprobs); warning: the labels got under half "
                    "the probability mass for urgent, safe")
