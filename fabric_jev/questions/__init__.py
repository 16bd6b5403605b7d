"""The question kinds, in one room: one module per kind, and the table every other room asks.

Adding a kind is one module with a `QuestionKind` subclass (its request model included) and its
tests: the product's kinds are in `KINDS` below, and an application's is added with `register`.
docs/architecture.md (questions/) says what every room asks a kind.
"""

from __future__ import annotations

from collections.abc import Callable

from .choice import Choice
from .kind import AnswerChecks, AskedQuestion, Evidence, Label, QuestionKind
from .noul import Noul
from .score import Score

#: Every kind by its type, in the order the contract names them ("choice, score and noul"): the
#: request's union of models is in this order too. Change it through `register`/`unregister`.
KINDS: dict[str, QuestionKind] = {kind.name: kind for kind in (Choice(), Score(), Noul())}
_PRODUCT = frozenset(KINDS)

#: Called after the table changes: what rooms above built from it (the contract's request model)
#: is built again. A room adds its own with `on_change`.
_WATCHERS: list[Callable[[], None]] = []


def kind_of(name: str) -> QuestionKind:
    """The kind a question's or an answer's ``type`` names (KeyError for none)."""
    return KINDS[name]


def listed() -> list[str]:
    """The kinds' names in the order reports, profiles and their messages list them."""
    return sorted(KINDS, key=lambda name: KINDS[name].listed)


def register(kind: QuestionKind) -> QuestionKind:
    """Add a kind to the table (after the product's); every room asks it from then on."""
    if not isinstance(kind, QuestionKind):
        raise TypeError(f"a question kind is a QuestionKind instance, not {type(kind).__name__}")
    if kind.name in KINDS:
        raise ValueError(f"question kind {kind.name!r} is registered already")
    KINDS[kind.name] = kind
    _changed()
    return kind


def unregister(name: str) -> None:
    """Take a kind that `register` added out of the table again (the product's stay)."""
    if name in _PRODUCT:
        raise ValueError(f"question kind {name!r} is the product's own and stays")
    if name not in KINDS:
        raise ValueError(f"question kind {name!r} is not registered")
    del KINDS[name]
    _changed()


def on_change(callback: Callable[[], None]) -> None:
    """Call `callback` whenever a kind is registered or unregistered."""
    _WATCHERS.append(callback)


def _changed() -> None:
    for callback in _WATCHERS:
        callback()


__all__ = ["KINDS", "AnswerChecks", "AskedQuestion", "Evidence", "Label", "QuestionKind", "kind_of", "listed",
           "on_change", "register", "unregister"]
