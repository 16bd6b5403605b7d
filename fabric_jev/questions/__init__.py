"""The question kinds, in one room: one module per kind, and the table every other room asks.

Adding a kind is one module with a `QuestionKind` subclass, one line in `KINDS` below, and its
tests; docs/architecture.md says what else a fourth kind needs (its request model).
"""

from __future__ import annotations

from .choice import Choice
from .kind import AnswerChecks, AskedQuestion, Evidence, QuestionKind
from .noul import Noul
from .score import Score

#: Every kind by its type, in the order the contract names them ("choice, score and noul").
KINDS: dict[str, QuestionKind] = {kind.name: kind for kind in (Choice(), Score(), Noul())}


def kind_of(name: str) -> QuestionKind:
    """The kind a question's or an answer's ``type`` names (KeyError for none)."""
    return KINDS[name]


__all__ = ["KINDS", "AnswerChecks", "AskedQuestion", "Evidence", "QuestionKind", "kind_of"]
