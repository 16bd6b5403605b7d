"""The policy gate every capability call passes, and the audit trail it leaves.

The rule itself is pure (`fabric_jev.contract.policy.resolve`); this module
only gathers its inputs: the approvals policy of the call's risk (or an
`--allow`/`--deny` override), the auto-approval classifier's verdict (for
`auto`), and the approver (for `ask`, and what `auto` hands on): the
embedding application's, the terminal prompt or the MCP elicitation, all
given the same `CapabilityCall`. The approver and the classifier are each
bounded by their own timeout; anything they raise is a refusal.
Cancellation of the run is always re-raised.

Questions are asked one at a time per host: a person answers one prompt
before the next is shown, and the approver's timeout counts from the moment
a question is its turn. An answer that stands for the rest of a run ("always
for this ref", "no to everything") is kept in that run's audit trail and
checked again when a queued question's turn comes.
"""

from __future__ import annotations

import contextvars
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from anyio.lowlevel import checkpoint_if_cancelled

from ..contract.policy import Answer, Policy, PolicyOutcome, PolicyOverrides, Risk, needs_approver, resolve
from ..contract.wire_model import utc_time, wire_time
from ..evaluators.base import Evaluator

if TYPE_CHECKING:  # loaded when a call must be asked: a run that asks nothing never loads it
    from ..contract.asking import Approver, CapabilityCall, Verdict

AUDIT_KEEP = 64

#: The refs held by the program whose capability call is running on this task,
#: so a program launched from inside that call cannot be granted more.
CALLER_GRANT: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar(
    "fabric_jev_caller_grant", default=None)




def _approver_answer(value: Any) -> Answer:
    if value is True or value == "allow" or getattr(value, "decision", None) == "allow":
        return "allow"
    if value in ("always", "deny_all"):
        return "always" if value == "always" else "deny_all"
    return "deny"


def _verdict(decision: Any) -> Verdict | None:
    """The classifier's Decision as the approver sees it."""
    from ..contract.asking import Verdict

    if decision is None:
        return None
    probabilities = getattr(decision, "probabilities", None)
    return Verdict(decision=str(decision.decision), reason=str(decision.reason),
                   probabilities=dict(probabilities) if isinstance(probabilities, dict) else None)


_Decision = tuple[int, float, str, Risk, Policy, PolicyOutcome, "float | None"]


@dataclass(slots=True)
class StandingAnswers:
    """Answers that hold for the rest of one run: "always" per ref, and "no to everything"."""

    allowed_refs: set[str] = field(default_factory=set)
    deny_all: bool = False

    def answer(self, ref: str) -> Answer | None:
        if self.deny_all:
            return "denied_before"
        return "allowed_before" if ref in self.allowed_refs else None

    def remember(self, ref: str, answer: Answer) -> None:
        if answer == "always":
            self.allowed_refs.add(ref)
        elif answer == "deny_all":
            self.deny_all = True


@dataclass(slots=True)
class AuditTrail:
    """The newest decisions of one run, with totals (the envelope's `approvals`).

    Decisions are kept as tuples and shown as dicts only when an envelope is
    built: recording one stays cheap on the per-call path.
    """

    kept: deque[_Decision] = field(default_factory=lambda: deque(maxlen=AUDIT_KEEP))
    allowed: int = 0
    denied: int = 0
    standing: StandingAnswers = field(default_factory=StandingAnswers)

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
                "sequence": sequence, "at": wire_time(utc_time(at)), "ref": ref, "risk": risk, "policy": policy,
                "decidedBy": outcome.decided_by, "allowed": outcome.allowed,
                # Reasons are fixed templates naming only the risk and who decided;
                # arguments are never recorded here.
                "reason": outcome.reason,
            }
            if probability is not None:
                entry["probability"] = probability
            if outcome.approver is not None:
                entry["approver"] = outcome.approver
            if outcome.override is not None:
                entry["override"] = outcome.override
            out.append(entry)
        return out

    def actions(self) -> list[dict[str, Any]]:
        """The run's earlier decisions as the classifier's session actions."""
        return [{"ref": ref, "risk": risk, "allowed": outcome.allowed}
                for _, _, ref, risk, _, outcome, _ in self.kept]


