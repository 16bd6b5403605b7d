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
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio
from anyio.lowlevel import checkpoint_if_cancelled

from ..contract.envelope import AuditEntry
from ..contract.policy import Answer, Policy, PolicyOutcome, PolicyOverrides, Risk, needs_approver, resolve
from ..contract.wire_model import utc_time
from ..evaluators.base import Evaluator

if TYPE_CHECKING:  # loaded when a call must be asked: a run that asks nothing never loads it
    from ..approval.call_view import CallView
    from ..approval.question import Approver, CapabilityCall, ClassifierVerdict
    from ..approval.rule_matching import Rule

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


def _verdict(decision: Any) -> ClassifierVerdict | None:
    """The classifier's Decision as the approver sees it."""
    from ..approval.question import ClassifierVerdict

    if decision is None:
        return None
    probabilities = getattr(decision, "probabilities", None)
    return ClassifierVerdict(decision=decision.decision, reason=str(decision.reason),
                             probabilities=dict(probabilities) if isinstance(probabilities, dict) else None)


_Decision = tuple[int, float, str, Risk, Policy, PolicyOutcome, "float | None"]


class StandingAnswers:
    """Answers that hold for the rest of one run: "always" per ref, and "no to everything"."""

    # A plain class: a dataclass costs several times as much to make, on every run's start-up.
    __slots__ = ("allowed_refs", "deny_all", "rules")

    def __init__(self) -> None:
        self.allowed_refs: set[str] = set()
        self.deny_all = False
        #: Allow rules a person confirmed with `a` for this run: (rule, matches(view)).
        self.rules: list[Rule] = []

    def answer(self, ref: str, view: CallView | None = None) -> Answer | None:
        if self.deny_all:
            return "denied_before"
        if ref in self.allowed_refs:
            return "allowed_before"
        if view is not None and any(rule.targets(ref, view.risk) and rule.matches(view) for rule in self.rules):
            return "allowed_before"
        return None

    def remember(self, ref: str, answer: Answer, rule: Rule | None = None) -> None:
        if answer == "always":
            if rule is not None:
                self.rules.append(rule)
            else:
                self.allowed_refs.add(ref)
        elif answer == "deny_all":
            self.deny_all = True


class AuditTrail:
    """The newest decisions of one run, with totals (the envelope's `approvals`).

    Decisions are kept as tuples and shown as dicts only when an envelope is
    built: recording one stays cheap on the per-call path.
    """

    __slots__ = ("allowed", "denied", "kept", "standing")

    def __init__(self) -> None:
        self.kept: deque[_Decision] = deque(maxlen=AUDIT_KEEP)
        self.allowed = 0
        self.denied = 0
        self.standing = StandingAnswers()

    def add(self, ref: str, risk: Risk, policy: Policy, outcome: PolicyOutcome,
            probability: float | None = None) -> None:
        self.kept.append((self.allowed + self.denied + 1, time.time(), ref, risk, policy, outcome,
                          probability))
        if outcome.allowed:
            self.allowed += 1
        else:
            self.denied += 1

    @property
    def entries(self) -> list[AuditEntry]:
        return [AuditEntry(sequence=sequence, at=utc_time(at), ref=ref, risk=risk, policy=policy,
                           decided_by=outcome.decided_by, allowed=outcome.allowed, reason=outcome.reason,
                           probability=probability, approver=outcome.approver, override=outcome.override,
                           rule=outcome.rule, rule_source=outcome.rule_source, floor=outcome.floor)
                for sequence, at, ref, risk, policy, outcome, probability in self.kept]

    def actions(self) -> list[dict[str, Any]]:
        """The run's earlier decisions as the classifier's session actions."""
        return [{"ref": ref, "risk": risk, "allowed": outcome.allowed}
                for _, _, ref, risk, _, outcome, _ in self.kept]


class Pending(NamedTuple):
    """A call the rules left to the classifier or a person: why, and what a person is shown."""

    policy: Policy  # "ask" or "auto"
    #: The rule or floor entry that asks (None: the risk's policy does).
    why: str | None = None
    rule: Any = None  # approval.rules.Rule
    floor: Any = None  # approval.floor.FloorEntry
    view: Any = None  # approval.rules.CallView, when the call was read by rules


