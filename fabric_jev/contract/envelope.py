"""Run states and the envelope every run call returns (contract §2).

Attributes are snake_case and timestamps `datetime`s (UTC); `to_json()` and
every `model_dump` write the contract's camelCase keys and timestamp format
(`wire_model`).
"""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .wire_model import UtcTime, WireModel


class RunState(enum.StrEnum):
    """Lifecycle of a run. QUEUED and RUNNING are not terminal."""

    #: Launched while the host ran `max_concurrent_runs` programs: waiting, first in first out,
    #: for a slot. No worker is taken and no code has run; `stop` ends it `cancelled` at once.
    QUEUED = "queued"
    #: Launched and not yet finished; the guest may be executing or awaiting.
    RUNNING = "running"
    #: The code returned and its output matched outputSchema (not "goal achieved").
    COMPLETED = "completed"
    #: A budget failure, a guest error, or output that broke its schema or cap.
    FAILED = "failed"
    #: Stopped by `stop`, by the caller of a foreground run, or by host close.
    CANCELLED = "cancelled"
    #: The run's deadline passed, or a CPU slice overran and the worker was killed.
    TIMED_OUT = "timed_out"

    @property
    def terminal(self) -> bool:
        return self is not RunState.RUNNING and self is not RunState.QUEUED


class Usage(BaseModel):
    # The contract spells these two in snake_case on the wire too: no aliases.
    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0


class ProgressEvent(WireModel):
    model_config = ConfigDict(frozen=True)

    sequence: int
    at: UtcTime
    value: Any


class Envelope(WireModel):
    """A snapshot of one run. Serialize with `to_json()` for the wire shape."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    state: RunState
    background: bool
    started_at: UtcTime
    ended_at: UtcTime | None = None
    result: Any = None
    error: str | None = None
    evaluations: int = 0
    tool_calls: int = 0
    usage: Usage = Usage()
    events: tuple[ProgressEvent, ...] = ()
    next_sequence: int = 1
    logs: tuple[str, ...] = ()
    observation: dict[str, Any] | None = None
    #: The newest policy decisions on the run's capability calls (at most 64;
    #: `approval_counts` has the totals): ref, risk, policy, who decided, allowed. Each entry is
    #: the contract's JSON object (camelCase keys, `at` a timestamp string).
    approvals: tuple[dict[str, Any], ...] = ()
    approval_counts: dict[str, int] = Field(default_factory=lambda: {"allowed": 0, "denied": 0})
    #: What was type-checked at launch: language, mode, outcome (clean, errors, off, unavailable,
    #: stopped), the compiler, whether the verdict was cached, and the errors reported (docs/programs.md).
    typecheck: dict[str, Any] | None = None
    #: Who answered the run's evaluations (`contract.provenance`): route, model, readout, profile,
    #: calibration; readout "mixed" with `answerers` when there were several. None before any answer.
    evaluator: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        for key in ("endedAt", "error", "observation", "typecheck", "evaluator"):
            if data[key] is None:
                del data[key]
        if not self.approvals:  # a run that made no capability call shows no trail
            del data["approvals"], data["approvalCounts"]
        if self.state is not RunState.COMPLETED:
            data.pop("result", None)
        return data
