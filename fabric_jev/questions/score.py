"""score: a position on ordered levels; the answer is the probability-weighted level."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from ..errors import LabelsInvalid
from .common import render, score_confidence, score_labels, softmax
from .kind import AnswerChecks, AskedQuestion, Evidence, Label, QuestionKind, number_of, table_of
from .request import STRICT, Instructions, Text

if TYPE_CHECKING:
    from pydantic import BaseModel

MIN_LEVELS = 2
MAX_LEVELS = 10
# The local heuristic's, chosen by hand on the labeled set in tests/data/local_eval_set.json.
SCORE_TEMPERATURE = 0.03
SCORE_SPREAD = 0.6


def _levels(probabilities: Sequence[float]) -> dict[str, float]:
    return {str(i): p for i, p in enumerate(probabilities)}


@cache
def score_question() -> type[BaseModel]:
    """The request's model for a score (``ScoreQuestion``), made when the request's is: on first use."""
    from pydantic import BaseModel, Field

    class ScoreQuestion(BaseModel):
        """A position on ordered levels: the answer is the probability-weighted level."""

        model_config = STRICT
        type: Literal["score"]
        instructions: Instructions
        criteria: Annotated[list[Text], Field(min_length=MIN_LEVELS, max_length=MAX_LEVELS,
                                              description=f"The {MIN_LEVELS}-{MAX_LEVELS} levels, each described, "
                                                          "lowest first.")]

    return ScoreQuestion


class Score(QuestionKind):
    name: ClassVar[str] = "score"
    fits: ClassVar[tuple[str, ...]] = ("number",)
    listed: ClassVar[int] = 2

    def request_model(self, *, wire: bool) -> type[BaseModel]:
        return score_question()

    def refusal(self, where: str, inside: tuple[object, ...]) -> str:
        if not inside:
            return f"{where}: score criteria must be an array of {MIN_LEVELS}-{MAX_LEVELS} levels"
        return f"{where}: every score level needs a description"

    def answer(self, q: AskedQuestion, raw: dict[str, object], where: str, checks: AnswerChecks) -> dict[str, object]:
        levels = q.criteria
        keys = [str(i) for i in range(len(levels))]
        score: Any = raw.get("score")
        if not checks.finite(score) or not 0 <= score <= len(levels) - 1:
            raise checks.invalid(f"{where}: score is not a finite number in [0, {len(levels) - 1}]")
        return {
            "type": "score",
            "score": float(score),
            # The legend is the request's, never the response's.
            "legend": dict(zip(keys, levels, strict=True)),
            "probabilities": checks.distribution(raw.get("probabilities"), keys, where),
            "confidence": checks.probability(raw.get("confidence"), where, "confidence"),
        }

    def classes(self, q: AskedQuestion) -> list[str]:
        return [str(i) for i in range(len(q.criteria))]

    def distribution(self, q: AskedQuestion, answer: dict[str, object]) -> list[float]:
        return [float(table_of(answer)[str(i)]) for i in range(len(q.criteria))]

    def expand_shorthand(self, q: AskedQuestion, answer: dict[str, object]) -> dict[str, object]:
        # {"score": 2}: all the probability on level 2, with confidence 1.
        if "probabilities" not in answer and isinstance(q.criteria, list):
            level = answer.get("score")
            answer["probabilities"] = {str(i): 1.0 if i == level else 0.0 for i in range(len(q.criteria))}
            answer.setdefault("confidence", 1.0)
        return answer

    def prompt(self, q: AskedQuestion, options: Sequence[str] | None) -> tuple[list[str], tuple[str, ...],
                                                                               tuple[str, ...]]:
        levels = q.criteria
        labels = score_labels(len(levels))
        lines = ["Levels:"]
        lines += [f"{label}. {render(level).strip()}" for label, level in zip(labels, levels, strict=True)]
        lines.append(f"Answer with one digit from 0 to {len(levels) - 1}.")
        return lines, labels, labels

    def labels(self, q: AskedQuestion) -> tuple[str, ...]:
        return score_labels(len(q.criteria))

    def readout_keys(self, q: AskedQuestion, probabilities: Sequence[float]) -> list[str]:
        return [str(i) for i in range(len(probabilities))]

    def readout(self, keys: Sequence[str], probabilities: list[float]) -> dict[str, object]:
        # The expected level: the wire's rule (a score is Σ i·p, jevcompat's score.expectation). The most
        # probable level is the largest of `probabilities`; between two likely levels they can differ.
        probs = probabilities
        score = sum(i * p for i, p in enumerate(probs))
        return {"type": "score", "score": min(float(len(probs) - 1), max(0.0, score)),
                "probabilities": _levels(probs), "confidence": score_confidence(probs)}

    def heuristic(self, q: AskedQuestion, evidence: Evidence) -> dict[str, object]:
        levels = [render(level) for level in q.criteria]
        n = len(levels)
        sims = [evidence(level) for level in levels]
        by_level = softmax(sims, SCORE_TEMPERATURE)
        from_levels = sum(i * p for i, p in enumerate(by_level))
        # The ordinal axis: how much closer the state is to the top level than the bottom one.
        axis = (n - 1) / (1 + math.exp(-(sims[-1] - sims[0]) / SCORE_TEMPERATURE))
        position = (from_levels + axis) / 2
        weights = [math.exp(-((i - position) ** 2) / (2 * SCORE_SPREAD ** 2)) for i in range(n)]
        total = sum(weights)
        probs = [w / total for w in weights]
        score = sum(i * p for i, p in enumerate(probs))
        return {"score": min(float(n - 1), max(0.0, score)), "probabilities": _levels(probs),
                "confidence": score_confidence(probs)}

    def adapted(self, q: AskedQuestion, probabilities: Sequence[float]) -> dict[str, object]:
        # The expected level, kept within half a level of the most probable one so that rounding
        # the score names the level the profile believes in (an expectation alone can land between
        # two likely levels on a third, unlikely one).
        probs = list(probabilities)
        mode = max(range(len(probs)), key=lambda i: probs[i])
        expected = sum(i * p for i, p in enumerate(probs))
        score = mode + min(0.49, max(-0.49, expected - mode))
        return {"type": "score", "score": min(float(len(probs) - 1), max(0.0, score)),
                "probabilities": _levels(probs), "confidence": score_confidence(probs)}

    def criteria_of(self, answer: Mapping[str, object]) -> Collection[object] | None:
        legend = answer.get("legend")
        return list(legend.values()) if isinstance(legend, dict) else list(table_of(answer))

    def confidence(self, criteria: Collection[object] | None, answer: Mapping[str, object]) -> float:
        level = min(len(criteria or ()) - 1, max(0, round(number_of(answer, "score"))))
        return float(table_of(answer)[str(level)])

    def label_for(self, criteria: Collection[object] | None, expected: object) -> bool | str | int | None:
        if isinstance(expected, bool) or not isinstance(expected, int | float):
            return None
        level = round(expected)
        return level if 0 <= level < len(criteria or ()) and abs(level - expected) < 1e-9 else None

    def is_correct(self, answer: dict[str, object], label: object) -> bool:
        return bool(round(number_of(answer, "score")) == label)

    def trivially_right(self, criteria: object, label: object) -> bool:
        return bool(label == 0)  # the lowest level

    def title(self) -> str:
        return "score (rounded level)"

    def label_classes(self, q: AskedQuestion) -> list[Label]:
        return list(range(len(q.criteria)))

    def check_label(self, q: AskedQuestion, label: object) -> Label:
        n = len(q.criteria)
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < n:
            raise LabelsInvalid(f"a score label must be a level index from 0 to {n - 1}")
        return label

    def picked(self, q: AskedQuestion, answer: dict[str, object]) -> Label:
        return min(len(q.criteria) - 1, max(0, round(number_of(answer, "score"))))
