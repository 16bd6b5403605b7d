"""Risks and policies: the truth table, the approver API, the audit trail, no widening."""

from __future__ import annotations

import itertools
import re
from typing import Any

import anyio
import pytest

from fabric_jev import CapabilityCall, CapabilityRegistry, FixtureEvaluator, HostConfig, JevHost
from fabric_jev.contract.policy import POLICIES, RISKS, resolve
from fabric_jev.errors import CapabilityError, ConfigError
from fabric_jev.host.gate import PolicyGate
from fabric_jev.host.registry import CallContext
from fabric_jev.testing import ScriptedEvaluator
from tests.conftest import program

pytestmark = pytest.mark.anyio
APPROVERS = ("absent", "allow", "deny", "raising", "slow")
CLASSIFIER = ("allow", "ask", "deny", "error")


def expected(policy: str, classifier: str, approver: str) -> bool:
    """The rule, written independently of the code under test."""
    if policy == "allow":
        return True
    if policy == "deny":
        return False
    if policy == "auto" and classifier == "allow":
        return True
    if policy == "auto" and classifier == "deny":
        return False
    return approver == "allow"


def answer(approver: str) -> str:
    return {"raising": "error", "slow": "timeout"}.get(approver, approver)


@pytest.mark.parametrize(("risk", "policy", "approver", "classifier"),
                         list(itertools.product(RISKS, POLICIES, APPROVERS, CLASSIFIER)))
def test_truth_table(risk: str, policy: str, approver: str, classifier: str) -> None:
    outcome = resolve(risk, policy, classifier=classifier if policy == "auto" else None,  # type: ignore[arg-type]
                      approver=answer(approver))  # type: ignore[arg-type]
    assert outcome.allowed is expected(policy, classifier, approver)
    # No error path allows: a failing or slow approver, a failing classifier.
    if approver in ("raising", "slow"):
        assert outcome.allowed is (policy == "allow" or (policy == "auto" and classifier == "allow"))
    if policy == "auto" and classifier == "error":
        assert outcome.allowed is (approver == "allow")
    if not outcome.allowed and policy in ("ask", "auto") and approver == "absent" \
            and not (policy == "auto" and classifier == "deny"):
        assert outcome.reason.startswith(f"{risk} requires approval and no approver is configured")


def classifier_evaluator(kind: str) -> Any:
    if kind == "error":
        return ScriptedEvaluator(RuntimeError("classifier evaluator bug"))
    safe = 0.99 if kind == "allow" else 0.1
    return FixtureEvaluator({"answers": {"safe": {"noul": safe}, "secrets": {"noul": 0.0},
                                         "destructive": {"noul": 0.0}, "sessionOwned": {"noul": 0.0}}})


def make_approver(kind: str, seen: list[CapabilityCall]) -> Any:
    if kind == "absent":
        return None

    async def approver(request: CapabilityCall) -> Any:
        seen.append(request)
        if kind == "raising":
            raise RuntimeError("approver bug")
        if kind == "slow":
            await anyio.sleep_forever()
        return kind  # "allow" or "deny"

    return approver


@pytest.mark.parametrize(("risk", "policy", "approver", "classifier"),
                         list(itertools.product(("write", "agent"), POLICIES, APPROVERS, ("allow", "ask", "error"))))
async def test_truth_table_through_the_gate(risk: str, policy: str, approver: str, classifier: str) -> None:
    seen: list[CapabilityCall] = []
    gate = PolicyGate({risk: policy}, approver=make_approver(approver, seen),  # type: ignore[dict-item]
                      evaluator=classifier_evaluator(classifier), threshold=0.5, approver_timeout_s=0.05,
                      classifier_timeout_s=5, max_request_bytes=1_048_576)
    decided, outcome, probability = await gate.decide(
        "shell.run", risk, run_id="r", run_name="n",  # type: ignore[arg-type]
        arguments={"cmd": "ls", "token": "s3cr3t-value"}, intent="list the files")
    assert decided == policy
    assert outcome.allowed is expected(policy, classifier, approver)
    consulted = policy == "ask" or (policy == "auto" and classifier != "allow")
    assert bool(seen) is (consulted and approver != "absent")
    for request in seen:  # the approver sees redacted arguments, never the secret
        assert "s3cr3t-value" not in repr(request.arguments) and request.risk == risk
    assert (probability is not None) is (policy == "auto" and classifier != "error")


def test_approvals_config() -> None:
    assert HostConfig().approvals == {"read": "allow", "write": "ask", "execute": "ask", "network": "ask",
                                      "agent": "ask"}
    for bad in ({"exec": "allow"}, {"write": "maybe"}, ["write"]):
        with pytest.raises(ConfigError):
            HostConfig.parse({"approvals": bad})


