"""Run states and the envelope every run call returns (contract §2), with its parts.

Attributes are snake_case and timestamps `datetime`s (UTC); `to_json()` and
every `model_dump` write the contract's camelCase keys and timestamp format
(`wire_model`). Each part the envelope shows (observation counts, the audit
trail's entries, the launch's type check, who answered) is a model here, so
the MCP tools' output schema is derived from the envelope whole.
"""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from .languages import CheckMode, Language, TypeCheckOutcome
from .policy import DecidedBy, Policy, Risk
from .provenance import Provenance
from .wire_model import ReadAsDict, UtcTime, WireModel, omit_empty, omit_none


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
    model_config = ConfigDict(frozen=True, json_schema_serialization_defaults_required=True, defer_build=True)

    input_tokens: int = 0
    output_tokens: int = 0


class ProgressEvent(WireModel):
    model_config = ConfigDict(frozen=True)

    sequence: int
    at: UtcTime
    value: Any


class ObservationCounts(ReadAsDict, WireModel):
    """An observer run's traffic (the envelope's `observation`): the kinds it subscribed to, and
    how many events it received, read, lost to a full inbox and still has queued; its advice."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    events: tuple[str, ...]
    received: int
    consumed: int
    dropped: int
    queued: int
    advice_delivered: int
    advice_suppressed: int


class AuditEntry(ReadAsDict, WireModel):
    """One policy decision on a capability call (the envelope's `approvals`). The reason is a fixed
    template naming only the risk and who decided: a call's arguments are never recorded here."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    sequence: int
    at: UtcTime
    ref: str
    risk: Risk
    policy: Policy
    decided_by: DecidedBy
    allowed: bool
    reason: str
    #: The classifier's probability that the call is safe, when it decided.
    probability: float | None = Field(default=None, exclude_if=omit_none)
    #: Who answered, when an approver did.
    approver: str | None = Field(default=None, exclude_if=omit_none)
    #: The override that decided, e.g. "--allow browser.cdp".
    override: str | None = Field(default=None, exclude_if=omit_none)
    #: The permission rule that decided or led to the question, as written, and where it is kept.
    rule: str | None = Field(default=None, exclude_if=omit_none)
    rule_source: str | None = Field(default=None, exclude_if=omit_none)
    #: The floor entry that led to the question (docs/approvals.md).
    floor: str | None = Field(default=None, exclude_if=omit_none)


class ApprovalCounts(ReadAsDict, WireModel):
    """A run's policy decisions, counted."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    allowed: int = 0
    denied: int = 0


class TypecheckReport(ReadAsDict, WireModel):
    """What was type-checked at launch (the envelope's `typecheck`; docs/programs.md)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    #: None when the check was off before the language was known.
    language: Language | None
    mode: CheckMode
    outcome: TypeCheckOutcome
    #: The compiler, when one was found, and whether its verdict came from the cache.
    compiler: str | None = Field(default=None, exclude_if=omit_none)
    cached: bool | None = Field(default=None, exclude_if=omit_none)
    #: How many type errors, when the compiler gave a verdict.
    errors: int | None = Field(default=None, exclude_if=omit_none)
    #: The first errors, each `line L, column C: message (TSNNNN)`.
    diagnostics: tuple[str, ...] = Field(default=(), exclude_if=omit_empty)
    #: Why the check is unavailable or stopped.
    reason: str | None = Field(default=None, exclude_if=omit_none)


def _shown_sometimes(schema: dict[str, Any]) -> None:
    # What the envelope's JSON Schema cannot read from a field: `result` is written only for a
    # completed run, `approvalCounts` only beside approvals (`Envelope._shown`).
    schema["required"] = [key for key in schema.get("required", ()) if key not in ("result", "approvalCounts")]


class Envelope(WireModel):
    """A snapshot of one run. Serialize with `to_json()` for the wire shape."""

    model_config = ConfigDict(frozen=True, defer_build=True, json_schema_extra=_shown_sometimes)

    id: str
    name: str
    state: RunState
    background: bool
    started_at: UtcTime
    ended_at: UtcTime | None = Field(default=None, exclude_if=omit_none)
    #: Shown only when the state is completed (the value may be null).
    result: Any = None
    error: str | None = Field(default=None, exclude_if=omit_none)
    evaluations: int = 0
    tool_calls: int = 0
    # Defaults made without validating (their values are the defaults): no schema is built with the class.
    usage: Usage = Usage.model_construct()
    events: tuple[ProgressEvent, ...] = ()
    next_sequence: int = 1
    logs: tuple[str, ...] = ()
    #: An observer run's counts (spawned with observe); None otherwise.
    observation: ObservationCounts | None = Field(default=None, exclude_if=omit_none)
    #: The newest policy decisions on the run's capability calls (at most 64;
    #: `approval_counts` has the totals). A run that made no capability call shows neither.
    approvals: tuple[AuditEntry, ...] = Field(default=(), exclude_if=omit_empty)
    approval_counts: ApprovalCounts = ApprovalCounts.model_construct()
    #: What was type-checked at launch: language, mode, outcome, the compiler, whether the verdict
    #: was cached, and the errors reported (docs/programs.md).
    typecheck: TypecheckReport | None = Field(default=None, exclude_if=omit_none)
    #: Who answered the run's evaluations (`contract.provenance`): route, model, readout, profile,
    #: calibration; readout "mixed" with `answerers` when there were several. None before any answer.
    evaluator: Provenance | None = Field(default=None, exclude_if=omit_none)

    # No return annotation: pydantic would take it for the JSON Schema of the whole envelope.
    @model_serializer(mode="wrap")
    def _shown(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        # The two rules that read another field (a field's own exclude_if sees only its value).
        data: dict[str, Any] = handler(self)
        if self.state is not RunState.COMPLETED:
            data.pop("result", None)
        if not self.approvals:
            data.pop("approvalCounts", None)
        return data
