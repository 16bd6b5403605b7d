"""The question kinds live in one room (questions/): the table names the product's three, and a
fourth kind, defined in this test module alone and added with the registry's public `register`,
is read from a request, answered and measured by every room that asks about a kind."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal, get_args

import anyio
import pytest
from pydantic import BaseModel

from fabric_jev.contract.evaluation import EvaluationRequest, Question, validate_answers, validate_request
from fabric_jev.errors import AnswerInvalid, LabelsInvalid, RequestInvalid
from fabric_jev.evals.summary import confidence_of, label_for, question_of
from fabric_jev.evaluators import LocalEvaluator
from fabric_jev.evaluators.accuracy import is_correct
from fabric_jev.evaluators.llm_prompt import ask, request_labels
from fabric_jev.evaluators.profile import answer_distribution, class_count
from fabric_jev.evaluators.readout import answer as readout_answer
from fabric_jev.questions import (
    KINDS,
    AnswerChecks,
    AskedQuestion,
    Evidence,
    QuestionKind,
    kind_of,
    listed,
    register,
    unregister,
)
from fabric_jev.questions.request import STRICT, Instructions


class EvenQuestion(BaseModel):
    """Is the state's number even?"""

    model_config = STRICT
    type: Literal["even"]
    instructions: Instructions
    criteria: None = None


class Even(QuestionKind):
    """A toy kind: is the state's number even? Two labels, "E" and "O"; the answer is p(even)."""

    name: ClassVar[str] = "even"
    fits: ClassVar[tuple[str, ...]] = ("boolean",)
    request: ClassVar[type[BaseModel]] = EvenQuestion

    def refusal(self, where: str, inside: tuple[Any, ...]) -> str:
        return f"{where}: even takes no criteria"

    def answer(self, q: AskedQuestion, raw: dict[str, Any], where: str, checks: AnswerChecks) -> dict[str, Any]:
        return {"type": "even", "even": checks.probability(raw.get("even"), where, "even")}

    def classes(self, q: AskedQuestion) -> list[str]:
        return ["odd", "even"]

    def distribution(self, q: AskedQuestion, answer: dict[str, Any]) -> list[float]:
        return [1.0 - answer["even"], answer["even"]]

    def expand_shorthand(self, q: AskedQuestion, answer: dict[str, Any]) -> dict[str, Any]:
        # A fixture may say {"even": true}.
        if isinstance(answer.get("even"), bool):
            answer["even"] = 1.0 if answer["even"] else 0.0
        return answer

    def prompt(self, q: AskedQuestion, options: Sequence[str] | None) -> tuple[list[str], tuple[str, ...],
                                                                               tuple[str, ...]]:
        return ["Answer E (even) or O (odd)."], ("E", "O"), ("even", "odd")

    def labels(self, q: AskedQuestion) -> tuple[str, ...]:
        return ("E", "O")

    def readout_keys(self, q: AskedQuestion, probabilities: Sequence[float]) -> list[str]:
        return ["even", "odd"]

    def readout(self, keys: Sequence[str], probabilities: list[float]) -> dict[str, Any]:
        return {"type": "even", "even": probabilities[0]}

    def heuristic(self, q: AskedQuestion, evidence: Evidence) -> dict[str, Any]:
        return {"even": 1.0 if evidence("an even number") >= evidence("an odd number") else 0.0}

    def adapted(self, q: AskedQuestion, probabilities: Sequence[float]) -> dict[str, Any]:
        return {"type": "even", "even": probabilities[1]}

    def criteria_of(self, answer: Mapping[str, Any]) -> Any:
        return None

    def confidence(self, criteria: Any, answer: Mapping[str, Any]) -> float:
        return max(answer["even"], 1.0 - answer["even"])

    def label_for(self, criteria: Any, expected: Any) -> bool | str | int | None:
        return expected if isinstance(expected, bool) else None

    def is_correct(self, answer: dict[str, Any], label: Any) -> bool:
        return (answer["even"] >= 0.5) == label


@pytest.fixture
def even() -> Iterator[QuestionKind]:
    """The toy kind in the table for one test, and out of it again after."""
    kind = register(Even())
    try:
        yield kind
    finally:
        unregister(kind.name)


