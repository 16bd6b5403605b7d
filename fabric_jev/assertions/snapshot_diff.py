"""Differences between two snapshots of a page, for action-effect checks.

`SnapshotDiff.between(before, after)` compares any two snapshots. The diff
predicates (`changed`, `added`, `removed`, `modified`) need no bookkeeping:
they compare the snapshot they judge with its `baseline`, the snapshot the
source took before the last action (see `PageSource` in the browser
connector), so they work inside `check(...).once()` and `.eventually()`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from .escalation import FailureKind
from .predicates import Predicate, PredicateOutcome
from .query import Query, QueryValue, as_query, where
from .snapshot import Element, Snapshot

_STATE_FIELDS = ("name", "text", "value", "checked", "aria_checked", "disabled", "aria_disabled",
                 "expanded", "pressed", "selected", "readonly", "editable", "visible", "in_viewport",
                 "is_occluded")


def _identity(e: Element) -> tuple[Any, ...]:
    if e.testid:
        return (e.frame, "testid", e.testid)
    if e.id:
        return (e.frame, "id", e.id)
    return (e.frame, "role-name", e.role, e.name or e.text[:40])


@dataclass(frozen=True)
class Modified:
    before: Element
    after: Element
    fields: tuple[str, ...]


@dataclass(frozen=True)
class SnapshotDiff:
    added: tuple[Element, ...]
    removed: tuple[Element, ...]
    modified: tuple[Modified, ...]

    @classmethod
    def between(cls, before: Snapshot, after: Snapshot) -> SnapshotDiff:
        """Pair elements by identity (testid, id, role and name), in document order."""
        def keyed(s: Snapshot) -> dict[tuple[Any, ...], Element]:
            seen: Counter[tuple[Any, ...]] = Counter()
            out = {}
            for e in s.elements:
                ident = _identity(e)
                out[(*ident, seen[ident])] = e
                seen[ident] += 1
            return out

        old, new = keyed(before), keyed(after)
        added = tuple(new[k] for k in new if k not in old)
        removed = tuple(old[k] for k in old if k not in new)
        modified = []
        for k in new:
            if k in old:
                changed = tuple(f for f in _STATE_FIELDS if getattr(old[k], f) != getattr(new[k], f))
                if changed:
                    modified.append(Modified(old[k], new[k], changed))
        return cls(added, removed, tuple(modified))

    def count_added(self, **query: QueryValue) -> int:
        q = where(**query)
        return sum(1 for e in self.added if q.matches(e))

    def count_removed(self, **query: QueryValue) -> int:
        q = where(**query)
        return sum(1 for e in self.removed if q.matches(e))

    def count_modified(self, field: str | None = None, **query: QueryValue) -> int:
        q = where(**query)
        return sum(1 for m in self.modified if q.matches(m.after) and (field is None or field in m.fields))

    def counts(self) -> dict[str, int]:
        return {"added": len(self.added), "removed": len(self.removed), "modified": len(self.modified)}


NO_BASELINE_TEXT = "no snapshot from before the last action (the source keeps one; see docs/assertions.md)"


@dataclass(frozen=True)
class DiffPredicate(Predicate):
    """A condition on what changed between the snapshot's baseline and the snapshot."""

    what: str  # changed | added | removed | modified
    query: Query | None = None
    n: int = 1
    field: str | None = None

    @property
    def description(self) -> str:
        args = [str(self.query)] if self.query is not None else []
        if self.what in ("added", "removed") and self.n != 1:
            args.append(f"n={self.n}")
        if self.field is not None:
            args.append(f"field={self.field}")
        return f"{self.what}({', '.join(args)})"

    def queries(self) -> list[Query]:
        return [] if self.query is None else [self.query]

    def _keep(self, e: Element) -> bool:
        return self.query is None or self.query.matches(e)

    def assess(self, snapshot: Snapshot) -> PredicateOutcome:
        expected = self._expected()
        if snapshot.baseline is None:
            return PredicateOutcome(False, FailureKind.NO_BASELINE, expected, NO_BASELINE_TEXT, (), self.query)
        diff = SnapshotDiff.between(snapshot.baseline, snapshot)
        added = [e for e in diff.added if self._keep(e)]
        removed = [e for e in diff.removed if self._keep(e)]
        modified = [m for m in diff.modified if self._keep(m.after)
                    and (self.field is None or self.field in m.fields)]
        if self.what == "added":
            hits: list[Element] = added
        elif self.what == "removed":
            hits = removed
        elif self.what == "modified":
            hits = [m.after for m in modified]
        else:
            hits = added + removed + [m.after for m in modified]
        need = self.n if self.what in ("added", "removed") else 1
        actual = (f"{len(added)} added, {len(removed)} removed, {len(modified)} modified"
                  + (f" matching {self.query}" if self.query is not None else "")
                  + (": " + ", ".join(_change(m) for m in modified[:3]) if modified else ""))
        ok = len(hits) >= need
        return PredicateOutcome(ok, None if ok else FailureKind.STATE_MISMATCH, expected, actual,
                                tuple(hits), self.query)

    def _expected(self) -> str:
        scope = f" matching {self.query}" if self.query is not None else ""
        if self.what == "changed":
            return f"a change since the last action{scope}"
        if self.what == "modified":
            return f"an element{scope} modified since the last action" + (
                f" in {self.field}" if self.field is not None else "")
        return f"at least {self.n} element(s){scope} {self.what} since the last action"


def describe_changes(before: Snapshot, after: Snapshot, limit: int = 3) -> str:
    """One line: what changed from `before` to `after`, naming up to `limit` elements of each kind."""
    diff = SnapshotDiff.between(before, after)
    if not (diff.added or diff.removed or diff.modified):
        return "nothing changed"

    def some(label: str, items: list[str]) -> str:
        more = f", … {len(items) - limit} more" if len(items) > limit else ""
        return f"{len(items)} {label}" + (f" ({', '.join(items[:limit])}{more})" if items else "")

    return ", ".join((some("added", [e.label() for e in diff.added]),
                      some("removed", [e.label() for e in diff.removed]),
                      some("modified", [_change(m) for m in diff.modified])))


def _change(m: Modified) -> str:
    return f"{m.after.label()} ({', '.join(m.fields)})"


def changed(query: Query | str | None = None) -> Predicate:
    """Anything (or anything matching `query`) was added, removed or modified."""
    return DiffPredicate("changed", None if query is None else as_query(query))


def added(query: Query | str, n: int = 1) -> Predicate:
    """At least `n` elements matching `query` appeared."""
    return DiffPredicate("added", as_query(query), n)


def removed(query: Query | str, n: int = 1) -> Predicate:
    """At least `n` elements matching `query` disappeared."""
    return DiffPredicate("removed", as_query(query), n)


def modified(query: Query | str, field: str | None = None) -> Predicate:
    """An element matching `query` changed state (in `field`, when given: checked, value, ...)."""
    if field is not None and field not in _STATE_FIELDS:
        raise ValueError(f"unknown state field {field!r}; fields: {', '.join(_STATE_FIELDS)}")
    return DiffPredicate("modified", as_query(query), 1, field)