ECHO_PROGRAM = """
const out = [];
for (const n of [1, 2]) {
  try { out.push(await tools.call({ref: 'demo.write', args: {n, password: 'hunter2'}})); }
  catch (e) { out.push(e.message); }
}
return out;
"""


async def echo(args: Any, ctx: CallContext) -> Any:
    return {"wrote": args["n"]}


def registry() -> CapabilityRegistry:
    reg = CapabilityRegistry()
    reg.register("demo.write", echo, "write")
    return reg


async def test_without_an_approver_ask_is_a_catchable_denial_that_costs_no_budget() -> None:
    async with JevHost(capabilities=registry()) as host:
        env = await host.run(program(ECHO_PROGRAM, requires=["demo.write"]), None)
        assert host.status().runs[0].to_json()["approvals"] == {"allowed": 0, "denied": 2}
    message = ("Capability call denied: demo.write (write requires approval and no approver is configured) "
               "(line 4, column 30)")
    assert env.state == "completed" and env.result == [message, message]
    assert env.tool_calls == 0  # refused calls give their host call back
    assert [(a["ref"], a["risk"], a["policy"], a["decidedBy"], a["allowed"]) for a in env.to_json().get("approvals", [])] == \
        [("demo.write", "write", "ask", "policy", False)] * 2


async def test_the_approver_decides_and_sees_the_call() -> None:
    seen: list[CapabilityCall] = []

    async def approver(request: CapabilityCall) -> str:
        seen.append(request)
        return "allow" if request.arguments["n"] == 1 else "deny"

    async with JevHost(capabilities=registry(), approver=approver) as host:
        env = await host.run(program(ECHO_PROGRAM, requires=["demo.write"]), None, intent="write one")
    assert env.result == [{"wrote": 1}, "Capability call denied: demo.write (the approver denied it) (line 4, column 30)"]
    assert [a["decidedBy"] for a in env.to_json().get("approvals", [])] == ["approver", "approver"]
    assert [a["allowed"] for a in env.to_json().get("approvals", [])] == [True, False]
    assert env.tool_calls == 1 and env.approval_counts.to_json() == {"allowed": 1, "denied": 1}
    assert seen[0].ref == "demo.write" and seen[0].intent == "write one" and seen[0].policy == "ask"
    assert seen[0].arguments["password"] == "[redacted: password value]"
    assert "hunter2" not in repr(env.to_json())


async def test_auto_runs_the_classifier_with_the_hosts_threshold() -> None:
    config = HostConfig(approvals={"write": "auto"}, auto_approval_threshold=0.95)
    evaluator = classifier_evaluator("allow")  # safe 0.99 ≥ 0.95
    async with JevHost(config, capabilities=registry(), evaluator=evaluator) as host:
        env = await host.run(program(ECHO_PROGRAM, requires=["demo.write"]), None, intent="write twice")
    assert env.result == [{"wrote": 1}, {"wrote": 2}]
    assert [(a["decidedBy"], a["probability"]) for a in env.to_json().get("approvals", [])] == [("classifier", 0.99)] * 2
    config = HostConfig(approvals={"write": "auto"}, auto_approval_threshold=1.0)
    async with JevHost(config, capabilities=registry(), evaluator=evaluator) as host:
        env = await host.run(program(ECHO_PROGRAM, requires=["demo.write"]), None, intent="write twice")
    assert env.result[0].startswith("Capability call denied: demo.write (write requires approval")


async def test_a_denied_evaluate_reserves_no_evaluation() -> None:
    config = HostConfig(approvals={"read": "deny"})
    code = """try { await jev.evaluate({state: 'x', questions: {q: {type: 'noul', instructions: 'y?'}}}); }
              catch (e) { return e.message; }"""
    async with JevHost(config, evaluator=classifier_evaluator("allow")) as host:
        env = await host.run(program(code, requires=["jev.evaluate"]), None)
    assert env.result == "Capability call denied: jev.evaluate (the read policy denies it) (line 1, column 17)"
    assert env.evaluations == 0 and env.tool_calls == 0


# ---------------------------------------------------------------- no widening (item 3)

NESTED = """return await tools.call({ref: 'demo.launch', args: null});"""


async def test_a_program_launched_from_a_programs_call_cannot_hold_more() -> None:
    reg = CapabilityRegistry()
    holder: dict[str, JevHost] = {}

    async def launch(args: Any, ctx: CallContext) -> Any:
        child = program("return await tools.call({ref: 'demo.write', args: {n: 9}});",
                        requires=["demo.write"])
        try:
            env = await holder["host"].run(child, None)
        except CapabilityError as exc:
            return str(exc)
        return env.result

    reg.register("demo.launch", launch, "read")
    reg.register("demo.write", echo, "write")
    config = HostConfig(approvals={"write": "allow", "agent": "allow"})
    async with JevHost(config, capabilities=reg) as host:
        holder["host"] = host
        narrow = await host.run(program(NESTED, requires=["demo.launch"]), None)
        wide = await host.run(program(NESTED, requires=["demo.launch", "demo.write"]), None)
    assert narrow.result == ("a program may not hold more capabilities than the program whose "
                             "capability call launched it: demo.write")
    assert wide.result == {"wrote": 9}


