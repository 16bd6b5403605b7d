"""What a question kind is: every rule that depends on a question's type, in one definition.

A kind (noul, choice, score, or one an application adds) says how an answer to it is checked,
how a route reads it from label probabilities, how the local heuristic answers it, and how eval
scores it. The rooms that used to decide by ``if type == "choice"`` ask the table in
``questions/__init__.py`` instead. Pure: no I/O, and nothing of ours above the base, so the
contract can ask too; what a kind needs from a room above (the contract's number checks, the
local evaluator's embedding evidence) is handed to it as an argument.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, ClassVar, Protocol, cast


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


class QuestionKind(ABC):
    """One question kind. Subclass it in a module of its own and add an instance to the table."""

    #: The type a request names (``"noul"``); the answer carries it under ``type`` too.
    name: ClassVar[str]
    #: The eval field kinds an answer of this kind can be scored against, by label.
    fits: ClassVar[tuple[str, ...]]

    # ---------------------------------------------------------------- the request

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


# An answer reaching a kind has passed the contract's answer check (or was built by a kind), so its
# fields have the types that check guarantees: these read them as such.
def number_of(answer: Mapping[str, object], key: str) -> float:
    """A numeric field of a checked answer (`noul`, `score`)."""
    return float(cast("float", answer[key]))


def table_of(answer: Mapping[str, object], key: str = "probabilities") -> Mapping[str, float]:
    """A checked answer's table of probabilities by label."""
    return cast("Mapping[str, float]", answer[key])

