"""Nearest matches for a failed query: text similarity plus position."""

from __future__ import annotations

from difflib import SequenceMatcher
from typing import Annotated, Any

from pydantic import ConfigDict, Field, PlainSerializer, model_validator

from ..contract.wire_model import WireModel
from .query import Query
from .snapshot import Element, Snapshot

TEXT_FIELDS = ("text", "name", "value", "testid")


class Near(WireModel):
    """An element near what a failed query asked for: how near (0-1) and why. Its JSON names the
    element by its index, role, name and the first 80 characters of its text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    element: Element = Field(exclude=True)
    index: int = 0
    role: str = ""
    name: str = ""
    text: str = ""
    score: Annotated[float, PlainSerializer(lambda score: round(score, 3))]
    why: str

    @model_validator(mode="before")
    @classmethod
    def _named_by_its_element(cls, data: Any) -> Any:
        element = data.get("element") if isinstance(data, dict) else None
        if isinstance(element, Element):
            data = {**data, "index": element.index, "role": element.role, "name": element.name,
                    "text": element.text[:80]}
        return data


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
        ranked.append(Near(element=e, score=score, why=why))
    ranked.sort(key=lambda r: (-r.score, r.element.index))
    return ranked[:n]
