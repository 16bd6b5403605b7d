"""Risks, risk policies and the decision rule for capability calls. Pure code.

Every capability a program can reach declares a risk. The host's approvals
map each risk to a policy:

- ``allow``: the call runs;
- ``deny``: it is refused;
- ``ask``: the embedding application's approver decides; with none, refused;
- ``auto``: the auto-approval classifier decides; what it would ask goes to
  the approver (or is refused without one), what it denies is refused.

Every path that is not a clean "allow" refuses: an approver that raises, is
slow, or answers anything but allow; a classifier that fails. `resolve` is
the one place that rule is written down; the async driver
(`fabric_jev.host.policy`) only gathers its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

Risk = Literal["read", "write", "execute", "network", "agent"]
Policy = Literal["allow", "ask", "deny", "auto"]
#: What an approver or the classifier said, or how it failed.
Answer = Literal["allow", "ask", "deny", "error", "timeout", "absent"]
DecidedBy = Literal["policy", "classifier", "approver"]

RISKS: tuple[Risk, ...] = get_args(Risk)
POLICIES: tuple[Policy, ...] = get_args(Policy)
DEFAULT_APPROVALS: dict[Risk, Policy] = {"read": "allow", "write": "ask", "execute": "ask",
                                         "network": "ask", "agent": "ask"}

#: The risks of the host's own capabilities (connectors declare their own).
BUILTIN_RISKS: dict[str, Risk] = {
    # The host's configured evaluator only reads a judgment back; configuring
    # it is the consent for state to leave (docs/evaluators.md).
    "jev.evaluate": "read",
    # Advice steers the Main agent.
    "jev.advise": "agent",
    # A program launched from inside another program's capability call.
    "jev.spawn": "agent",
    # Subscribing to the Main session's future events (spawn with observe).
    "jev.observe": "read",
}


def parse_approvals(raw: Any) -> dict[Risk, Policy]:
    """The approvals map: defaults for every risk, overridden by `raw`; ValueError if malformed."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValueError("approvals must map risks to policies")
    unknown = set(raw) - set(RISKS)
    if unknown:
        raise ValueError(f"approvals has unknown risks: {', '.join(sorted(map(str, unknown)))} "
                         f"(risks: {', '.join(RISKS)})")
    out = dict(DEFAULT_APPROVALS)
    for risk, policy in raw.items():
        if policy not in POLICIES:
            raise ValueError(f"approvals.{risk} must be one of {', '.join(POLICIES)}")
        out[risk] = policy
    return out


@dataclass(frozen=True, slots=True)
class PolicyOutcome:
    allowed: bool
    decided_by: DecidedBy
    reason: str


def needs_approver(policy: Policy, classifier: Answer | None) -> bool:
    """Whether the approver must be consulted for this policy and classifier answer."""
    if policy == "ask":
        return True
    return policy == "auto" and classifier in ("ask", "error", "timeout")


def resolve(risk: Risk, policy: Policy, *, classifier: Answer | None = None,
            approver: Answer = "absent") -> PolicyOutcome:
    """The outcome of one call. Only an explicit allow allows; every error refuses."""
    if policy == "allow":
        return PolicyOutcome(True, "policy", f"the {risk} policy allows it")
    if policy == "deny":
        return PolicyOutcome(False, "policy", f"the {risk} policy denies it")
    if policy == "auto":
        if classifier == "allow":
            return PolicyOutcome(True, "classifier", "the classifier allowed it")
        if classifier == "deny":
            return PolicyOutcome(False, "classifier", "the classifier denied it")
        if classifier not in ("ask", "error", "timeout"):
            return PolicyOutcome(False, "classifier", "the classifier did not decide")
    # ask, or auto that the classifier handed on (it asked, failed or timed out).
    asked = "the classifier could not allow it" if policy == "auto" else "it needs approval"
    if approver == "allow":
        return PolicyOutcome(True, "approver", "the approver allowed it")
    if approver == "absent":
        return PolicyOutcome(False, "policy", f"{risk} requires approval and no approver is configured"
                       + (f" ({asked})" if policy == "auto" else ""))
    if approver == "timeout":
        return PolicyOutcome(False, "approver", "the approver did not answer in time")
    if approver == "error":
        return PolicyOutcome(False, "approver", "the approver failed")
    return PolicyOutcome(False, "approver", "the approver denied it")


def denial_message(ref: str, outcome: PolicyOutcome) -> str:
    """The catchable guest error for a refused call."""
    return f"Capability call denied: {ref} ({outcome.reason})"
