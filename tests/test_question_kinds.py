"""The question kinds live in one room (questions/): the table names the product's three, and a
fourth kind, registered in-process only, is dispatched by every room that asks about a kind."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, get_args

import pytest

from fabric_jev.contract.evaluation import EvaluationRequest, Question, validate_answers
from fabric_jev.errors import AnswerInvalid
from fabric_jev.evals.summary import confidence_of, label_for, question_of
from fabric_jev.evaluators import LocalEvaluator
from fabric_jev.evaluators.accuracy import is_correct
from fabric_jev.evaluators.llm_prompt import ask, request_labels
from fabric_jev.evaluators.profile import answer_distribution, class_count
from fabric_jev.evaluators.readout import answer as readout_answer
from fabric_jev.questions import KINDS, AnswerChecks, AskedQuestion, Evidence, QuestionKind, kind_of


class Even(QuestionKind):
    """A toy kind: is the state's number even? Two labels, "E" and "O"; the answer is p(even)."""

    name: ClassVar[str] = "even"
    fits: ClassVar[tuple[str, ...]] = ("boolean",)

    def refusal(self, where: str, inside: tuple[Any, ...]) -> str:
        return f"{where}: even takes no criteria"

    def answer(self, q: AskedQuestion, raw: dict[str, Any], where: str, checks: AnswerChecks) -> dict[str, Any]:
        return {"type": "even", "even": checks.probability(raw.get("even"), where, "even")}

    def classes(self, q: AskedQuestion) -> list[str]:
        return ["odd", "even"]

    def distribution(self, q: AskedQuestion, answer: dict[str, Any]) -> list[float]:
        return [1.0 - answer["even"], answer["even"]]

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
    kind = Even()
    KINDS[kind.name] = kind
    try:
        yield kind
    finally:
        del KINDS[kind.name]


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
    # A kind's request model sits in contract/evaluation_shape.py (built on first use, advertised
    # to MCP clients as one schema): this holds the two lists to one another.
    from fabric_jev.contract.evaluation import QuestionType
    from fabric_jev.contract.evaluation_shape import Question as RequestQuestion
    from fabric_jev.contract.evaluation_shape import WireQuestion
    from fabric_jev.evals.summary import QuestionSummary

    for union in (RequestQuestion, WireQuestion):
        models = get_args(get_args(union)[0])
        assert [get_args(m.model_fields["type"].annotation) for m in models] == [(name,) for name in KINDS]
    assert set(get_args(QuestionType)) == set(KINDS)
    assert set(get_args(QuestionSummary.model_fields["type"].annotation)) == set(KINDS)
