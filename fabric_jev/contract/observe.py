"""Observe options and the projection of Main-session events (contract §8). Pure code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from ..errors import ProgramInvalid
from ..redaction.redactor import redact
from .program import validate_as
from .wire_model import WireModel

EventKind = Literal["input", "turn_end", "tool_error", "agent_end", "agent_settled"]
IncludeKind = Literal["inputText", "assistantText", "toolResults"]
MAX_ASSISTANT_BLOCKS = 32
MAX_TOOL_RESULTS = 16


class ObserveOptions(WireModel):
    """`observe` of a spawn; JSON keys are camelCase (``maxChars``, ``triggerTurn``)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    events: tuple[EventKind, ...] = Field(min_length=1)
    include: tuple[IncludeKind, ...] = ()
    max_chars: int = Field(default=4_096, ge=256, le=8_192)
    queue_size: int = Field(default=8, ge=1, le=32)
    max_event_age_ms: int = Field(default=30_000, ge=100, le=300_000)
    delivery: Literal["steer", "followUp"] | None = None
    trigger_turn: bool = False
    max_advice: int = Field(default=4, ge=1, le=16)

    @field_validator("events", "include", mode="before")
    @classmethod
    def _unique(cls, v: Any) -> Any:
        if isinstance(v, list):
            if len(set(map(str, v))) != len(v):
                raise ValueError("entries must be unique")
            return tuple(v)
        return v

    @model_validator(mode="after")
    def _trigger_needs_delivery(self) -> ObserveOptions:
        if self.trigger_turn and self.delivery is None:
            raise ValueError("triggerTurn needs a delivery mode (steer or followUp)")
        return self


def parse_observe(raw: object) -> ObserveOptions:
    if isinstance(raw, ObserveOptions):
        return raw
    return validate_as(ObserveOptions, raw, ProgramInvalid, "Invalid observe options")


@dataclass(frozen=True, slots=True)
class ToolResult:
    tool_name: str
    is_error: bool
    text: str


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """What the Main session published, before any projection."""

    kind: EventKind
    turn_index: int
    input_text: str | None = None
    automatic: bool = False
    assistant_text: tuple[str, ...] = ()
    stop_reason: str | None = None
    tool_results: tuple[ToolResult, ...] = ()
    tool_name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class _Budget:
    """One maxChars budget shared by every text field of a payload."""

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.truncated = False

    def take(self, text: str) -> str | None:
        if self.left <= 0:
            self.truncated = True
            return None
        if len(text) > self.left:
            self.truncated = True
            text = text[: self.left]
        self.left -= len(text)
        return text


def project(event: SessionEvent, options: ObserveOptions) -> tuple[dict[str, Any], bool]:
    """The payload an observer receives, redacted and within maxChars; and `truncated`.

    Operational metadata is always present; text only where `include` asks for
    it and the event carries it. Never: thinking, system prompts, headers,
    images, tool arguments or history.
    """
    include = set(options.include)
    budget = _Budget(options.max_chars)
    payload: dict[str, Any] = {"turnIndex": event.turn_index}
    if event.kind == "input":
        payload["automatic"] = event.automatic
        if "inputText" in include and event.input_text is not None:
            payload["inputText"] = _clean(event.input_text, budget)
    elif event.kind == "turn_end":
        payload["stopReason"] = event.stop_reason
        payload["toolResultCount"] = len(event.tool_results)
        if "assistantText" in include:
            blocks = [b for b in (_clean(t, budget) for t in event.assistant_text[:MAX_ASSISTANT_BLOCKS])
                      if b is not None]
            payload["assistantText"] = blocks
            if len(event.assistant_text) > MAX_ASSISTANT_BLOCKS:
                budget.truncated = True
        if "toolResults" in include:
            payload["toolResults"] = _tool_results(event.tool_results, budget)
    elif event.kind == "tool_error":
        payload["toolName"] = event.tool_name
        payload["isError"] = True
        if "toolResults" in include:
            payload["toolResults"] = _tool_results(event.tool_results, budget)
    return payload, budget.truncated


def _clean(text: str, budget: _Budget) -> str | None:
    redacted, _ = redact(text)
    return budget.take(redacted)


def _tool_results(results: tuple[ToolResult, ...], budget: _Budget) -> list[dict[str, Any]]:
    out = []
    for r in results[:MAX_TOOL_RESULTS]:
        text = _clean(r.text, budget)
        out.append({"toolName": r.tool_name, "isError": r.is_error, "text": text or ""})
    if len(results) > MAX_TOOL_RESULTS:
        budget.truncated = True
    return out