QUESTION = Question(id="q", type="even", instructions="Is the number even?", criteria=None)  # type: ignore[arg-type]
REQUEST = EvaluationRequest(state="The number is 4.", questions=(QUESTION,))


def test_the_table_holds_the_three_product_kinds_in_the_contracts_order() -> None:
    assert list(KINDS) == ["choice", "score", "noul"]
    assert all(kind_of(name).name == name for name in KINDS)
    with pytest.raises(KeyError):
        kind_of("even")


def test_the_contract_checks_a_fourth_kinds_answer_with_its_own_shape(even: QuestionKind) -> None:
    body = {"answers": {"q": {"even": 0.75, "debug": "dropped"}}, "usage": {"input_tokens": 1, "output_tokens": 1}}
    assert validate_answers(REQUEST, body).answers == {"q": {"type": "even", "even": 0.75}}
    body["answers"] = {"q": {"even": 1.5}}
    with pytest.raises(AnswerInvalid, match=r"^answer to 'q' even is outside \[0, 1\]$"):
        validate_answers(REQUEST, body)


def test_a_route_prompts_and_reads_a_fourth_kind_through_the_table(even: QuestionKind) -> None:
    item = ask(QUESTION)
    assert item.text == "Question: Is the number even?\nAnswer E (even) or O (odd)."
    assert (item.labels, item.keys) == (("E", "O"), ("even", "odd"))
    assert request_labels(REQUEST) == ("E", "O")  # in the one fixed order of every label a route offers
    assert readout_answer("even", ["even", "odd"], [0.9, 0.1]) == {"type": "even", "even": 0.9}


def test_the_local_evaluator_and_a_profile_answer_a_fourth_kind(even: QuestionKind) -> None:
    evaluation = LocalEvaluator().answer_sync(REQUEST)
    assert evaluation.answers["q"]["type"] == "even" and evaluation.answers["q"]["even"] in (0.0, 1.0)
    assert class_count(QUESTION) == 2
    assert answer_distribution(QUESTION, {"type": "even", "even": 0.25}) == [0.75, 0.25]


def test_eval_scores_a_fourth_kind_through_the_table(even: QuestionKind) -> None:
    answer = {"type": "even", "even": 0.2}
    question = question_of("q", answer)
    assert (question.type, question.criteria) == ("even", None)
    assert confidence_of(question, answer) == 0.8
    assert label_for(question, True) is True and label_for(question, 2) is None
    assert is_correct(answer, False) and not is_correct(answer, True)


def test_the_request_models_and_the_type_names_are_the_tables_kinds() -> None:
    # Each kind's request model is its own module's; the contract's request unites the table's, in
    # its order (the advertised schema's order too). The static names list the product's kinds.
    from fabric_jev.contract.evaluation import QuestionType
    from fabric_jev.contract.evaluation_shape import question_union

    for wire in (False, True):
        models = get_args(get_args(question_union(wire=wire))[0])
        assert models == tuple(kind.request_model(wire=wire) for kind in KINDS.values())
        assert [get_args(m.model_fields["type"].annotation) for m in models] == [(name,) for name in KINDS]
    assert set(get_args(QuestionType)) == set(KINDS)
    assert listed() == ["noul", "choice", "score"]


EVEN = {"type": "even", "instructions": "Is the number even?"}


def test_a_request_with_a_registered_kind_validates_and_its_refusals_are_the_kinds(even: QuestionKind) -> None:
    for wire in (False, True):
        request = validate_request({"state": "The number is 4.", "questions": {"q": EVEN}}, wire=wire)
        assert request.questions == (QUESTION,)
    with pytest.raises(RequestInvalid, match=r"^question 'q': even takes no criteria$"):
        validate_request({"state": "4", "questions": {"q": {**EVEN, "criteria": {"a": 1}}}})
    with pytest.raises(RequestInvalid, match=r"^question 'q' has type 'text': choice, score, noul and even only — "):
        validate_request({"state": "4", "questions": {"q": {"type": "text", "instructions": "?"}}})
    with pytest.raises(RequestInvalid, match=r"^question 'q' has unknown keys: instruction "):
        validate_request({"state": "4", "questions": {"q": {"type": "even", "instruction": "?"}}})