class PolicyGate:
    """Decides capability calls for one host."""

    def __init__(self, approvals: dict[Risk, Policy], *, approver: Approver | None,
                 evaluator: Evaluator | None, threshold: float, approver_timeout_s: float,
                 classifier_timeout_s: float, max_request_bytes: int,
                 overrides: PolicyOverrides | None = None, rules: Any = None, defaults: Any = None,
                 cwd: str | None = None, home: str | None = None) -> None:
        """`rules` is an approval.rules.RuleSet (the config's and the settings'), `defaults`
        fabric-jev's default rules (None when switched off), either given as a function that
        makes it on first use (`host_rules(deferred=True)`); `cwd` and `home` are where paths
        are read against (the process's own by default)."""
        import os

        self.approvals = approvals
        self.overrides = overrides or PolicyOverrides()
        self._rules = rules
        self._defaults = defaults
        self.cwd = cwd or os.getcwd()
        self.home = home if home is not None else os.path.expanduser("~")
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
    def rules(self) -> Any:
        if callable(self._rules):
            self._rules = self._rules()
        return self._rules

    @property
    def defaults(self) -> Any:
        if callable(self._defaults):
            self._defaults = self._defaults()
        return self._defaults

    @property
    def approver_name(self) -> str:
        name = getattr(self.approver, "name", None)
        return name if isinstance(name, str) and name else "application"

    def _effective(self, risk: Risk, ref: str | None) -> tuple[Policy, str | None]:
        found = self.overrides.find(ref, risk) if ref is not None and self.overrides else None
        if found is not None:
            return found
        return self.approvals.get(risk, "ask"), None

    def _fixed(self, risk: Risk, policy: Policy, override: str | None) -> PolicyOutcome:
        outcome = self._immediate.get((risk, policy, override))
        if outcome is None:
            outcome = self._immediate[(risk, policy, override)] = resolve(risk, policy, override=override)
        return outcome

    def view(self, ref: str, risk: Risk, arguments: Any, origins: frozenset[str] = frozenset()) -> Any:
        """The call as rules and the floor read it (approval.rules.CallView)."""
        from ..approval.rules import CallView, RuleContext

        return CallView(ref, risk, arguments, RuleContext.here(self.cwd, self.home, origins))

    def triage(self, ref: str, risk: Risk, arguments: Any = None,
               origins: frozenset[str] = frozenset()) -> tuple[Policy, PolicyOutcome] | Pending:
        """(policy, outcome) when overrides, rules, the floor or the policy decide alone; else
        what is left for the classifier or a person (docs/approvals.md, "How a call is decided")."""
        policy, override = self._effective(risk, ref)
        if override is not None and policy == "deny":
            return policy, self._fixed(risk, policy, override)
        from ..approval.screen import screen, screen_defaults

        view = self.view(ref, risk, arguments, origins)
        found = screen(view, self.rules)  # the floor holds without rules too
        if found is not None:
            rule = found.rule
            if found.decision != "ask":
                assert rule is not None  # allow and deny come from a rule
                return found.decision, PolicyOutcome(found.decision == "allow", "rule", found.reason,
                                                     rule=rule.text, rule_source=rule.source)
            if policy == "deny":  # a deny policy is stricter than any question
                return policy, self._fixed(risk, policy, override)
            return Pending("ask", found.why, rule, found.floor, view)
        if override is not None or policy in ("allow", "deny"):
            return policy, self._fixed(risk, policy, override)
        if self.defaults is not None:
            allowed = screen_defaults(view, self.defaults)
            if allowed is not None and allowed.rule is not None:
                return "allow", PolicyOutcome(True, "rule", allowed.reason, rule=allowed.rule.text,
                                              rule_source=allowed.rule.source)
        return Pending(policy, None, None, None, view)

    def immediate(self, risk: Risk, ref: str | None = None) -> tuple[Policy, PolicyOutcome] | None:
        """(policy, outcome) when overrides or the risk's policy decide alone, without reading
        the call's arguments; None when rules, the classifier or a person must (see `triage`)."""
        policy, override = self._effective(risk, ref)
        if override is not None and policy == "deny":
            return policy, self._fixed(risk, policy, override)
        return None

    async def decide(self, ref: str, risk: Risk, *, run_id: str, run_name: str, arguments: Any,
                     intent: str | None, actions: list[dict[str, Any]] | None = None,
                     audit: AuditTrail | None = None, pending: Pending | None = None,
                     origins: frozenset[str] = frozenset()) -> tuple[Policy, PolicyOutcome, float | None]:
        """(policy, outcome, classifier's safe probability when it was asked).

        `audit` is the run's trail: its decisions are the classifier's session
        actions, and its standing answers replace the approver's question.
        `pending` is what `triage` left, when the caller triaged the call already.
        """
        if pending is None:
            triaged = self.triage(ref, risk, arguments, origins)
            if not isinstance(triaged, Pending):
                policy, outcome = triaged
                return policy, outcome, None
            pending = triaged
        if audit is not None and actions is None:
            actions = audit.actions()
        policy = pending.policy
        from ..redaction.redactor import redact, redact_text  # its rules load only when a call must be asked

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
            from ..approval.question import CapabilityCall

            why = pending.why
            # "Always" stores the pattern itself; the person is shown it redacted.
            pattern = None if pending.floor is not None else _suggest(ref, pending.view)
            if why is None:
                why = (f"the classifier: {decision.reason}" if decision is not None and policy == "auto"
                       else f"the {risk} policy is {policy}")
            approver, unavailable = await self._ask(CapabilityCall(
                ref=ref, risk=risk, policy=policy, run_id=run_id, run_name=run_name,
                arguments=shown, intent=shown_intent, classifier=_verdict(decision), asked_because=why,
                commands=_segments(_shown_view(pending.view, shown)),
                always=None if pending.floor is not None else _shown_pattern(pattern)),
                None if audit is None else audit.standing, pending.view, floor=pending.floor is not None,
                always_pattern=pattern)
        who = self.approver_name if approver not in ("absent", "allowed_before", "denied_before") else None
        outcome = resolve(risk, policy, classifier=classifier, approver=approver, who=who,
                          unavailable=unavailable)
        if pending.rule is not None or pending.floor is not None:
            outcome = outcome._replace(rule=None if pending.rule is None else pending.rule.text,
                                       rule_source=None if pending.rule is None else pending.rule.source,
                                       floor=None if pending.floor is None else pending.floor.id)
        return policy, outcome, probability

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

    async def _ask(self, request: CapabilityCall, standing: StandingAnswers | None,
                   view: Any = None, *, floor: bool = False,
                   always_pattern: str | None = None) -> tuple[Answer, str | None]:
        """(the approver's answer, why no one could be asked) for one question, in its turn.

        A floor question is answered for this call only: an earlier "always" does not answer
        it, and its own "always" allows it once (only a rule naming the entry lifts the floor)."""
        def earlier_answer() -> Answer | None:
            if standing is None:
                return None
            earlier = standing.answer(request.ref, view)
            return None if floor and earlier == "allowed_before" else earlier

        if (earlier := earlier_answer()) is not None:
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
            if (earlier := earlier_answer()) is not None:
                return earlier, None
            answer, unavailable, rule = await self._answer(request, always_pattern)
        finally:
            self._turn.release()
        if floor and answer == "always":
            answer = "allow"
        if standing is not None:
            standing.remember(request.ref, answer, rule)
        return answer, unavailable

    async def until_waiting(self, count: int) -> None:
        """Return once at least `count` questions wait for their turn (a test, or a display of the queue)."""
        while self.waiting < count:
            await self._queue_grew.wait()

    async def _answer(self, request: CapabilityCall,
                      always_pattern: str | None = None) -> tuple[Answer, str | None, Any]:
        from ..approval.question import UNAVAILABLE_REASON_CHARS, Unavailable

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
            return "timeout", None, None
        if failed:
            return "error", None, None
        if isinstance(value, Unavailable):
            from ..redaction.redactor import redact_text

            reason, _ = redact_text(" ".join(str(value.reason).split())[:UNAVAILABLE_REASON_CHARS])
            return "absent", reason or None, None
        answer = _approver_answer(value)
        rule = None
        if answer == "always" and request.always is not None:
            # "Always for this pattern": the pattern the person was shown (as it reads before
            # redaction), for the rest of the run.
            from ..approval.rules import RuleError, parse_rule

            try:
                rule = parse_rule(always_pattern or request.always, "allow", source="this run")
            except RuleError:
                rule = None
        return answer, None, rule


