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

from collections.abc import Iterable
from typing import Literal, NamedTuple, get_args

Risk = Literal["read", "write", "execute", "network", "agent"]
Policy = Literal["allow", "ask", "deny", "auto"]
#: What an approver or the classifier said, or how it failed. "always" and
#: "deny_all" are an approver's answers that stand for the rest of the run;
#: "allowed_before" and "denied_before" are those standing answers applied.
Answer = Literal["allow", "ask", "deny", "error", "timeout", "absent", "always", "deny_all",
                 "allowed_before", "denied_before"]
DecidedBy = Literal["policy", "rule", "classifier", "approver"]
#: What a permission rule, the floor's screen or the auto-approval classifier rules for one
#: call: let it run, ask a person, or refuse it.
Ruling = Literal["allow", "ask", "deny"]

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


def parse_approvals(raw: object) -> dict[Risk, Policy]:
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


class PolicyOutcome(NamedTuple):
    allowed: bool
    decided_by: DecidedBy
    reason: str
    #: Who answered, when an approver did: "terminal", "mcp elicitation", "application".
    approver: str | None = None
    #: The override that decided, e.g. "--allow browser.cdp".
    override: str | None = None
    #: The permission rule that decided or led to the question, as written, and where it is kept.
    rule: str | None = None
    rule_source: str | None = None
    #: The floor entry that led to the question (docs/approvals.md).
    floor: str | None = None


MAX_OVERRIDES = 64


def check_override_target(target: object) -> str:
    """A risk name or a capability ref (`--allow`/`--deny`'s argument); ValueError otherwise."""
    from .program import REF_PATTERN

    if isinstance(target, str) and (target in RISKS or (3 <= len(target) <= 256 and REF_PATTERN.fullmatch(target))):
        return target
    raise ValueError(f"{target!r} is neither a risk ({', '.join(RISKS)}) nor a capability ref "
                     "such as browser.cdp")


def parse_overrides(raw: object, which: str) -> tuple[str, ...]:
    """The config's `allow` or `deny` list: unique risks or refs, at most MAX_OVERRIDES."""
    if raw is None:
        return ()
    if isinstance(raw, str) or not isinstance(raw, Iterable):
        raise ValueError(f"{which} must be a list of risks or capability refs")
    items = [check_override_target(item) for item in raw]
    if len(items) > MAX_OVERRIDES:
        raise ValueError(f"{which} holds at most {MAX_OVERRIDES} risks or refs")
    return tuple(dict.fromkeys(items))


class PolicyOverrides(NamedTuple):
    """`--allow RISK|REF` and `--deny RISK|REF` for one command (or `HostConfig.allow`/`deny`).

    They beat the configured policy of the risk, in both directions; as with
    Deno's flags, a deny beats an allow whichever of ref or risk each names.
    """

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()

    def find(self, ref: str, risk: Risk) -> tuple[Policy, str] | None:
        """(the policy, the override as written) when one applies to this call."""
        for target in (ref, risk):
            if target in self.deny:
                return "deny", f"--deny {target}"
        for target in (ref, risk):
            if target in self.allow:
                return "allow", f"--allow {target}"
        return None

    def __bool__(self) -> bool:
        return bool(self.allow or self.deny)


def needs_approver(policy: Policy, classifier: Answer | None) -> bool:
    """Whether the approver must be consulted for this policy and classifier answer."""
    if policy == "ask":
        return True
    return policy == "auto" and classifier in ("ask", "error", "timeout")


def resolve(risk: Risk, policy: Policy, *, classifier: Answer | None = None,
            approver: Answer = "absent", override: str | None = None, who: str | None = None,
            unavailable: str | None = None) -> PolicyOutcome:
    """The outcome of one call. Only an explicit allow allows; every error refuses.

    `override` names the --allow/--deny that set `policy`; `who` is the approver
    that answered; `unavailable` why an approver had no one to ask.
    """
    if override is not None:
        verb = "allows" if policy == "allow" else "denies"
        return PolicyOutcome(policy == "allow", "policy", f"{override} {verb} it", override=override)
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
    if approver == "absent":
        return PolicyOutcome(False, "policy", f"{risk} requires approval and "
                       f"{unavailable or 'no approver is configured'}"
                       + (f" ({asked})" if policy == "auto" else ""))
    allowed, reason = _APPROVER_REASONS.get(approver, _APPROVER_REASONS["deny"])
    return PolicyOutcome(allowed, "approver", reason, approver=who)


#: What the audit trail says for each approver answer: (allowed, reason).
_APPROVER_REASONS: dict[str, tuple[bool, str]] = {
    "allow": (True, "the approver allowed it"),
    "always": (True, "the approver allowed it, and this ref for the rest of the run"),
    "allowed_before": (True, "an earlier answer allowed this ref for the rest of the run"),
    "deny": (False, "the approver denied it"),
    "deny_all": (False, "the approver denied it and every later question of the run"),
    "denied_before": (False, "an earlier answer denied every later question of the run"),
    "timeout": (False, "the approver did not answer in time"),
    "error": (False, "the approver failed"),
}


def denial_message(ref: str, outcome: PolicyOutcome) -> str:
    """The catchable guest error for a refused call."""
    return f"Capability call denied: {ref} ({outcome.reason})"