def test_the_request_model_and_its_schema_follow_the_table(even: QuestionKind) -> None:
    from fabric_jev.contract.evaluation_shape import EvaluateRequest

    schema = json.dumps(EvaluateRequest.model_json_schema())
    assert "EvenQuestion" in schema
    unregister("even")
    try:
        assert "EvenQuestion" not in json.dumps(EvaluateRequest.model_json_schema())
        with pytest.raises(RequestInvalid, match=r"^question 'q' has type 'even': choice, score and noul only"):
            validate_request({"state": "4", "questions": {"q": EVEN}})
    finally:
        register(even)


def test_the_fixture_evaluator_answers_a_registered_kind_with_its_shorthand(even: QuestionKind) -> None:
    from fabric_jev.evaluators.fixture import FixtureEvaluator

    request = validate_request({"state": "The number is 4.", "questions": {"q": EVEN}})
    fixture = FixtureEvaluator({"answers": {"q": {"even": True}}})
    evaluation = anyio.run(lambda: fixture.evaluate(request, timeout=1.0))
    assert evaluation.answers == {"q": {"type": "even", "even": 1.0}}


def test_the_local_evaluator_answers_a_validated_request_of_a_registered_kind(even: QuestionKind) -> None:
    request = validate_request({"state": "The number is 4.", "questions": {"q": EVEN}})
    answer = LocalEvaluator().answer_sync(request).answers["q"]
    assert answer["type"] == "even" and answer["even"] in (0.0, 1.0)


def test_calibration_learn_and_profiles_measure_a_registered_kind_by_its_defaults(even: QuestionKind) -> None:
    from fabric_jev.calibration.labels import check_label, classes_of, label_from_answer
    from fabric_jev.calibration.learn_temperatures import tempered
    from fabric_jev.calibration.metrics import outcome, summary
    from fabric_jev.evaluators.llm_profile import check

    assert classes_of(QUESTION) == ["odd", "even"]
    assert check_label(QUESTION, "even") == "even"
    with pytest.raises(LabelsInvalid, match=r"^even labels must be one of \['odd', 'even'\]$"):
        check_label(QUESTION, True)
    answer = {"type": "even", "even": 0.75}
    assert label_from_answer(QUESTION, answer) == "even"
    result = outcome(QUESTION, answer, "even")
    assert (result.predicted, result.confidence, result.brier, result.noul) == ("even", 0.75, 0.125, None)
    assert summary([result])["thresholds"]["accept"]["threshold"] == 0.75  # one confidence to accept at
    # The route's reading of a tempered distribution, by the prompt keys' names.
    assert tempered(QUESTION, answer, 1.0) == answer
    assert listed()[-1] == "even"
    profile = {"format": "fabric-jev-llm-profile", "version": 1, "name": "p", "route": "ollama", "model": "m",
               "temperatures": {"even": 2.0}}
    assert check(profile, "p.json").temperature("even") == 2.0


def test_an_eval_summary_names_a_registered_kind_and_refuses_another_in_the_same_words(even: QuestionKind) -> None:
    from pydantic import ValidationError

    from fabric_jev.evals.summary import QuestionSummary

    assert QuestionSummary(question="q", type="even", answers=1, lines=1, mean_confidence=0.5).type == "even"
    unregister("even")
    try:
        with pytest.raises(ValidationError, match=r"Input should be 'noul', 'choice' or 'score'"):
            QuestionSummary(question="q", type="even", answers=1, lines=1, mean_confidence=0.5)
    finally:
        register(even)


def test_the_registry_refuses_a_second_kind_of_one_name_and_keeps_the_products() -> None:
    with pytest.raises(ValueError, match=r"^question kind 'noul' is registered already$"):
        register(Even.__new__(type("Noul2", (Even,), {"name": "noul"})))
    with pytest.raises(TypeError, match=r"^a question kind is a QuestionKind instance, not str$"):
        register("even")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^question kind 'choice' is the product's own and stays$"):
        unregister("choice")
    with pytest.raises(ValueError, match=r"^question kind 'even' is not registered$"):
        unregister("even")
