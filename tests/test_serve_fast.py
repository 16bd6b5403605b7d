"""The fixture evaluator keeps the answers it checked (serve asks it the same questions again and
again): every evaluation, kept or not, is the one `validate_answers` makes of the fixture's
expanded answers, and fails with the same error (docs/performance.md, serve)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_jev import FixtureEvaluator
from fabric_jev.contract.evaluation import Evaluation, EvaluationRequest, Question, validate_answers
from fabric_jev.errors import AnswerInvalid
from fabric_jev.evaluators import fixture as fixture_module
from fabric_jev.evaluators.base import EvaluatorStatus
from fabric_jev.evaluators.fixture import KEPT_ANSWERS, expand_answer
from tests.test_serve import STATE_OK, running

pytestmark = pytest.mark.anyio

CHOICE = Question("team", "choice", "Which team?", {"Billing": "Payments", "Technical": None})
SCORE = Question("anger", "score", "How angry?", ["Calm", "Frustrated", "Very angry"])
NOUL = Question("refund", "noul", "Money back?", None)
DATA = {"answers": {"team": {"choice": "Billing"}, "anger": {"score": 1}, "refund": {"noul": 0.9}}}


def request_of(*questions: Question, state: Any = "a state") -> EvaluationRequest:
    return EvaluationRequest(state=state, questions=questions)


def reference(data: dict[str, Any], request: EvaluationRequest) -> Evaluation | str:
    """What the fixture answered before it kept anything: its answers expanded, then checked as an
    upstream's are (or the error's text)."""
    fresh = FixtureEvaluator(data)
    try:
        state_text = json.dumps(request.state, ensure_ascii=False) if data.get("rules") else ""
        body = {"model": data.get("model", "fixture"),
                "answers": {q.id: expand_answer(q, fresh._pick(q, state_text)) for q in request.questions},
                "usage": data.get("usage", {"input_tokens": 0, "output_tokens": 0})}
        model = body["model"] if isinstance(body["model"], str) else "fixture"
        return validate_answers(request, body, provenance=fresh._provenance(model))
    except AnswerInvalid as exc:
        return str(exc)


async def answered(evaluator: FixtureEvaluator, request: EvaluationRequest) -> Evaluation | str:
    try:
        return await evaluator.evaluate(request, timeout=5)
    except AnswerInvalid as exc:
        return str(exc)


async def test_a_kept_answer_is_the_checked_one_and_each_evaluation_has_its_own_copy() -> None:
    evaluator = FixtureEvaluator(json.loads(json.dumps(DATA)))
    request = request_of(CHOICE, SCORE, NOUL)
    first = await evaluator.evaluate(request, timeout=5)
    assert len(evaluator._answered) == 3  # the three were kept
    first.answers["team"]["probabilities"]["Billing"] = 0.0  # a receiver changes its copy
    first.answers["anger"]["legend"]["0"] = "changed"
    second = await evaluator.evaluate(request, timeout=5)
    assert second == reference(DATA, request)
    assert second.answers["team"]["probabilities"] == {"Billing": 1.0, "Technical": 0.0}
    assert second.answers is not first.answers
    assert evaluator.calls == 2 and len(evaluator.requests) == 2


async def test_a_fixture_changed_in_place_is_read_again() -> None:
    data = json.loads(json.dumps(DATA))
    evaluator = FixtureEvaluator(data)
    request = request_of(NOUL, CHOICE)
    await evaluator.evaluate(request, timeout=5)
    data["answers"]["refund"]["noul"] = 0.25  # the same object, changed
    data["answers"]["team"] = {"choice": "Technical"}  # another object
    assert (await evaluator.evaluate(request, timeout=5)).answers == {
        "refund": {"type": "noul", "noul": 0.25},
        "team": {"type": "choice", "choice": "Technical", "probabilities": {"Billing": 0.0, "Technical": 1.0},
                 "confidence": 1.0}}
    data["answers"]["refund"]["noul"] = 1  # equal to 1.0 as a number, not the same JSON
    assert await answered(evaluator, request) == reference(data, request)
    data["answers"]["refund"]["noul"] = True  # equal to 1 in Python, refused as a probability
    assert await answered(evaluator, request) == reference(data, request) == "answer to 'refund' noul is not a finite number"


async def test_an_invalid_answer_fails_every_time_in_its_own_words() -> None:
    evaluator = FixtureEvaluator({"answers": {"team": {"choice": "Nobody"}, "refund": {"noul": 0.5}}})
    request = request_of(NOUL, CHOICE)
    for _ in range(2):
        assert await answered(evaluator, request) == "answer to 'team': choice is not one of the options (Billing, Technical)"
    assert len(evaluator._answered) == 1  # the valid one only


async def test_the_kept_answers_are_bounded() -> None:
    evaluator = FixtureEvaluator({"answers": {"refund": {"noul": 0.5}}})
    for i in range(KEPT_ANSWERS + 10):
        await evaluator.evaluate(request_of(Question("refund", "noul", f"wording {i}", None)), timeout=5)
    assert len(evaluator._answered) == KEPT_ANSWERS


class BrokenStatus(FixtureEvaluator):
    def status(self) -> EvaluatorStatus:
        raise RuntimeError("status bug holding sk-do-not-echo-0002")


def test_a_broken_status_leaves_the_models_listed_and_the_answers_served() -> None:
    with running(BrokenStatus({"answers": {"q": {"noul": 0.5}}})) as (url, _):
        models = httpx.get(url + "/v1/models", timeout=30)
        answer = httpx.post(url + "/v1/systemone", json=STATE_OK, timeout=30)
    assert models.status_code == 200 and "sk-do-not-echo" not in models.text
    assert {m["description"] for m in models.json()["models"]} == {"served by fabric-jev (unknown)"}
    assert answer.status_code == 200 and answer.json()["x_evaluator"] == "unknown"


async def test_the_fixture_status_is_made_once_per_model_name() -> None:
    data: dict[str, Any] = {"answers": {}, "model": "one"}
    evaluator = FixtureEvaluator(data)
    first = evaluator.status()
    assert evaluator.status() is first and first.model == "one"
    data["model"] = "two"
    assert evaluator.status().model == "two"


def test_frozen_values_are_equal_only_for_equal_json() -> None:
    frozen = fixture_module._frozen
    assert frozen("a") != frozen(["a"]) != frozen({"a": None})
    assert frozen({"a": "b"}) == frozen({"a": "b"}) != frozen({"a": "c"})
    assert frozen(["a", "b"]) != frozen(["b", "a"])
    for not_kept in ([1], [True], {"a": 1.0}, {"a": ["b"]}, [["a"]], 1):
        assert frozen(not_kept) is fixture_module._UNFROZEN


texts = st.text(alphabet="abcBT ", min_size=1, max_size=4)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5]),
                    texts)
described = st.one_of(texts, texts, texts, st.none(), st.lists(st.one_of(texts, st.integers(0, 2)), max_size=2),
                      st.dictionaries(texts, texts, max_size=2))
probabilities = st.dictionaries(st.sampled_from(["a", "b", "0", "1", "2"]), scalars, max_size=3)
anything = st.one_of(
    st.fixed_dictionaries({}, optional={"choice": st.one_of(st.sampled_from(["a", "b"]), scalars),
                                        "score": scalars, "noul": scalars, "probabilities": probabilities,
                                        "confidence": scalars, "type": st.sampled_from(["noul", "choice", "score"])}),
    scalars,
)


def answer(*valid: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Mostly answers that pass (so that some are kept), sometimes anything at all."""
    return st.one_of(st.sampled_from(valid), st.sampled_from(valid), anything)


