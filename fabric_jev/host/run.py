"""The host's record of one run and how it becomes an envelope."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from ..contract.budget import RunBudget
from ..contract.config import EffectiveLimits
from ..contract.envelope import Envelope, RunState, Usage
from ..contract.program import Program
from .observing import Observation
from .policy import AuditTrail
from .ring import LogBuffer, ProgressRing, utc_now

if TYPE_CHECKING:
    import asyncio


@dataclass(slots=True)
class Outcome:
    """How the run's driver saw it end, before precedence is applied."""

    kind: str  # "completed" | "error" | "timeout" | "cancelled"
    result: Any = None
    error: str | None = None


@dataclass(eq=False)
class RunRecord:
    program: Program
    limits: EffectiveLimits
    background: bool
    input: Any
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started_at: str = field(default_factory=utc_now)
    ended_at: str | None = None
    state: RunState = RunState.RUNNING
    result: Any = None
    error: str | None = None
    ring: ProgressRing = field(default_factory=ProgressRing)
    logs: LogBuffer = field(default_factory=LogBuffer)
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope | None = None
    cancel_requested: bool = False
    worker_pid: int = 0  # diagnostics only; the guest never learns it
    timers: set[asyncio.TimerHandle] = field(default_factory=set)  # pending program.sleep timers
    observation: Observation | None = None  # set when spawned with observe
    #: What the user asked for, as the auto-approval classifier's current user text.
    intent: str | None = None
    audit: AuditTrail = field(default_factory=AuditTrail)  # every policy decision of the run
    budget: RunBudget = field(init=False)

    def __post_init__(self) -> None:
        self.budget = RunBudget(self.limits)

    def envelope(self, after: int = 0) -> Envelope:
        return Envelope(
            id=self.id,
            name=self.program.name,
            state=self.state,
            background=self.background,
            startedAt=self.started_at,
            endedAt=self.ended_at,
            result=self.result,
            error=self.error,
            evaluations=self.budget.evaluations,
            toolCalls=self.budget.tool_calls,
            usage=Usage(input_tokens=self.budget.input_tokens,
                        output_tokens=self.budget.output_tokens),
            events=self.ring.after(after),
            nextSequence=self.ring.next_sequence,
            logs=tuple(self.logs.lines),
            observation=None if self.observation is None else self.observation.counts(),
            approvals=tuple(self.audit.entries),
            approvalCounts={"allowed": self.audit.allowed, "denied": self.audit.denied},
        )
