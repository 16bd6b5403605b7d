"""Predicates over one snapshot, each giving a pass/fail with a reason code.

Reason codes: `no_match` (nothing matches the query), `match_offscreen`
(matches exist but none is in the viewport), `match_occluded` (in view but
covered), `state_mismatch` (found, but in the wrong state). DOM and ARIA
state are normalised: a `disabled` attribute and `aria-disabled="true"` mean
the same; so do a native checkbox's state and `aria-checked`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .escalation import FailureKind
from .query import Query, as_query
from .snapshot import Element, Snapshot


@dataclass(frozen=True)
class PredicateOutcome:
    passed: bool
    reason: FailureKind | None  # None when passed
    expected: str
    actual: str
    matches: tuple[Element, ...] = ()
    query: Query | None = None


class Predicate:
    """Base class. `assess(snapshot)` must be pure."""

    @property
    def description(self) -> str:
        return "predicate"

    def assess(self, snapshot: Snapshot) -> PredicateOutcome:
        raise NotImplementedError

    def queries(self) -> list[Query]:
        return []

    def __str__(self) -> str:
        return self.description


def _usable(matches: list[Element]) -> tuple[list[Element], FailureKind | None]:
    """Visible, in-viewport, unoccluded matches; or why there are none."""
    if not matches:
        return [], FailureKind.NO_MATCH
    visible = [e for e in matches if e.visible]
    if not visible:
        return [], FailureKind.NO_MATCH
    in_view = [e for e in visible if e.in_viewport]
    if not in_view:
        return [], FailureKind.MATCH_OFFSCREEN
    clear = [e for e in in_view if not e.is_occluded]
    if not clear:
        return [], FailureKind.MATCH_OCCLUDED
    return clear, None


def _describe(elements: list[Element] | tuple[Element, ...]) -> str:
    if not elements:
        return "no matching element"
    parts = []
    for e in elements[:3]:
        flags = []
        if not e.visible:
            flags.append("hidden")
        elif not e.in_viewport:
            flags.append("off-screen")
        elif e.is_occluded:
            flags.append(f"covered by {e.occluded_by}")
        parts.append(e.label() + (f" ({', '.join(flags)})" if flags else ""))
    more = f" and {len(elements) - 3} more" if len(elements) > 3 else ""
    return ", ".join(parts) + more


@dataclass(frozen=True)
class Exists(Predicate):
    query: Query

    @property
    def description(self) -> str:
        return f"exists({self.query})"

    def queries(self) -> list[Query]:
        return [self.query]

    def assess(self, snapshot: Snapshot) -> PredicateOutcome:
        matches = self.query.select(snapshot.elements)
        usable, reason = _usable(matches)
        expected = f"a visible, unobstructed element matching {self.query}"
        if usable:
            return PredicateOutcome(True, None, expected, _describe(usable), tuple(usable), self.query)
        return PredicateOutcome(False, reason, expected, _describe(matches), tuple(matches), self.query)


@dataclass(frozen=True)
class NotExists(Predicate):
    query: Query

    @property
    def description(self) -> str:
        return f"not_exists({self.query})"

    def queries(self) -> list[Query]:
        return [self.query]

    def assess(self, snapshot: Snapshot) -> PredicateOutcome:
        shown = [e for e in self.query.select(snapshot.elements) if e.visible]
        expected = f"no visible element matching {self.query}"
        if not shown:
            return PredicateOutcome(True, None, expected, "none", (), self.query)
        return PredicateOutcome(False, FailureKind.STATE_MISMATCH, expected, _describe(shown), tuple(shown), self.query)


@dataclass(frozen=True)
class ElementCount(Predicate):
    query: Query
    min: int = 0
    max: int | None = None

    @property
    def description(self) -> str:
        return f"element_count({self.query}, min={self.min}, max={self.max})"

    def queries(self) -> list[Query]:
        return [self.query]

    def assess(self, snapshot: Snapshot) -> PredicateOutcome:
        matches = [e for e in self.query.select(snapshot.elements) if e.visible]
        n = len(matches)
        bound = f"between {self.min} and {self.max}" if self.max is not None else f"at least {self.min}"
        expected = f"{bound} visible elements matching {self.query}"
        ok = n >= self.min and (self.max is None or n <= self.max)
        reason = None if ok else (FailureKind.NO_MATCH if n == 0 else FailureKind.STATE_MISMATCH)
        return PredicateOutcome(ok, reason, expected, f"{n} ({_describe(matches)})", tuple(matches), self.query)


@dataclass(frozen=True)
class StateOf(Predicate):
    """The element the query finds must be usable and satisfy `check`."""

    query: Query
    name: str
    want: str
    check: Callable[[Element], bool] = field(compare=False)
    #: Shown instead of `want` when the element's value is redacted (passwords):
    #: an expected secret is never echoed either.
    masked_want: str | None = None

    @property
    def description(self) -> str:
        return f"{self.name}({self.query})"

    def queries(self) -> list[Query]:
        return [self.query]

    def assess(self, snapshot: Snapshot) -> PredicateOutcome:
        matches = self.query.select(snapshot.elements)
        usable, reason = _usable(matches)
        expected = f"{self.query} to be {self.want}"
        if not usable:
            return PredicateOutcome(False, reason, expected, _describe(matches), tuple(matches), self.query)
        if self.masked_want is not None and any(e.value_redacted for e in usable):
            expected = f"{self.query} to be {self.masked_want}"
        good = [e for e in usable if self.check(e)]
        if good:
            return PredicateOutcome(True, None, expected, _describe(good), tuple(good), self.query)
        return PredicateOutcome(False, FailureKind.STATE_MISMATCH, expected, "; ".join(_state(e) for e in usable[:3]),
                                tuple(usable), self.query)


def _state(e: Element) -> str:
    bits = [e.label(), f"disabled={str(e.is_disabled).lower()}"]
    if e.checked_state is not None:
        bits.append(f"checked={_tri(e.checked_state)}")
    if e.expanded is not None:
        bits.append(f"expanded={str(e.expanded).lower()}")
    if e.pressed is not None:
        bits.append(f"pressed={_tri(e.pressed)}")
    if e.selected is not None:
        bits.append(f"selected={str(e.selected).lower()}")
    if e.value is not None:
        bits.append(f"value={'[redacted]' if e.value_redacted else repr(e.value)}")
    return " ".join(bits)


def _tri(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


@dataclass(frozen=True)
class UrlCheck(Predicate):
    pattern: str
    mode: Literal["matches", "contains"]

    @property
    def description(self) -> str:
        return f"url_{self.mode}({self.pattern!r})"

    def assess(self, snapshot: Snapshot) -> PredicateOutcome:
        ok = (re.search(self.pattern, snapshot.url) is not None if self.mode == "matches"
              else self.pattern in snapshot.url)
        return PredicateOutcome(ok, None if ok else FailureKind.STATE_MISMATCH,
                                f"URL that {self.mode} {self.pattern!r}", snapshot.url)


@dataclass(frozen=True)
class AllOf(Predicate):
    parts: tuple[Predicate, ...]

    @property
    def description(self) -> str:
        return "all_of(" + ", ".join(map(str, self.parts)) + ")"

    def queries(self) -> list[Query]:
        return [q for p in self.parts for q in p.queries()]

    def assess(self, snapshot: Snapshot) -> PredicateOutcome:
        for p in self.parts:
            out = p.assess(snapshot)
            if not out.passed:
                return PredicateOutcome(False, out.reason, f"all of: {out.expected}", out.actual, out.matches,
                                        out.query)
        return PredicateOutcome(True, None, str(self), "all held")


@dataclass(frozen=True)
class AnyOf(Predicate):
    parts: tuple[Predicate, ...]

    @property
    def description(self) -> str:
        return "any_of(" + ", ".join(map(str, self.parts)) + ")"

    def queries(self) -> list[Query]:
        return [q for p in self.parts for q in p.queries()]

    def assess(self, snapshot: Snapshot) -> PredicateOutcome:
        outs = [p.assess(snapshot) for p in self.parts]
        for out in outs:
            if out.passed:
                return out
        first = outs[0]
        return PredicateOutcome(False, first.reason, "any of: " + "; ".join(o.expected for o in outs),
                                "; ".join(o.actual for o in outs), first.matches, first.query)


@dataclass(frozen=True)
class Not(Predicate):
    part: Predicate

    @property
    def description(self) -> str:
        return f"not_({self.part})"

    def queries(self) -> list[Query]:
        return self.part.queries()

    def assess(self, snapshot: Snapshot) -> PredicateOutcome:
        out = self.part.assess(snapshot)
        return PredicateOutcome(not out.passed, FailureKind.STATE_MISMATCH if out.passed else None,
                                f"not: {out.expected}", out.actual, out.matches, out.query)


# ---------------------------------------------------------------- constructors

def exists(query: Query | str) -> Predicate:
    return Exists(as_query(query))


def not_exists(query: Query | str) -> Predicate:
    return NotExists(as_query(query))


def element_count(query: Query | str, min: int = 0, max: int | None = None) -> Predicate:
    return ElementCount(as_query(query), min, max)


def _state_predicate(query: Query | str, name: str, want: str,
                     check: Callable[[Element], bool], masked_want: str | None = None) -> Predicate:
    return StateOf(as_query(query), name, want, check, masked_want)


def is_enabled(query: Query | str) -> Predicate:
    return _state_predicate(query, "is_enabled", "enabled", lambda e: not e.is_disabled)


def is_disabled(query: Query | str) -> Predicate:
    return _state_predicate(query, "is_disabled", "disabled", lambda e: e.is_disabled)


def is_checked(query: Query | str) -> Predicate:
    return _state_predicate(query, "is_checked", "checked", lambda e: e.checked_state is True)


def is_unchecked(query: Query | str) -> Predicate:
    return _state_predicate(query, "is_unchecked", "unchecked", lambda e: e.checked_state is False)


def is_mixed(query: Query | str) -> Predicate:
    return _state_predicate(query, "is_mixed", "mixed", lambda e: e.checked_state == "mixed")


def value_equals(query: Query | str, value: str) -> Predicate:
    return _state_predicate(query, "value_equals", f"value {value!r}",
                            lambda e: not e.value_redacted and (e.value or "") == value,
                            "value [redacted] (password values are never compared)")


def value_contains(query: Query | str, part: str) -> Predicate:
    return _state_predicate(query, "value_contains", f"value containing {part!r}",
                            lambda e: not e.value_redacted and part in (e.value or ""),
                            "value containing [redacted] (password values are never compared)")


def is_expanded(query: Query | str) -> Predicate:
    return _state_predicate(query, "is_expanded", "expanded", lambda e: e.expanded is True)


def is_collapsed(query: Query | str) -> Predicate:
    return _state_predicate(query, "is_collapsed", "collapsed", lambda e: e.expanded is False)


def is_pressed(query: Query | str) -> Predicate:
    return _state_predicate(query, "is_pressed", "pressed", lambda e: e.pressed is True)


def is_selected(query: Query | str) -> Predicate:
    return _state_predicate(query, "is_selected", "selected", lambda e: e.selected is True)


def url_matches(pattern: str) -> Predicate:
    return UrlCheck(pattern, "matches")


def url_contains(part: str) -> Predicate:
    return UrlCheck(part, "contains")


def all_of(*parts: Predicate) -> Predicate:
    return AllOf(tuple(parts))


def any_of(*parts: Predicate) -> Predicate:
    return AnyOf(tuple(parts))


def not_(part: Predicate) -> Predicate:
    return Not(part)
