"""One path for a capability call: validate, decide the policy, record, invoke.

Capability calls are the guest's `tools.call`, `jev.evaluate` and
`program.advise`, and `JevHost.advise` made by the run's caller. Each passes
the same four steps, each check made once:

1. validate: the grant, then the request's shape; a malformed request is
   refused here and never reaches the classifier or an approver;
2. decide: the policy of the call's risk (`PolicyGate`);
3. record: the decision goes into the run's audit trail;
4. invoke: only an allowed call reaches its target.

A refused call is a catchable guest error. A call the policy refused gives
back the host call it was counted as, so it costs no budget.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

import anyio.abc

from ..capabilities import CallContext, CapabilityHandler
from ..contract.advice import ADVICE_SHAPE, AdviceRequest, parse_advice
from ..contract.budget import RunBudget
from ..contract.policy import BUILTIN_RISKS, Policy, PolicyOutcome, Risk, denial_message
from ..contract.program import Program, not_granted
from ..contract.values import JsonValue, normalize_json
from ..errors import CapabilityError, EvaluationError, HostCallRefused, JevError, ProgramInvalid, clip_error
from ..evaluators.base import Evaluator
from .failures import application_call, describe_failure
from .gate import CALLER_GRANT, AuditTrail, Pending, PolicyGate
from .observing import ObserverHandle, UserText
from .registry import CapabilityRegistry

if TYPE_CHECKING:  # the request's models load with a run's first jev.evaluate (start-up of `run`)
    from ..contract.evaluation import Evaluation, EvaluationRequest
    from ..contract.provenance import AnswererLog, Provenance
    from ..telemetry import CallTrace, RunTrace

#: Answers one guest call: (ok, JSON text of the value or the error message).
Settler = Callable[[bool, str], None]


class EvaluationListener(Protocol):
    """Told each answer a run's program receives from `jev.evaluate`, with the request it answers
    (`JevHost.run(on_evaluation=...)`). Called in the run's task as the answer is handed over: it
    must not block, and an exception it raises ends the run as a host error."""

    def __call__(self, request: EvaluationRequest, evaluation: Evaluation, /) -> None: ...


class CallServices(NamedTuple):
    """What capability calls of every run of one host are answered with."""

    evaluator: Evaluator
    capabilities: CapabilityRegistry
    gate: PolicyGate
    request_timeout_s: float
    max_request_bytes: int


class ValidCall(NamedTuple):
    """A capability call that passed validation: what the policy is asked about."""

    ref: str
    risk: Risk
    arguments: Any  # as the caller sent them; the gate redacts them for an approver
    target: EvaluationRequest | AdviceRequest | CapabilityHandler
    trace: CallTrace | None = None  # its span, when the run is traced (fabric_jev.telemetry)


class CapabilityCalls:
    """The capability calls of one run (part of its `Run`)."""

    def __init__(self, services: CallServices, program: Program, audit: AuditTrail,
                 budget: RunBudget, *, run_id: str, intent: UserText,
                 observation: ObserverHandle | None, input_json: str = "null",
                 trace: RunTrace | None = None) -> None:
        self._services = services
        self._program = program
        self._requires = frozenset(program.requires)
        self._audit = audit
        self._budget = budget
        self._run_id = run_id
        self._intent = intent
        self._observation = observation
        self._input_json = input_json
        self._origins: frozenset[str] | None = None
        #: Told every answer the program receives (the run's `on_evaluation`); None: nobody.
        self.listener: EvaluationListener | None = None
        #: Who answered this run's evaluations (made with the first answer).
        self._answerers: AnswererLog | None = None
        self._unnamed: Provenance | None = None
        self._trace = trace
        self._evaluator_names: tuple[str, str] | None = None  # (model, route), for the spans

    def answerers(self) -> Provenance | None:
        """The envelope's ``evaluator``: who answered this run's evaluations, None before any answer."""
        return None if self._answerers is None else self._answerers.summary()

    def _answered(self, evaluation: Evaluation) -> None:
        from ..contract.provenance import AnswererLog, Provenance

        provenance = evaluation.provenance
        if provenance is None:  # an application's own evaluator that does not say: its route names it
            if self._unnamed is None:
                model = evaluation.model[:128]
                try:
                    route = self._services.evaluator.status().route[:64]
                    self._unnamed = Provenance(route=route or "unknown", model=model, readout="unknown")
                except Exception:  # a broken status() cannot fail a run whose evaluation succeeded
                    self._unnamed = Provenance(route="unknown", model=model, readout="unknown")
            provenance = self._unnamed
        if self._answerers is None:
            self._answerers = AnswererLog()
        self._answerers.add(provenance)

    def start(self, kind: str, args: object, settle: Settler, tasks: anyio.abc.TaskGroup) -> None:
        """A guest's call (`evaluate`, `tool` or `advise`), answered through `settle`."""
        try:
            call = self._validate_guest(kind, args)
        except JevError as exc:
            settle(False, str(exc))
            return
        decided = self._services.gate.triage(call.ref, call.risk, call.arguments, self.origins)
        if isinstance(decided, Pending):  # the classifier or a person: deciding waits, in a task of the run
            tasks.start_soon(self._decide_then_invoke, call, settle, tasks, decided)
            return
        policy, outcome = decided
        if self._recorded(call, policy, outcome, None):
            self._invoke(call, settle, tasks)
        else:
            self._budget.refund_call()
            settle(False, denial_message(call.ref, outcome))

    async def call_now(self, ref: str, args: JsonValue) -> dict[str, object]:
        """The run's caller's call (`JevHost.advise`): the same path; refusals raise."""
        if ref == "jev.advise" and self._observation is None:
            raise ProgramInvalid("advise needs a run spawned with observe")
        call = self._validate(ref, args)
        policy, outcome, probability = await self._decide(call)
        if not self._recorded(call, policy, outcome, probability):
            raise CapabilityError(denial_message(ref, outcome))
        assert isinstance(call.target, AdviceRequest) and self._observation is not None
        if call.trace is None:
            return await self._observation.advise(call.target)
        try:
            delivered = await self._observation.advise(call.target)
        except JevError as exc:
            call.trace.failed(type(exc).__name__, str(exc))
            raise
        call.trace.succeeded(json.dumps(delivered))
        return delivered

    # ------------------------------------------------------------------ 1. validate

    def _validate_guest(self, kind: str, args: Any) -> ValidCall:
        if kind == "evaluate":
            return self._validate("jev.evaluate", args)
        if kind == "advise":
            return self._validate("jev.advise", args)
        if not isinstance(args, dict) or not isinstance(args.get("ref"), str) \
                or set(args) - {"ref", "args"}:
            raise HostCallRefused("tools.call expects {ref, args?}")
        if args["ref"] == "jev.advise":  # program.advise is its only door
            raise CapabilityError(not_granted("jev.advise"))
        return self._validate(args["ref"], args.get("args"))

    def _validate(self, ref: str, args: Any) -> ValidCall:
        """The grant, then the request's shape. Raises the refusal the caller sees."""
        if ref not in self._requires:
            raise CapabilityError(not_granted(ref))
        target: EvaluationRequest | AdviceRequest | CapabilityHandler | None
        if ref == "jev.evaluate":
            from ..contract.evaluation import validate_request

            target = validate_request(args, max_bytes=self._services.max_request_bytes)
        elif ref == "jev.advise":
            target = parse_advice(args)
            if target is None:
                raise HostCallRefused(ADVICE_SHAPE)
        else:
            target = self._services.capabilities.get(ref)
            if target is None:  # a jev.* ref has no handler: only its own door reaches it
                raise CapabilityError(not_granted(ref))
            return self._valid(ref, self._services.capabilities.risk(ref), args, target)
        return self._valid(ref, BUILTIN_RISKS[ref], args, target)

    def _valid(self, ref: str, risk: Risk, args: Any,
               target: EvaluationRequest | AdviceRequest | CapabilityHandler) -> ValidCall:
        if self._trace is None:
            return ValidCall(ref, risk, args, target)
        request = cast("EvaluationRequest", target) if ref == "jev.evaluate" else None
        if request is not None and self._evaluator_names is None:  # once per run: status may read a file
            try:
                status = self._services.evaluator.status()
                self._evaluator_names = (status.model, status.route)
            except Exception:  # a broken status() names nothing; the span says so, the call goes on
                self._evaluator_names = ("unknown", "unknown")
        model, system = self._evaluator_names or ("", "")
        return ValidCall(ref, risk, args, target, self._trace.call(ref, risk, args, request, model, system))

    # ------------------------------------------------------------------ 2. decide, 3. record

    @property
    def origins(self) -> frozenset[str]:
        """The http(s) origins the run's input names (the browser's `same-origin` default rule)."""
        if self._origins is None:
            self._origins = input_origins(self._input_json)
        return self._origins

    async def _decide(self, call: ValidCall, pending: Pending | None = None,
                      ) -> tuple[Policy, PolicyOutcome, float | None]:
        # The classifier or a person: the approval's own span, current while it is decided.
        with call.trace.asking(pending.policy) if call.trace is not None and pending is not None \
                else nullcontext():
            return await self._services.gate.decide(
                call.ref, call.risk, run_id=self._run_id, run_name=self._program.name,
                arguments=call.arguments, intent=self._intent(),  # the user's words now
                audit=self._audit, pending=pending, origins=self.origins)

    async def _decide_then_invoke(self, call: ValidCall, settle: Settler,
                                  tasks: anyio.abc.TaskGroup, pending: Pending | None = None) -> None:
        policy, outcome, probability = await self._decide(call, pending)
        if self._recorded(call, policy, outcome, probability):
            self._invoke(call, settle, tasks)
        else:
            self._budget.refund_call()
            settle(False, denial_message(call.ref, outcome))

    def _recorded(self, call: ValidCall, policy: Policy, outcome: PolicyOutcome,
                  probability: float | None) -> bool:
        """Record the decision in the audit trail; True when it allows the call."""
        self._audit.add(call.ref, call.risk, policy, outcome, probability)
        if call.trace is not None:
            call.trace.decided(policy, outcome, probability)
        return outcome.allowed

    # ------------------------------------------------------------------ 4. invoke

    def _invoke(self, call: ValidCall, settle: Settler, tasks: anyio.abc.TaskGroup) -> None:
        """The one place an allowed guest capability call reaches its target."""
        target, trace = call.target, call.trace
        if call.ref == "jev.evaluate":  # validated as an EvaluationRequest: its module is loaded
            from ..contract.evaluation import EvaluationRequest

            assert isinstance(target, EvaluationRequest)
            denied = self._budget.begin_evaluation()
            if denied is not None:
                if trace is not None:
                    trace.failed("budget_exhausted", denied)
                settle(False, denied)
                return
            tasks.start_soon(self._evaluate, target, settle, trace)
        elif isinstance(target, AdviceRequest):
            assert self._observation is not None  # launch requires observe for jev.advise
            tasks.start_soon(answer_when_done, self._observation.advise(target),
                             settle if trace is None else _traced(settle, trace))
        else:  # neither jev.* ref: the registry's handler
            ctx = CallContext(run_id=self._run_id, run_name=self._program.name, ref=call.ref)
            tasks.start_soon(self._tool, cast("CapabilityHandler", target), call.arguments, ctx, settle, trace)

    async def _evaluate(self, request: EvaluationRequest, settle: Settler, trace: CallTrace | None) -> None:
        services, budget = self._services, self._budget
        try:
            # Spans the evaluator makes (an instrumented HTTP client's) are the batch's children.
            with trace.current() if trace is not None else nullcontext():
                evaluation = await services.evaluator.evaluate(request, timeout=services.request_timeout_s)
        except EvaluationError as exc:
            budget.end_evaluation()
            if trace is not None:
                trace.failed(type(exc).__name__, str(exc))
            settle(False, clip_error(str(exc)))
            return
        except Exception as exc:  # an evaluator bug: the run sees a clean error that names it
            budget.end_evaluation()
            cause = describe_failure(exc, f"evaluate() of {type(services.evaluator).__name__}")
            if trace is not None:
                trace.failed(type(exc).__name__)
            settle(False, clip_error(f"jev.evaluate failed: {cause}"))
            return
        denied = budget.end_evaluation(evaluation.usage.input_tokens, evaluation.usage.output_tokens)
        self._answered(evaluation)  # even when withheld: it answered, and its tokens were counted
        if trace is not None:
            trace.answered(evaluation)
            if denied is not None:
                trace.failed("budget_exhausted", denied)
        if denied is not None:
            settle(False, denied)
            return
        if self.listener is not None:
            with application_call("on_evaluation listener"):
                self.listener(request, evaluation)
        if trace is not None:
            trace.succeeded()
        # The guest gets the answers; who answered is the envelope's to say.
        settle(True, json.dumps(evaluation.to_json(evaluator=False)))

    async def _tool(self, handler: CapabilityHandler, args: Any, ctx: CallContext,
                    settle: Settler, trace: CallTrace | None = None) -> None:
        # A program launched from inside this handler can hold no more than this one.
        CALLER_GRANT.set(self._requires)
        try:
            # The handler's own spans (and those of a run it launches) are the call's children.
            with trace.current() if trace is not None else nullcontext():
                value = normalize_json(await handler(args, ctx), f"{ctx.ref} result")
        except Exception as exc:  # JevError (ValueRejected too: a result that is not finite JSON) or a
            # handler's own: it reaches the guest as a message, not a trace
            message = clip_error(str(exc) if isinstance(exc, JevError)
                                 else f"{ctx.ref} failed: {describe_failure(exc, with_type=False)}")
            if trace is not None:
                trace.failed(type(exc).__name__, message)
            settle(False, message)
            return
        text = json.dumps(value)
        if trace is not None:
            trace.succeeded(text)
        settle(True, text)


def _traced(settle: Settler, trace: CallTrace) -> Settler:
    """`settle`, ending the call's span first (a refusal's `error.type`: JevError)."""
    def settled(ok: bool, text: str) -> None:
        if ok:
            trace.succeeded(text)
        else:
            trace.failed("JevError", text)
        settle(ok, text)

    return settled


async def answer_when_done(awaitable: Awaitable[object], settle: Settler) -> None:
    """Settle with what `awaitable` gives, or with the message of the JevError it raises."""
    try:
        value = await awaitable
    except JevError as exc:
        settle(False, clip_error(str(exc)))
        return
    settle(True, json.dumps(value))


#: At most this many origins are taken from one run's input.
MAX_INPUT_ORIGINS = 16


def input_origins(input_json: str) -> frozenset[str]:
    """The origins of the http(s) URLs among the strings of a run's input (at most 16)."""
    if "http" not in input_json:
        return frozenset()
    from ..approval.rules import origin_of

    found: set[str] = set()
    stack: list[Any] = [json.loads(input_json)]
    while stack and len(found) < MAX_INPUT_ORIGINS:
        value = stack.pop()
        if isinstance(value, str):
            origin = origin_of(value)
            if origin is not None:
                found.add(origin)
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return frozenset(found)
