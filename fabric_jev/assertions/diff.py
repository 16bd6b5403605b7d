"""Differences between two snapshots of a page, for action-effect checks."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from .query import where
from .snapshot import Element, Snapshot

_STATE_FIELDS = ("name", "text", "value", "checked", "aria_checked", "disabled", "aria_disabled",
                 "expanded", "pressed", "selected", "visible", "in_viewport", "is_occluded")


def _identity(e: Element) -> tuple[Any, ...]:
    if e.testid:
        return ("testid", e.testid)
    if e.id:
        return ("id", e.id)
    return ("role-name", e.role, e.name or e.text[:40])


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

    def count_added(self, **query: Any) -> int:
        q = where(**query)
        return sum(1 for e in self.added if q.matches(e))

    def count_removed(self, **query: Any) -> int:
        q = where(**query)
        return sum(1 for e in self.removed if q.matches(e))

    def count_modified(self, field: str | None = None, **query: Any) -> int:
        q = where(**query)
        return sum(1 for m in self.modified if q.matches(m.after) and (field is None or field in m.fields))

    def counts(self) -> dict[str, int]:
        return {"added": len(self.added), "removed": len(self.removed), "modified": len(self.modified)}
