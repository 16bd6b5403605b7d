"""Nearest matches for a failed query: text similarity plus position."""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher

from .query import Query
from .snapshot import Element, Snapshot

TEXT_FIELDS = ("text", "name", "value", "testid")


@dataclass(frozen=True)
class Near:
    element: Element
    score: float
    why: str

    def to_json(self) -> dict[str, object]:
        e = self.element
        return {"index": e.index, "role": e.role, "name": e.name, "text": e.text[:80],
                "score": round(self.score, 3), "why": self.why}


def _similarity(a: str, b: str) -> float:
    a, b = " ".join(a.lower().split()), " ".join(b.lower().split())
    if not a or not b:
        return 0.0
    if b in a:
        return 0.9 + 0.1 * len(b) / len(a)
    return SequenceMatcher(None, a, b).ratio()


def nearest(snapshot: Snapshot, query: Query, n: int = 3) -> list[Near]:
    """Rank elements by how close they come to the query (text 0.7, role 0.2, position 0.1)."""
    wanted_text = [c.value for c in query.conditions if c.field in TEXT_FIELDS and isinstance(c.value, str)]
    wanted_role = next((c.value for c in query.conditions if c.field == "role" and c.op == "="), None)
    height = float(snapshot.viewport.get("height", 800)) or 800.0
    ranked: list[Near] = []
    for e in snapshot.elements:
        if not e.visible:
            continue
        text_score = max((max(_similarity(getattr(e, f) or "", w) for f in ("name", "text", "value"))
                          for w in wanted_text), default=0.0)
        role_score = 1.0 if wanted_role is not None and e.role == wanted_role else 0.0
        # Position: in view is best; the further below the fold, the lower.
        if e.in_viewport and not e.is_occluded:
            place = 1.0
        else:
            place = max(0.0, 1.0 - abs(e.viewport_bbox.y) / (4 * height))
        score = 0.7 * text_score + 0.2 * role_score + 0.1 * place
        role_word = "not asked" if wanted_role is None else ("same" if role_score else "different")
        why = f"text {text_score:.2f}, role {role_word}, " + (
            "in view" if place == 1.0 else "out of view" if not e.is_occluded else "covered")
        ranked.append(Near(e, score, why))
    ranked.sort(key=lambda r: (-r.score, r.element.index))
    return ranked[:n]
