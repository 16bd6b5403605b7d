"""What a question kind is: every rule that depends on a question's type, in one definition.

A kind (noul, choice, score, or one an application adds) says what a request for it looks like,
how an answer to it is checked, how a fixture's shorthand for it expands, how a route reads it
from label probabilities, how the local heuristic answers it, how eval scores it and how
calibration measures it. The rooms that used to decide by ``if type == "choice"`` ask the table
in ``questions/__init__.py`` instead. Pure: no I/O, and nothing of ours above the base, so the
contract can ask too; what a kind needs from a room above (the contract's number checks, the
local evaluator's embedding evidence) is handed to it as an argument.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from ..errors import LabelsInvalid

if TYPE_CHECKING:
    from pydantic import BaseModel


class AskedQuestion(Protocol):
    """A validated question as the contract holds it (contract.evaluation.Question)."""

    @property
    def id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def instructions(self) -> Any: ...
    @property
    def criteria(self) -> Any: ...


class AnswerChecks(Protocol):
    """The contract's rules for the numbers inside an answer, with its error messages."""

    def probability(self, v: object, where: str, what: str) -> float: ...
    def distribution(self, raw: object, keys: list[str], where: str) -> dict[str, float]: ...
    def finite(self, v: object) -> bool: ...
    def key_names(self, keys: object) -> str: ...
    def invalid(self, message: str) -> Exception: ...


#: How strongly the state supports a hypothesis (a text): the local evaluator's embedding evidence.
Evidence = Callable[[str], float]
#: A labeled example's right answer, as calibration holds it (a noul's bool, an option, a level).
Label = bool | str | int


