"""noul: a yes-or-no question; the answer is the probability of yes."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, ClassVar, Literal

from ..errors import LabelsInvalid
from .common import NOUL_LABELS, declarative, render, softmax
from .kind import AnswerChecks, AskedQuestion, Evidence, Label, QuestionKind, number_of
from .request import STRICT, Instructions, Text

if TYPE_CHECKING:
    from pydantic import BaseModel

# The local heuristic's, chosen by hand on the labeled set in tests/data/local_eval_set.json.
NOUL_CENTER = 0.38
NOUL_WIDTH = 0.06
PAIR_TEMPERATURE = 0.04


@cache
def noul_questions() -> tuple[type[BaseModel], type[BaseModel], type]:
    """The request's models for a noul (``NoulQuestion``, and ``WireNoulQuestion`` as a
    Jev-compatible server reads one) and its criteria's (``NoulCriteria``), made when the
    request's is: on first use."""
    from pydantic import BaseModel, ConfigDict
    from typing_extensions import TypedDict

    class NoulCriteria(TypedDict, total=False):
        """What yes and no mean, if the instructions leave it open."""

        __pydantic_config__ = ConfigDict(strict=True, extra="forbid")  # type: ignore[misc]
        true: Text | None
        false: Text | None

    class NoulQuestion(BaseModel):
        """A yes-or-no question: the answer is the probability of yes."""

        model_config = STRICT
        type: Literal["noul"]
        instructions: Instructions
        criteria: NoulCriteria | None = None

    class WireNoulQuestion(NoulQuestion):
        """A noul as a Jev-compatible server reads one: it may rely on its criteria alone (spec:
        noul.no-instructions)."""

        instructions: Text | None = None  # type: ignore[assignment]

    return NoulQuestion, WireNoulQuestion, NoulCriteria


class Noul(QuestionKind):
    name: ClassVar[str] = "noul"
    fits: ClassVar[tuple[str, ...]] = ("boolean",)
    listed: ClassVar[int] = 0

    def request_model(self, *, wire: bool) -> type[BaseModel]:
        return noul_questions()[1 if wire else 0]

    def refusal(self, where: str, inside: tuple[object, ...]) -> str:
        if len(inside) > 1:
            return f"{where}: noul criteria values must be descriptions or null"
        return f"{where}: noul criteria may only have 'true' and 'false' keys"

    def answer(self, q: AskedQuestion, raw: dict[str, object], where: str, checks: AnswerChecks) -> dict[str, object]:
        return {"type": "noul", "noul": checks.probability(raw.get("noul"), where, "noul")}

    def classes(self, q: AskedQuestion) -> list[str]:
        return ["false", "true"]

    def distribution(self, q: AskedQuestion, answer: dict[str, object]) -> list[float]:
        return [1.0 - number_of(answer, "noul"), number_of(answer, "noul")]

    def prompt(self, q: AskedQuestion, options: Sequence[str] | None) -> tuple[list[str], tuple[str, ...],
                                                                               tuple[str, ...]]:
        criteria = q.criteria or {}
        lines = []
        if criteria.get("true") is not None:
            lines.append(f"Answer Yes if: {render(criteria['true']).strip()}")
        if criteria.get("false") is not None:
            lines.append(f"Answer No if: {render(criteria['false']).strip()}")
        lines.append("Answer Yes or No.")
        return lines, NOUL_LABELS, ("true", "false")

    def labels(self, q: AskedQuestion) -> tuple[str, ...]:
        return NOUL_LABELS

    def readout_keys(self, q: AskedQuestion, probabilities: Sequence[float]) -> list[str]:
        return [str(i) for i in range(len(probabilities))]

    def readout(self, keys: Sequence[str], probabilities: list[float]) -> dict[str, object]:
        return {"type": "noul", "noul": probabilities[0]}

    def heuristic(self, q: AskedQuestion, evidence: Evidence) -> dict[str, object]:
        criteria = q.criteria or {}
        question = render(q.instructions)
        yes_text = render(criteria.get("true")) or declarative(question)
        if not yes_text:
            return {"noul": 0.5}
        yes = evidence(yes_text)
        no_text = render(criteria.get("false"))
        if no_text:
            p = softmax([yes, evidence(no_text)], PAIR_TEMPERATURE)[0]
        else:
            p = 1 / (1 + math.exp(-(yes - NOUL_CENTER) / NOUL_WIDTH))
        return {"noul": min(1.0, max(0.0, p))}

    def adapted(self, q: AskedQuestion, probabilities: Sequence[float]) -> dict[str, object]:
        return {"type": "noul", "noul": min(1.0, max(0.0, probabilities[1]))}

    def criteria_of(self, answer: Mapping[str, object]) -> Collection[object] | None:
        return None

    def confidence(self, criteria: Collection[object] | None, answer: Mapping[str, object]) -> float:
        p = number_of(answer, "noul")
        return max(p, 1.0 - p)

    def label_for(self, criteria: Collection[object] | None, expected: object) -> bool | str | int | None:
        return expected if isinstance(expected, bool) else None

    def is_correct(self, answer: dict[str, object], label: object) -> bool:
        return bool((number_of(answer, "noul") >= 0.5) == bool(label))

    def trivially_right(self, criteria: object, label: object) -> bool:
        return label is True  # always yes

    def title(self) -> str:
        return "noul (yes/no)"

    def label_classes(self, q: AskedQuestion) -> list[Label]:
        return [False, True]

    def check_label(self, q: AskedQuestion, label: object) -> Label:
        if not isinstance(label, bool):
            raise LabelsInvalid("a noul label must be true or false")
        return label

    def picked(self, q: AskedQuestion, answer: dict[str, object]) -> Label:
        return number_of(answer, "noul") >= 0.5

    def brier(self, q: AskedQuestion, answer: dict[str, object], label: Label) -> float:
        # On the yes-probability alone (1 is the worst), not over both classes (which doubles it).
        return (number_of(answer, "noul") - float(label)) ** 2

    def yes_probability(self, answer: Mapping[str, object]) -> float | None:
        return number_of(answer, "noul")