async def test_spawning_from_a_program_is_an_agent_risk_call() -> None:
    reg = CapabilityRegistry()
    holder: dict[str, JevHost] = {}

    async def launch(args: Any, ctx: CallContext) -> Any:
        try:
            await holder["host"].run(program("return 1;"), None)
        except CapabilityError as exc:
            return str(exc)
        return "launched"

    reg.register("demo.launch", launch, "read")
    async with JevHost(capabilities=reg) as host:  # agent: ask, and no approver
        holder["host"] = host
        env = await host.run(program(NESTED, requires=["demo.launch"]), None)
    assert env.result == ("Capability call denied: jev.spawn (agent requires approval and no approver "
                          "is configured)")


async def test_a_caller_with_a_narrower_grant_cannot_widen_it() -> None:
    async with JevHost(capabilities=registry()) as host:
        with pytest.raises(CapabilityError, match=r"more capabilities than the caller's grant: demo\.write"):
            await host.run(program("return 1;", requires=["demo.write"]), None, grant=["demo.read"])
        env = await host.run(program("return 1;", requires=["demo.write"]), None, grant=["demo.write"])
    assert env.result == 1


# ---------------------------------------------------------------- validate before deciding (issue 24)

MALFORMED = """
const out = [];
for (const bad of [null, 'text', {state: 'x'}, {state: 'x', questions: {}},
                   {state: 'x', questions: {q: {type: 'noul', instructions: 'y?'}}, extra: 1}]) {
  try { await jev.evaluate(bad); out.push('sent'); } catch (e) { out.push(e.message); }
  try { await tools.call({ref: 'jev.evaluate', args: bad}); out.push('sent'); } catch (e) { out.push(e.message); }
}
try { await tools.call({ref: 'demo.write', args: {n: 1}, extra: true}); } catch (e) { out.push(e.message); }
return out;
"""


@pytest.mark.parametrize("policy", ["ask", "auto"])
async def test_a_malformed_request_never_reaches_an_approver_or_the_classifier(policy: str) -> None:
    seen: list[CapabilityCall] = []

    async def approver(request: CapabilityCall) -> str:
        seen.append(request)
        return "allow"

    evaluator = classifier_evaluator("ask")  # the classifier's evaluator: it would be asked first
    config = HostConfig(approvals={"read": policy, "write": policy})  # type: ignore[dict-item]
    async with JevHost(config, capabilities=registry(), evaluator=evaluator, approver=approver) as host:
        env = await host.run(program(MALFORMED, requires=["jev.evaluate", "demo.write"]), None)
    assert env.state == "completed", env.error
    assert "sent" not in env.result
    # Each message ends with the place of its call; what matters here is the message itself.
    messages = [re.sub(r" \(line \d+, column \d+\)$", "", m) for m in env.result]
    assert messages != env.result
    env = env.model_copy(update={"result": messages})
    assert env.result[0] == env.result[1] == "jev.evaluate expects an object {state, questions, model?}"
    assert env.result[6] == env.result[7] == "jev.evaluate needs 1-128 questions keyed by id"
    assert env.result[8] == "jev.evaluate request has unknown keys: extra"
    assert env.result[-1] == "tools.call expects {ref, args?}"
    assert seen == [] and evaluator.calls == 0  # neither the approver nor the classifier was asked
    assert env.approvals == () and env.evaluations == 0


async def test_malformed_advice_from_the_caller_never_reaches_an_approver() -> None:
    from fabric_jev import MainSession
    from fabric_jev.errors import HostCallRefused

    seen: list[CapabilityCall] = []

    async def approver(request: CapabilityCall) -> str:
        seen.append(request)
        return "allow"

    async def deliver(advice: Any) -> None:
        return None

    async with JevHost(HostConfig(approvals={"agent": "ask"}), approver=approver) as host:
        host.bind_session(MainSession("s", deliver=deliver))
        env = await host.spawn(program("await program.nextEvent();", requires=["jev.advise"]), None,
                               observe={"events": ["input"], "delivery": "steer"})
        with pytest.raises(HostCallRefused, match=r"program\.advise expects \{eventId, message\}"):
            await host.advise(env.id, {"eventId": "e", "message": ""})
        assert seen == [] and [a.ref for a in host.envelope(env.id).approvals] == ["jev.observe"]