class QuestionKind(ABC):
    """One question kind. Subclass it in a module of its own and add an instance to the table."""

    #: The type a request names (``"noul"``); the answer carries it under ``type`` too.
    name: ClassVar[str]
    #: The eval field kinds an answer of this kind can be scored against, by label.
    fits: ClassVar[tuple[str, ...]]
    #: The request's model for a question of this kind: a strict pydantic model with the fields
    #: ``type`` (``Literal[name]``), ``instructions`` and ``criteria`` (questions/request.py). Set
    #: it, or override `request_model` to make it on first use (as the product's kinds do).
    request: ClassVar[type[BaseModel]]
    #: Where reports, profiles and their messages list this kind (noul, choice, score, then others).
    listed: ClassVar[int] = 100

    # ---------------------------------------------------------------- the request

    def request_model(self, *, wire: bool) -> type[BaseModel]:
        """The model a question of this kind is read with; with `wire`, as a Jev-compatible server
        reads one (the same unless the wire spec relaxes it)."""
        return self.request

    @abstractmethod
    def refusal(self, where: str, inside: tuple[object, ...]) -> str:
        """The contract's words for a request whose criteria break this kind's shape; `inside` is
        the place in the criteria the first error points at (empty: the criteria as a whole)."""

    # ---------------------------------------------------------------- the answer

    @abstractmethod
    def answer(self, q: AskedQuestion, raw: dict[str, object], where: str, checks: AnswerChecks) -> dict[str, object]:
        """An upstream's answer rebuilt from validated fields only (the contract's answer shape)."""

    @abstractmethod
    def classes(self, q: AskedQuestion) -> list[str]:
        """The answer's classes in order (no/yes, the options, the levels): a profile's axis."""

    @abstractmethod
    def distribution(self, q: AskedQuestion, answer: dict[str, object]) -> list[float]:
        """An answer's probabilities over `classes`, in order."""

    def expand_shorthand(self, q: AskedQuestion, answer: dict[str, object]) -> dict[str, object]:
        """A fixture's answer (its type filled in) with this kind's shorthand expanded, before the
        contract checks it (evaluators/fixture.py); by default there is none."""
        return answer

    # ---------------------------------------------------------------- the prompt and readout of a route

    @abstractmethod
    def prompt(self, q: AskedQuestion, options: Sequence[str] | None) -> tuple[list[str], tuple[str, ...],
                                                                               tuple[str, ...]]:
        """The prompt's lines after the question, its labels and what each stands for; `options`
        (default: all) are the ones one round shows, where a kind has more than a round holds."""

    @abstractmethod
    def labels(self, q: AskedQuestion) -> tuple[str, ...]:
        """Every label a route may offer for this question (the one answer tool of Anthropic's)."""

    def rounds(self, q: AskedQuestion) -> list[str] | None:
        """The options to split over rounds of at most 26 labels, or None when one round holds all."""
        return None

    @abstractmethod
    def readout_keys(self, q: AskedQuestion, probabilities: Sequence[float]) -> list[str]:
        """What each label of a route's reading stands for, in the answer's words."""

    @abstractmethod
    def readout(self, keys: Sequence[str], probabilities: list[float]) -> dict[str, object]:
        """The wire answer from the probabilities a route read for its labels."""

    # ---------------------------------------------------------------- the local evaluator

    @abstractmethod
    def heuristic(self, q: AskedQuestion, evidence: Evidence) -> dict[str, object]:
        """The local heuristic's answer (without its type) from embedding evidence."""

    @abstractmethod
    def adapted(self, q: AskedQuestion, probabilities: Sequence[float]) -> dict[str, object]:
        """The typed answer for a profile's adapted distribution over `classes`."""

    # ---------------------------------------------------------------- eval

    @abstractmethod
    def criteria_of(self, answer: Mapping[str, object]) -> Collection[object] | None:
        """The criteria an answer implies, as far as eval's metrics need them (its classes)."""

    @abstractmethod
    def confidence(self, criteria: Collection[object] | None, answer: Mapping[str, object]) -> float:
        """The probability an answer gives the class it picks."""

    @abstractmethod
    def label_for(self, criteria: Collection[object] | None, expected: object) -> bool | str | int | None:
        """The class an expected field value names, or None if it names none."""

    @abstractmethod
    def is_correct(self, answer: dict[str, object], label: object) -> bool:
        """Whether an answer picks a labeled example's class."""

    def trivially_right(self, criteria: object, label: object) -> bool:
        """Whether a trivial answerer picks `label` (a labeled set's floor, evaluators/accuracy.py)."""
        return False

    # ---------------------------------------------------------------- calibration and learn

    def title(self) -> str:
        """This kind's panel in a calibration chart."""
        return self.name

    def label_classes(self, q: AskedQuestion) -> list[Label]:
        """The labels a question can have, in the order of `classes` (by default, the same)."""
        return list(self.classes(q))

    def check_label(self, q: AskedQuestion, label: object) -> Label:
        """`label` if a labels file may give it for `q`, else LabelsInvalid (callers add the place)."""
        classes = self.label_classes(q)
        if not isinstance(label, bool | str | int) or label not in classes:
            raise LabelsInvalid(f"{self.name} labels must be one of {classes[:8]}")
        return label

    def picked(self, q: AskedQuestion, answer: dict[str, object]) -> Label:
        """The label an answer picks (by default, its most probable class)."""
        probs = self.distribution(q, answer)
        return self.label_classes(q)[max(range(len(probs)), key=lambda i: probs[i])]

    def brier(self, q: AskedQuestion, answer: dict[str, object], label: Label) -> float:
        """An answer's Brier score against `label`: the sum over classes of (p − [it is the label])²."""
        return sum((p - (1.0 if c == label else 0.0)) ** 2
                   for c, p in zip(self.label_classes(q), self.distribution(q, answer), strict=True))

    def yes_probability(self, answer: Mapping[str, object]) -> float | None:
        """For a yes-or-no kind, the answer's probability of yes: calibration then suggests where to
        act both ways (allow at p ≥ t, deny at p ≤ t) rather than one confidence to accept at."""
        return None

    def route_reading(self, q: AskedQuestion, probabilities: Sequence[float]) -> dict[str, object]:
        """The answer a route gives when it reads `probabilities` over `classes` (learn replays a
        temperature with it): by default each prompt key is the class of the same name."""
        _, _, keys = self.prompt(q, None)
        by_class = dict(zip(self.classes(q), probabilities, strict=True))
        return self.readout(keys, [by_class[k] for k in keys])


# An answer reaching a kind has passed the contract's answer check (or was built by a kind), so its
# fields have the types that check guarantees: these read them as such.
def number_of(answer: Mapping[str, object], key: str) -> float:
    """A numeric field of a checked answer (`noul`, `score`)."""
    return float(cast("float", answer[key]))


def table_of(answer: Mapping[str, object], key: str = "probabilities") -> Mapping[str, float]:
    """A checked answer's table of probabilities by label."""
    return cast("Mapping[str, float]", answer[key])