class PolicyGate:
    """Decides capability calls for one host."""

    def __init__(self, approvals: dict[Risk, Policy], *, approver: Approver | None,
                 evaluator: Evaluator | None, threshold: float, approver_timeout_s: float,
                 classifier_timeout_s: float, max_request_bytes: int,
                 overrides: PolicyOverrides | None = None) -> None:
        self.approvals = approvals
        self.overrides = overrides or PolicyOverrides()
        # allow and deny decide alone: their outcomes are made once, not per call.
        self._immediate: dict[tuple[Risk, Policy, str | None], PolicyOutcome] = {}
        self.approver = approver
        # One question at a time: a person answers one prompt before the next is shown.
        self._turn = anyio.Lock()
        #: Questions waiting for their turn.
        self.waiting = 0
        self._queue_grew = anyio.Event()
        self.evaluator = evaluator
        self.threshold = threshold
        self.approver_timeout_s = approver_timeout_s
        self.classifier_timeout_s = classifier_timeout_s
        self.max_request_bytes = max_request_bytes

    @property
    def approver_name(self) -> str:
        name = getattr(self.approver, "name", None)
        return name if isinstance(name, str) and name else "application"

    def _effective(self, risk: Risk, ref: str | None) -> tuple[Policy, str | None]:
        found = self.overrides.find(ref, risk) if ref is not None and self.overrides else None
        if found is not None:
            return found
        return self.approvals.get(risk, "ask"), None

    def immediate(self, risk: Risk, ref: str | None = None) -> tuple[Policy, PolicyOutcome] | None:
        """(policy, outcome) when the policy alone decides (allow, deny; an --allow/--deny naming
        the call's ref or risk first, else its risk's policy); None when it must ask."""
        policy, override = self._effective(risk, ref)
        if policy not in ("allow", "deny"):
            return None
        outcome = self._immediate.get((risk, policy, override))
        if outcome is None:
            outcome = self._immediate[(risk, policy, override)] = resolve(risk, policy, override=override)
        return policy, outcome

    async def decide(self, ref: str, risk: Risk, *, run_id: str, run_name: str, arguments: Any,
                     intent: str | None, actions: list[dict[str, Any]] | None = None,
                     audit: AuditTrail | None = None) -> tuple[Policy, PolicyOutcome, float | None]:
        """(policy, outcome, classifier's safe probability when it was asked).

        `audit` is the run's trail: its decisions are the classifier's session
        actions, and its standing answers replace the approver's question.
        """
        if audit is not None and actions is None:
            actions = audit.actions()
        policy, override = self._effective(risk, ref)
        if policy in ("allow", "deny"):
            return policy, resolve(risk, policy, override=override), None
        from ..contract.redaction import redact, redact_text  # its rules load only when a call must be asked

        try:
            shown, _ = redact(arguments)
        except ValueError:
            shown = "[omitted: arguments are not finite JSON]"
        # The user's words are evidence too: the classifier gets them redacted, and so does a person.
        shown_intent = redact_text(intent)[0] if isinstance(intent, str) else None
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
        unavailable: str | None = None
        if needs_approver(policy, classifier):
            from ..contract.asking import CapabilityCall

            approver, unavailable = await self._ask(CapabilityCall(
                ref=ref, risk=risk, policy=policy, run_id=run_id, run_name=run_name,
                arguments=shown, intent=shown_intent, classifier=_verdict(decision)),
                None if audit is None else audit.standing)
        who = self.approver_name if approver not in ("absent", "allowed_before", "denied_before") else None
        return policy, resolve(risk, policy, classifier=classifier, approver=approver, who=who,
                               unavailable=unavailable), probability

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

    async def _ask(self, request: CapabilityCall,
                   standing: StandingAnswers | None) -> tuple[Answer, str | None]:
        """(the approver's answer, why no one could be asked) for one question, in its turn."""
        if standing is not None and (earlier := standing.answer(request.ref)) is not None:
            return earlier, None
        if self.approver is None:
            return "absent", None
        self.waiting += 1
        self._queue_grew.set()
        self._queue_grew = anyio.Event()
        try:
            await self._turn.acquire()
        finally:
            self.waiting -= 1
        try:
            # An answer given while this question waited may already decide it.
            if standing is not None and (earlier := standing.answer(request.ref)) is not None:
                return earlier, None
            answer, unavailable = await self._answer(request)
        finally:
            self._turn.release()
        if standing is not None:
            standing.remember(request.ref, answer)
        return answer, unavailable

    async def until_waiting(self, count: int) -> None:
        """Return once at least `count` questions wait for their turn (a test, or a display of the queue)."""
        while self.waiting < count:
            await self._queue_grew.wait()

    async def _answer(self, request: CapabilityCall) -> tuple[Answer, str | None]:
        from ..contract.asking import UNAVAILABLE_REASON_CHARS, Unavailable

        assert self.approver is not None
        failed = False
        try:
            with anyio.move_on_after(self.approver_timeout_s) as scope:
                value = await self.approver(request)
        except Exception:  # an approver that fails refuses; its message is not trusted
            failed = True
        # An approver can outlive a cancellation and still answer (it caught the
        # cancellation, or awaited a thread that cannot be abandoned): a stopped run
        # is stopped, and an answer after the timeout is no answer.
        await checkpoint_if_cancelled()
        if scope.cancel_called:
            return "timeout", None
        if failed:
            return "error", None
        if isinstance(value, Unavailable):
            from ..contract.redaction import redact_text

            reason, _ = redact_text(" ".join(str(value.reason).split())[:UNAVAILABLE_REASON_CHARS])
            return "absent", reason or None
        return _approver_answer(value), None
