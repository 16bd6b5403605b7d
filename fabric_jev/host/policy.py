"""The policy gate every capability call passes, and the audit trail it leaves.

The rule itself is pure (`fabric_jev.contract.policy.resolve`); this module
only gathers its inputs: the approvals policy of the call's risk, the
auto-approval classifier's verdict (for `auto`), and the embedding
application's approver (for `ask`, and what `auto` hands on). The approver
and the classifier are each bounded by their own timeout; anything they
raise is a refusal. Cancellation of the run is always re-raised.
"""

from __future__ import annotations

import contextvars
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio

from ..contract.policy import Answer, Policy, PolicyOutcome, Risk, needs_approver, resolve
from ..contract.redaction import redact
from ..evaluators.base import Evaluator

AUDIT_KEEP = 64

#: The refs held by the program whose capability call is running on this task,
#: so a program launched from inside that call cannot be granted more.
CALLER_GRANT: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar(
    "fabric_jev_caller_grant", default=None)


@dataclass(frozen=True, slots=True)
class CapabilityCall:
    """The capability call an approver is asked about.

    `arguments` are redacted like every other evidence. `classifier` is the
    classifier's decision when an `auto` policy handed the call on.
    """

    ref: str
    risk: Risk
    policy: Policy
    run_id: str
    run_name: str
    arguments: Any
    intent: str | None
    classifier: Any = None  # fabric_jev.approval.Decision | None


#: ``async def approver(request: CapabilityCall) -> Decision | bool | str``: only an
#: explicit allow (``True``, ``"allow"`` or a Decision whose ``decision`` is
#: ``"allow"``) allows; anything else, an exception or a timeout refuses.
Approver = Callable[[CapabilityCall], Awaitable[Any]]


def _approver_answer(value: Any) -> Answer:
    if value is True or value == "allow" or getattr(value, "decision", None) == "allow":
        return "allow"
    return "deny"


_Decision = tuple[int, float, str, Risk, Policy, PolicyOutcome, "float | None"]


@dataclass(slots=True)
class AuditTrail:
    """The newest decisions of one run, with totals (the envelope's `approvals`).

    Decisions are kept as tuples and shown as dicts only when an envelope is
    built: recording one stays cheap on the per-call path.
    """

    kept: deque[_Decision] = field(default_factory=lambda: deque(maxlen=AUDIT_KEEP))
    allowed: int = 0
    denied: int = 0

    def add(self, ref: str, risk: Risk, policy: Policy, outcome: PolicyOutcome,
            probability: float | None = None) -> None:
        self.kept.append((self.allowed + self.denied + 1, time.time(), ref, risk, policy, outcome,
                          probability))
        if outcome.allowed:
            self.allowed += 1
        else:
            self.denied += 1

    @property
    def entries(self) -> list[dict[str, Any]]:
        out = []
        for sequence, at, ref, risk, policy, outcome, probability in self.kept:
            entry: dict[str, Any] = {
                "sequence": sequence, "at": _iso(at), "ref": ref, "risk": risk, "policy": policy,
                "decidedBy": outcome.decided_by, "allowed": outcome.allowed,
                # Reasons are fixed templates naming only the risk and who decided;
                # arguments are never recorded here.
                "reason": outcome.reason,
            }
            if probability is not None:
                entry["probability"] = probability
            out.append(entry)
        return out

    def actions(self) -> list[dict[str, Any]]:
        """The run's earlier decisions as the classifier's session actions."""
        return [{"ref": ref, "risk": risk, "allowed": outcome.allowed}
                for _, _, ref, risk, _, outcome, _ in self.kept]


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class PolicyGate:
    """Decides capability calls for one host."""

    def __init__(self, approvals: dict[Risk, Policy], *, approver: Approver | None,
                 evaluator: Evaluator | None, threshold: float, approver_timeout_s: float,
                 classifier_timeout_s: float, max_request_bytes: int) -> None:
        self.approvals = approvals
        # allow and deny decide alone: their outcomes are made once, not per call.
        self._immediate: dict[tuple[Risk, Policy], PolicyOutcome] = {}
        self.approver = approver
        self.evaluator = evaluator
        self.threshold = threshold
        self.approver_timeout_s = approver_timeout_s
        self.classifier_timeout_s = classifier_timeout_s
        self.max_request_bytes = max_request_bytes

    def policy(self, risk: Risk) -> Policy:
        return self.approvals.get(risk, "ask")

    def immediate(self, risk: Risk) -> PolicyOutcome | None:
        """The outcome when the policy alone decides (allow, deny); None when it must ask."""
        policy = self.policy(risk)
        if policy not in ("allow", "deny"):
            return None
        outcome = self._immediate.get((risk, policy))
        if outcome is None:
            outcome = self._immediate[(risk, policy)] = resolve(risk, policy)
        return outcome

    async def decide(self, ref: str, risk: Risk, *, run_id: str, run_name: str, arguments: Any,
                     intent: str | None, actions: list[dict[str, Any]] | None = None,
                     ) -> tuple[Policy, PolicyOutcome, float | None]:
        """(policy, outcome, classifier's safe probability when it was asked)."""
        policy = self.policy(risk)
        if policy in ("allow", "deny"):
            return policy, resolve(risk, policy), None
        try:
            shown, _ = redact(arguments)
        except ValueError:
            shown = "[omitted: arguments are not finite JSON]"
        classifier: Answer | None = None
        decision: Any = None
        probability: float | None = None
        if policy == "auto":
            classifier, decision = await self._classify(ref, risk, arguments, intent, actions or [])
            probabilities = getattr(decision, "probabilities", None) or {}
            safe = probabilities.get("safe")
            if isinstance(safe, float) and math.isfinite(safe):
                probability = safe
        approver: Answer = "absent"
        if needs_approver(policy, classifier) and self.approver is not None:
            approver = await self._ask(CapabilityCall(
                ref=ref, risk=risk, policy=policy, run_id=run_id, run_name=run_name,
                arguments=shown, intent=intent, classifier=decision))
        return policy, resolve(risk, policy, classifier=classifier, approver=approver), probability

    async def _classify(self, ref: str, risk: Risk, arguments: Any, intent: str | None,
                        actions: list[dict[str, Any]]) -> tuple[Answer, Any]:
        from ..approval import ApprovalRequest as Evidence
        from ..approval import ProposedAction, classify

        try:
            decision = await classify(
                Evidence(user_text=intent, action=ProposedAction(ref, risk, f"{ref} call", arguments),
                         session_actions=actions),
                evaluator=self.evaluator, threshold=self.threshold, policy="auto",
                timeout=self.classifier_timeout_s, max_request_bytes=self.max_request_bytes)
        except Exception:  # classify never raises; if it ever does, it did not allow
            return "error", None
        verdict = decision.decision
        return (verdict if verdict in ("allow", "ask", "deny") else "error"), decision

    async def _ask(self, request: CapabilityCall) -> Answer:
        assert self.approver is not None
        try:
            with anyio.move_on_after(self.approver_timeout_s) as scope:
                value = await self.approver(request)
            if scope.cancelled_caught:
                return "timeout"
        except Exception:  # an approver that fails refuses; its message is not trusted
            return "error"
        return _approver_answer(value)
