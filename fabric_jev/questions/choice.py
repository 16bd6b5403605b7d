"""choice: one option among named ones; the answer is the option's key, with a probability for
each option."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from ..errors import LabelsInvalid
from .common import LETTERS, choice_confidence, described, listing, render, softmax
from .kind import AnswerChecks, AskedQuestion, Evidence, Label, QuestionKind, table_of
from .request import STRICT, Instructions, Text

if TYPE_CHECKING:
    from pydantic import BaseModel

MAX_OPTIONS = 255
MAX_OPTION_KEY_CHARS = 256
#: The local heuristic's, chosen by hand on the labeled set in tests/data/local_eval_set.json.
CHOICE_TEMPERATURE = 0.03


@cache
def choice_question() -> type[BaseModel]:
    """The request's model for a choice (``ChoiceQuestion``), made when the request's is: on first use."""
    from pydantic import BaseModel, Field, StringConstraints

    class ChoiceQuestion(BaseModel):
        """A choice among options: the answer is one option's key, with a probability for each."""

        model_config = STRICT
        type: Literal["choice"]
        instructions: Instructions
        criteria: Annotated[
            dict[Annotated[str, StringConstraints(min_length=1, max_length=MAX_OPTION_KEY_CHARS)], Text | None],
            Field(min_length=1, max_length=MAX_OPTIONS,
                  description=f"The options: each key (1-{MAX_OPTION_KEY_CHARS} characters) with its description, "
                              f"or null; 1-{MAX_OPTIONS} options.")]

    return ChoiceQuestion


class Choice(QuestionKind):
    name: ClassVar[str] = "choice"
    fits: ClassVar[tuple[str, ...]] = ("enum", "string")
    listed: ClassVar[int] = 1

    def request_model(self, *, wire: bool) -> type[BaseModel]:
        return choice_question()

    def refusal(self, where: str, inside: tuple[object, ...]) -> str:
        if not inside:
            return f"{where}: choice criteria must be an object of 1-{MAX_OPTIONS} options"
        if inside[1:] == ("[key]",):
            return f"{where}: option names must be 1-{MAX_OPTION_KEY_CHARS} characters"
        return f"{where}: option {inside[0]!r} needs a description or null"

    def answer(self, q: AskedQuestion, raw: dict[str, object], where: str, checks: AnswerChecks) -> dict[str, object]:
        options = list(q.criteria)
        choice = raw.get("choice")
        if not isinstance(choice, str) or choice not in q.criteria:
            shown = checks.key_names(options[:16]) + (f" and {len(options) - 16} more" if len(options) > 16 else "")
            raise checks.invalid(f"{where}: choice is not one of the options ({shown})")
        return {
            "type": "choice",
            "choice": choice,
            "probabilities": checks.distribution(raw.get("probabilities"), options, where),
            "confidence": checks.probability(raw.get("confidence"), where, "confidence"),
        }

    def classes(self, q: AskedQuestion) -> list[str]:
        return list(q.criteria)

    def expand_shorthand(self, q: AskedQuestion, answer: dict[str, object]) -> dict[str, object]:
        # {"choice": "a"}: all the probability on "a", with confidence 1.
        if "probabilities" not in answer and isinstance(q.criteria, dict):
            answer["probabilities"] = {k: 1.0 if k == answer.get("choice") else 0.0 for k in q.criteria}
            answer.setdefault("confidence", 1.0)
        return answer

    def distribution(self, q: AskedQuestion, answer: dict[str, object]) -> list[float]:
        return [float(table_of(answer)[name]) for name in q.criteria]

    def prompt(self, q: AskedQuestion, options: Sequence[str] | None) -> tuple[list[str], tuple[str, ...],
                                                                               tuple[str, ...]]:
        keys = tuple(options if options is not None else q.criteria)
        labels = LETTERS[:len(keys)]
        lines = ["Options:"]
        lines += [f"{label}. {described(key, q.criteria[key])}" for label, key in zip(labels, keys, strict=True)]
        lines.append(f"Answer with one letter: {listing(labels)}.")
        return lines, labels, keys

    def labels(self, q: AskedQuestion) -> tuple[str, ...]:
        return LETTERS[:min(len(q.criteria), len(LETTERS))]

    def rounds(self, q: AskedQuestion) -> list[str] | None:
        return list(q.criteria) if len(q.criteria) > len(LETTERS) else None

    def readout_keys(self, q: AskedQuestion, probabilities: Sequence[float]) -> list[str]:
        return list(q.criteria)

    def readout(self, keys: Sequence[str], probabilities: list[float]) -> dict[str, object]:
        best = max(range(len(probabilities)), key=lambda i: probabilities[i])
        return {"type": "choice", "choice": keys[best], "probabilities": dict(zip(keys, probabilities, strict=True)),
                "confidence": choice_confidence(probabilities)}

    def heuristic(self, q: AskedQuestion, evidence: Evidence) -> dict[str, object]:
        names = list(q.criteria)
        sims = []
        for name in names:
            desc = render(q.criteria[name])
            sims.append(evidence(f"{name}: {desc}" if desc else name))
        probs = softmax(sims, CHOICE_TEMPERATURE)
        best = max(range(len(names)), key=lambda i: probs[i])
        return {"choice": names[best], "probabilities": dict(zip(names, probs, strict=True)),
                "confidence": choice_confidence(probs)}

    def adapted(self, q: AskedQuestion, probabilities: Sequence[float]) -> dict[str, object]:
        probs = list(probabilities)
        names = list(q.criteria)
        best = max(range(len(names)), key=lambda i: probs[i])
        return {"type": "choice", "choice": names[best], "probabilities": dict(zip(names, probs, strict=True)),
                "confidence": choice_confidence(probs)}

    def criteria_of(self, answer: Mapping[str, object]) -> Collection[object] | None:
        return dict.fromkeys(table_of(answer))

    def confidence(self, criteria: Collection[object] | None, answer: Mapping[str, object]) -> float:
        return float(table_of(answer)[str(answer["choice"])])

    def label_for(self, criteria: Collection[object] | None, expected: object) -> bool | str | int | None:
        return expected if isinstance(expected, str) and expected in (criteria or ()) else None

    def is_correct(self, answer: dict[str, object], label: object) -> bool:
        return bool(answer["choice"] == label)

    def trivially_right(self, criteria: object, label: object) -> bool:
        return isinstance(criteria, dict) and bool(next(iter(criteria)) == label)  # the first option

    def check_label(self, q: AskedQuestion, label: object) -> Label:
        if not isinstance(label, str) or label not in q.criteria:
            options = ", ".join(repr(k) for k in list(q.criteria)[:8])
            raise LabelsInvalid(f"a choice label must be one of the options ({options})")
        return label

    def picked(self, q: AskedQuestion, answer: dict[str, object]) -> Label:
        return str(answer["choice"])

    def route_reading(self, q: AskedQuestion, probabilities: Sequence[float]) -> dict[str, object]:
        # All the options at once, however many rounds a route would have split them over.
        return self.readout(list(q.criteria), list(probabilities))
