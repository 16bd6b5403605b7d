"""The snapshot model the assertion core works on (what the browser connector returns)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Tri = bool | str | None  # True / False / "mixed" / unknown


class BBox(BaseModel):
    model_config = ConfigDict(frozen=True)

    x: float = 0
    y: float = 0
    width: float = 0
    height: float = 0


class Element(BaseModel):
    """One interactive or landmark element, with its DOM and ARIA state."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    index: int = 0
    role: str = ""
    name: str = ""
    text: str = ""
    value: str | None = None
    value_redacted: bool = False
    value_clipped: bool = False
    input_type: str | None = None
    checked: Tri = None
    aria_checked: Tri = None
    disabled: bool = False
    aria_disabled: bool = False
    expanded: bool | None = None
    pressed: Tri = None
    selected: bool | None = None
    level: int | None = None
    placeholder: str | None = None
    testid: str | None = None
    id: str | None = None
    tag: str = ""
    in_shadow: bool = False
    readonly: bool = False
    editable: bool = False
    frame: str = ""  # "" for the top document; else the path of frame owners, "checkout/card"
    frame_url: str = ""
    bbox: BBox = BBox()
    viewport_bbox: BBox = BBox()
    visible: bool = True
    in_viewport: bool = True
    is_occluded: bool = False
    occluded_by: str | None = None

    # DOM state and ARIA state mean the same thing to a check.
    @property
    def is_disabled(self) -> bool:
        return self.disabled or self.aria_disabled

    @property
    def checked_state(self) -> Tri:
        return self.checked if self.checked is not None else self.aria_checked

    def label(self) -> str:
        shown = self.name or self.text or self.placeholder or self.testid or ""
        where = f' in frame "{self.frame}"' if self.frame else ""
        return f'{self.role or self.tag} "{shown[:60]}"{where}'


class Snapshot(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    url: str = ""
    title: str = ""
    ready_state: str = "complete"
    node_count: int = 0
    quiet_ms: int = 0
    observed_ms: int = 0
    viewport: dict[str, float] = Field(default_factory=lambda: {"width": 1280.0, "height": 800.0})
    scroll: dict[str, float] = Field(default_factory=dict)
    element_count: int = 0
    truncated: bool = False
    elements: tuple[Element, ...] = ()
    #: One entry per frame read (the top document first): path, url, ready_state,
    #: quiet_ms, element_count, and `error` for a frame that could not be read.
    frames: tuple[dict[str, Any], ...] = ()
    #: The snapshot taken before the last action, kept by the source for diff
    #: predicates (never written to artifacts).
    baseline: Snapshot | None = Field(default=None, exclude=True, repr=False)

    @classmethod
    def parse(cls, raw: Mapping[str, object]) -> Snapshot:
        return cls.model_validate(raw)

    def with_baseline(self, before: Snapshot | None) -> Snapshot:
        """This snapshot, diffed against `before` by diff predicates (before's own baseline dropped)."""
        kept = None if before is None else before.model_copy(update={"baseline": None})
        return self.model_copy(update={"baseline": kept})

    def redacted_json(self) -> dict[str, object]:
        """The snapshot for artifacts: values of password fields are never written."""
        from ..redaction.redactor import redact

        data = self.model_dump(mode="json")
        for e in data["elements"]:
            if e.get("input_type") == "password" or e.get("value_redacted"):
                e["value"] = "••••••••" if e.get("value") else e.get("value")
        redacted, _ = redact(data)
        return dict(redacted)


@dataclass(frozen=True)
class Confidence:
    """How far a snapshot can be trusted to show a settled page: 0–1, with reasons."""

    value: float
    reasons: tuple[str, ...]
    #: The DOM changed within the last QUIET_SETTLED_MS: the page is still changing. Only
    #: such snapshots count towards `snapshot_exhausted`; a quiet one that is not trusted
    #: (a loading shell: no controls yet) is waited for.
    changing: bool = False


QUIET_SETTLED_MS = 300


def confidence(snapshot: Snapshot) -> Confidence:
    """Cheap, explainable: ready state, time since the last mutation, page size."""
    value = 1.0
    reasons: list[str] = []
    changing = False
    if snapshot.ready_state == "loading":
        value *= 0.3
        reasons.append("document is still loading")
    elif snapshot.ready_state == "interactive":
        value *= 0.7
        reasons.append("document is interactive but not complete")
    if snapshot.observed_ms >= QUIET_SETTLED_MS or snapshot.quiet_ms < snapshot.observed_ms:
        if snapshot.quiet_ms < 100:
            value *= 0.5
            reasons.append(f"DOM changed {snapshot.quiet_ms} ms ago")
            changing = True
        elif snapshot.quiet_ms < QUIET_SETTLED_MS:
            value *= 0.8
            reasons.append(f"DOM changed {snapshot.quiet_ms} ms ago (settling)")
            changing = True
    if snapshot.node_count < 5 and not snapshot.elements:
        value *= 0.3
        reasons.append(f"page is nearly empty ({snapshot.node_count} nodes)")
    elif not snapshot.elements:
        value *= 0.6
        reasons.append("no interactive elements")
    for frame in snapshot.frames[1:]:
        where = frame.get("path") or frame.get("url") or "a frame"
        if frame.get("error"):
            value *= 0.5
            reasons.append(f"frame {where} could not be read ({frame['error']})")
        elif frame.get("navigating"):
            value *= 0.5
            reasons.append(f"frame {where} is navigating")
        elif frame.get("ready_state") == "loading":
            value *= 0.7
            reasons.append(f"frame {where} is still loading")
    if not reasons:
        reasons.append("document complete and DOM quiet")
    return Confidence(round(value, 4), tuple(reasons), changing)
