"""A launch: what it must pass before a worker is taken, then its run loaded.

`admit` holds the checks of contract §2 ("Launch is rejected"): pure ones
first (the program, the input, the refs, no widening of the caller's grant),
then the policy of what the launch itself reaches — a program launched from
inside another program's capability call (`jev.spawn`), a subscription to the
bound session (`jev.observe`) — each decision recorded for the new run's
audit trail. `load_run` then starts the admitted program in a worker.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..contract.config import EffectiveLimits, HostConfig
from ..contract.policy import BUILTIN_RISKS, denial_message
from ..contract.program import JEV_PROGRAM_REFS, Program, parse_program
from ..contract.values import JsonInput, ValueRejected, checked_json
from ..errors import CapabilityError, InputInvalid, ProgramInvalid
from ..typecheck.checker import check_for_launch
from ..typecheck.verdict import CheckReport
from .gate import CALLER_GRANT, AuditTrail, PolicyGate
from .observing import ObservationSource, UserText, user_text
from .registry import CapabilityRegistry
from .run import Run, RunServices

if TYPE_CHECKING:
    from ..contract.observe import ObserveOptions


class Admission:
    """A launch that passed every check: what its run is made of."""

    # A plain class: a dataclass costs several times as much to make, on every run's start-up.
    __slots__ = ("audit", "checked", "input_json", "intent", "observe", "program")

    def __init__(self, program: Program, input_json: str, intent: UserText, observe: ObserveOptions | None) -> None:
        self.program = program
        self.input_json = input_json  # the input, validated against the input schema, encoded once for the wire
        self.intent = intent  # read when a call is decided, not now
        self.observe = observe
        self.audit = AuditTrail()  # the launch-time decisions
        self.checked: CheckReport | None = None  # what the type check found (fabric_jev.typecheck)


async def load_run(admission: Admission, *, background: bool, limits: EffectiveLimits,
                   services: RunServices, observers: ObservationSource | None) -> Run:
    """The admitted program running in a worker, as a `Run` not yet driven, its observer
    subscribed. When loading fails nothing is left behind: no worker, no observer."""
    observation = None
    if admission.observe is not None and observers is not None:
        observation = observers.create(admission.observe)
    try:
        run = Run(admission.program, admission.input_json, background=background, limits=limits,
                  services=services, intent=admission.intent, observation=observation,
                  audit=admission.audit, checked=admission.checked)
        await run.load()
    except BaseException:
        if observation is not None:
            observation.cancel()
        raise
    if observation is not None:
        observation.attach(run.id, run.cancel)
    return run


def queue_run(admission: Admission, *, background: bool, limits: EffectiveLimits,
              services: RunServices, observers: ObservationSource | None) -> Run:
    """The admitted program as a queued `Run`: no worker yet (`Run.load` takes one when a slot
    is free), its observer subscribed from now on, so a stopped session stops it in the queue."""
    observation = None
    if admission.observe is not None and observers is not None:
        observation = observers.create(admission.observe)
    run = Run(admission.program, admission.input_json, background=background, limits=limits,
              services=services, intent=admission.intent, observation=observation,
              audit=admission.audit, checked=admission.checked, queued=True)
    if observation is not None:
        observation.attach(run.id, run.cancel)
    return run


async def admit(raw: Program | dict[str, Any], input: JsonInput, *, background: bool,
                observe: dict[str, Any] | None, intent: str | UserText | None,
                grant: Iterable[str] | None,
                capabilities: CapabilityRegistry, gate: PolicyGate, session_bound: bool,
                config: HostConfig) -> Admission:
    """Check a launch; raises the `LaunchRejected` that says why it was refused."""
    program = parse_program(raw)
    if observe is not None and not background:
        raise ProgramInvalid("observe is only available with spawn, not run")
    try:
        _, input_json = checked_json(input, program.input_schema, "input")
    except ValueRejected as exc:
        raise InputInvalid(str(exc)) from None
    _check_refs(program, capabilities, observing=observe is not None)
    admission = Admission(program, input_json, user_text(intent), None)
    # Type errors refuse the launch here, before any approver is asked or a worker taken.
    admission.checked = await check_for_launch(program, config, observed=observe is not None)
    if _within_grant(program, grant):  # launched from inside another program's capability call
        await _decide(admission, gate, "jev.spawn",
                      {"name": program.name, "requires": list(program.requires)})
    if observe is not None:
        from ..contract.observe import parse_observe  # the observer machinery, only when observing

        # Invalid options reject the launch even without a session.
        admission.observe = parse_observe(observe)
        if not session_bound:
            raise ProgramInvalid("observe needs a Main session bound to this host "
                                 "(host.bind_session)")
        # Subscribing to the session's future events needs read approval of it.
        await _decide(admission, gate, "jev.observe", observe)
    return admission


def _check_refs(program: Program, capabilities: CapabilityRegistry, *, observing: bool) -> None:
    for ref in program.requires:
        if ref.startswith("jev."):
            if ref not in JEV_PROGRAM_REFS:
                raise CapabilityError(
                    f"{ref} is a Jev lifecycle call; programs may require only "
                    "jev.evaluate and jev.advise (recursive lifecycle calls are not allowed)")
            if ref == "jev.advise" and not observing:
                raise CapabilityError("jev.advise needs spawn with observe")
        elif ref not in capabilities:
            raise CapabilityError(f"Missing capability for Jev program: {ref}")


def _within_grant(program: Program, grant: Iterable[str] | None) -> bool:
    """No widening: a launch holds no more than its caller. True when nested in a program."""
    parent = CALLER_GRANT.get()
    for holder, held in (("the program whose capability call launched it", parent),
                         ("the caller's grant", None if grant is None else frozenset(grant))):
        if held is None:
            continue
        wider = sorted(set(program.requires) - held)
        if wider:
            raise CapabilityError(f"a program may not hold more capabilities than {holder}: "
                                  f"{', '.join(wider)}")
    return parent is not None


async def _decide(admission: Admission, gate: PolicyGate, ref: str, arguments: Any) -> None:
    """The policy of a launch-time capability, recorded; a refusal rejects the launch."""
    risk = BUILTIN_RISKS[ref]
    policy, outcome, probability = await gate.decide(
        ref, risk, run_id="", run_name=admission.program.name, arguments=arguments,
        intent=admission.intent())
    if not outcome.allowed:
        raise CapabilityError(denial_message(ref, outcome))
    admission.audit.add(ref, risk, policy, outcome, probability)