#: (question, the fixture's answer to it).
asked_and_answered = st.one_of(
    st.tuples(st.builds(lambda i, c: Question("c", "choice", i, c), described,
                        st.fixed_dictionaries({"a": st.one_of(texts, st.none())},
                                              optional={"b": st.one_of(texts, st.none(), st.lists(texts, max_size=1)),
                                                        "B": texts})),
              answer({"choice": "a"}, {"choice": "b"}, {"choice": "a", "confidence": 0.5},
                     {"choice": "a", "probabilities": {"a": 0.75, "b": 0.25}, "confidence": 0.5})),
    st.tuples(st.builds(lambda i, c: Question("s", "score", i, c), described,
                        st.lists(st.one_of(texts, st.dictionaries(texts, st.integers(0, 1), max_size=1)),
                                 min_size=2, max_size=4)),
              answer({"score": 1}, {"score": 0.5}, {"score": 1, "probabilities": {"0": 0.5, "1": 0.5}, "confidence": 1})),
    st.tuples(st.builds(lambda i: Question("n", "noul", i, None), described),
              answer({"noul": 0.5}, {"noul": 1.0}, {"noul": 0.25, "type": "noul"})),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(asked_and_answered, min_size=1, max_size=3, unique_by=lambda qa: qa[0].id), st.integers(1, 3))
def test_kept_or_not_the_evaluation_is_the_one_validate_answers_makes(pairs: list[tuple[Question, Any]],
                                                                      repeats: int) -> None:
    data = {"answers": {q.id: a for q, a in pairs}, "model": "fixture-model"}
    request = request_of(*(q for q, _ in pairs))
    expected = reference(data, request)
    evaluator = FixtureEvaluator(data)

    async def main() -> None:
        for _ in range(repeats):  # the first checks, the next ones may find it kept
            assert await answered(evaluator, request) == expected

    anyio.run(main)