def _segments(view: Any) -> tuple[str, ...]:
    """Every segment of a shell command in the call, as a person must see them (after ;, &&, ||, |)."""
    if view is None:
        return ()
    out: list[str] = []
    for script in view.scripts():
        if script.compound:
            out.extend(script.shown_segments() or [script.raw])
    return tuple(out)


def _shown_view(view: Any, shown: Any) -> Any:
    """The call as a person is shown it: its view read again from the redacted arguments, so a
    command's segments show `-p [redacted: …]`, not the password (redaction reads the whole
    command: `echo PW | sudo -S …` is a password only with its pipe)."""
    if view is None:
        return None
    from ..approval.rules import CallView

    return CallView(view.ref, view.risk, shown, view.context)


def _shown_pattern(pattern: str | None) -> str | None:
    from ..redaction.redactor import redact_text

    return None if pattern is None else redact_text(pattern)[0]


def _suggest(ref: str, view: Any) -> str | None:
    """The pattern `a` ("always for this pattern") proposes for this call."""
    if view is None:
        return None
    from ..approval.suggest import suggest_pattern

    pattern = suggest_pattern(ref, view)
    return None if pattern == ref else pattern  # the bare ref: "always for this ref", as before


def host_rules(config: Any, extra: Any = (), *, deferred: bool = False) -> dict[str, Any]:
    """The gate's rules for a host: the config's, then `extra` (the settings'), and the defaults
    unless switched off. A rule that cannot be read is a ConfigError.

    With `deferred`, what can wait comes as a function that reads it, which `PolicyGate` calls
    on its first triage: the defaults, and the rule set when neither the config nor `extra` holds
    a rule (a rule given is read now, so a bad one is refused as the host is made). A run that
    makes no capability call then never loads the rules' modules (docs/performance.md)."""
    extra = list(extra)
    rules: Any = _no_rules
    if not deferred or config.rules or extra:
        from ..approval.rules import RuleError, RuleSet, parse_rules
        from ..errors import ConfigError

        try:
            rules = RuleSet([*parse_rules(list(config.rules), source="config"), *extra])
        except RuleError as exc:
            raise ConfigError(f"Invalid fabric-jev config: {exc}") from None
    defaults: Any = None
    if config.default_rules:
        defaults = _default_rules if deferred else _default_rules()
    return {"rules": rules, "defaults": defaults}


def _default_rules() -> Any:
    from ..approval.screen import default_rules

    return default_rules()


def _no_rules() -> Any:
    from ..approval.rules import RuleSet

    return RuleSet([])
