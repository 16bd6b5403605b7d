"""One approval request for every approver; standing answers, queued questions, overrides."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from fabric_jev import CapabilityCall, CapabilityRegistry, ConfigError, FixtureEvaluator, HostConfig, JevHost
from fabric_jev.approval.question import (
    ARGUMENT_STRING_CHARS,
    ARGUMENTS_SHOWN_CHARS,
    ClassifierVerdict,
    Unavailable,
    parse_typed_reply,
    printable,
)
from fabric_jev.contract.policy import PolicyOverrides
from fabric_jev.host.gate import AuditTrail, PolicyGate
from fabric_jev.host.registry import CallContext
from tests.conftest import program

CALLS = """
const out = [];
for (const [ref, n] of input) {
  try { out.push(await tools.call({ref, args: {n}})); } catch (e) { out.push(e.message); }
}
return out;
"""


async def echo(args: Any, ctx: CallContext) -> Any:
    return {"ref": ctx.ref, "n": args["n"]}


def registry() -> CapabilityRegistry:
    reg = CapabilityRegistry()
    reg.register("demo.write", echo, "write")
    reg.register("demo.other", echo, "write")
    reg.register("demo.shell", echo, "execute")
    return reg


def calls_program() -> dict[str, Any]:
    return program(CALLS, name="writer", requires=["demo.write", "demo.other", "demo.shell"])


def gate(approver: Any, **kwargs: Any) -> PolicyGate:
    return PolicyGate({"write": "ask", "execute": "ask"}, approver=approver, evaluator=None, threshold=0.5,
                      approver_timeout_s=kwargs.pop("timeout", 5), classifier_timeout_s=5,
                      max_request_bytes=1_048_576, **kwargs)


# ---------------------------------------------------------------- the request (pure)

def test_the_request_shows_redacted_clipped_printable_arguments() -> None:
    call = CapabilityCall(ref="demo.write", risk="write", policy="ask", run_id="r", run_name="w\x1b[2Kriter",
                          arguments={"text": "x" * 5000, "evil": "ok\x1b[1A\x9b2K\u202eevil\nline"},
                          intent="save it", classifier=ClassifierVerdict("ask", "safe 0.20 < 0.50"))
    assert call.program == "w\x1b[2Kriter"
    assert len(call.arguments["text"]) < ARGUMENT_STRING_CHARS + 40
    # Cut in the middle: the head and the tail both stay.
    assert call.arguments["text"] == "x" * 500 + " …[4000 characters cut]… " + "x" * 500
    assert len(call.arguments_text) <= ARGUMENTS_SHOWN_CHARS + 40
    facts = dict(call.facts())
    assert facts["program"] == "w\\u001b[2Kriter"
    assert facts["capability"] == "demo.write (risk write, policy ask)"
    assert facts["classifier"] == "ask: safe 0.20 < 0.50" and facts["user asked"] == "save it"
    shown = "".join(text for _, text in call.facts())
    for bad in ("\x1b", "\x9b", "\u202e", "\n"):
        assert bad not in shown
    assert "\\u009b" in facts["arguments"] and "\\u202e" in facts["arguments"]
    assert call.to_json()["classifier"] == {"decision": "ask", "reason": "safe 0.20 < 0.50", "probabilities": {}}


def test_printable_keeps_ordinary_text() -> None:
    assert printable("Grüße, 東京 — ok") == "Grüße, 東京 — ok"
    assert printable("a\tb\u00a0c") == "a\\u0009b\\u00a0c"


@pytest.mark.parametrize(("typed", "reply"), [
    ("y", "allow"), ("Y", "allow"), ("yes", "allow"), ("a", "always"), ("always", "always"), ("n", "deny"),
    ("no", "deny"), ("", "deny"), ("  \n", "deny"), ("N", "deny_all"), ("maybe", None), ("yy", None)])
def test_typed_replies(typed: str, reply: str | None) -> None:
    assert parse_typed_reply(typed) == reply


def test_overrides_deny_wins_and_refs_or_risks_match() -> None:
    overrides = PolicyOverrides(allow=("execute", "demo.write"), deny=("demo.shell",))
    assert overrides.find("demo.write", "write") == ("allow", "--allow demo.write")
    assert overrides.find("demo.shell", "execute") == ("deny", "--deny demo.shell")
    assert overrides.find("demo.run", "execute") == ("allow", "--allow execute")
    assert overrides.find("demo.other", "write") is None
    assert PolicyOverrides(allow=("demo.write",), deny=("write",)).find("demo.write", "write") == \
        ("deny", "--deny write")


def test_config_checks_the_overrides() -> None:
    assert HostConfig(allow=["execute", "browser.cdp", "execute"]).allow == ("execute", "browser.cdp")
    for bad in (["exec"], "write", ["Browser.cdp"], [3]):
        with pytest.raises(ConfigError, match="allow"):
            HostConfig.parse({"allow": bad})


# ---------------------------------------------------------------- the gate

@pytest.mark.anyio
async def test_always_allows_the_same_ref_for_the_rest_of_the_run() -> None:
    asked: list[str] = []

    async def approver(call: CapabilityCall) -> str:
        asked.append(call.ref)
        return "always"

    async with JevHost(capabilities=registry(), approver=approver) as host:
        env = await host.run(calls_program(), [["demo.write", 1], ["demo.write", 2], ["demo.other", 3]])
        again = await host.run(calls_program(), [["demo.write", 4]])
    assert env.result == [{"ref": "demo.write", "n": 1}, {"ref": "demo.write", "n": 2},
                          {"ref": "demo.other", "n": 3}]
    assert asked == ["demo.write", "demo.other", "demo.write"]  # a new run asks again
    assert [(a["decidedBy"], a["reason"], a.get("approver")) for a in env.to_json().get("approvals", [])] == [
        ("approver", "the approver allowed it, and this ref for the rest of the run", "application"),
        ("approver", "an earlier answer allowed this ref for the rest of the run", None),
        ("approver", "the approver allowed it, and this ref for the rest of the run", "application")]
    assert again.result == [{"ref": "demo.write", "n": 4}]


@pytest.mark.anyio
async def test_deny_all_refuses_every_later_question_of_the_run() -> None:
    asked: list[str] = []

    async def approver(call: CapabilityCall) -> str:
        asked.append(call.ref)
        return "deny_all"

    config = HostConfig(approvals={"read": "allow"})
    async with JevHost(config, capabilities=registry(), approver=approver) as host:
        env = await host.run(calls_program(), [["demo.write", 1], ["demo.other", 2], ["demo.shell", 3]])
    assert asked == ["demo.write"]
    assert env.result == [
        "Capability call denied: demo.write (the approver denied it and every later question of the run) "
        "(line 4, column 30)",
        "Capability call denied: demo.other (an earlier answer denied every later question of the run) "
        "(line 4, column 30)",
        "Capability call denied: demo.shell (an earlier answer denied every later question of the run) "
        "(line 4, column 30)"]
    assert env.approval_counts.to_json() == {"allowed": 0, "denied": 3}


@pytest.mark.anyio
async def test_an_approver_with_no_one_to_ask_says_why() -> None:
    class Nobody:
        name = "terminal"

        async def __call__(self, call: CapabilityCall) -> Unavailable:
            return Unavailable("there is no terminal to ask on")

    async with JevHost(capabilities=registry(), approver=Nobody()) as host:
        env = await host.run(calls_program(), [["demo.write", 1]])
    assert env.result == ["Capability call denied: demo.write "
                          "(write requires approval and there is no terminal to ask on) (line 4, column 30)"]
    [entry] = env.to_json()["approvals"]
    assert entry["decidedBy"] == "policy" and "approver" not in entry


@pytest.mark.anyio
async def test_the_approver_is_named_in_the_audit_trail() -> None:
    class Named:
        name = "terminal"

        async def __call__(self, call: CapabilityCall) -> str:
            return "allow"

    async with JevHost(capabilities=registry(), approver=Named()) as host:
        env = await host.run(calls_program(), [["demo.write", 1]])
    assert [(a["approver"], a["reason"]) for a in env.to_json().get("approvals", [])] == [("terminal", "the approver allowed it")]


@pytest.mark.anyio
async def test_overrides_decide_before_the_approver_and_show_in_the_trail() -> None:
    asked: list[str] = []

    async def approver(call: CapabilityCall) -> str:
        asked.append(call.ref)
        return "deny"

    config = HostConfig(allow=["write"], deny=["demo.other"])
    async with JevHost(config, capabilities=registry(), approver=approver) as host:
        env = await host.run(calls_program(), [["demo.write", 1], ["demo.other", 2], ["demo.shell", 3]])
    assert asked == ["demo.shell"]
    assert env.result[:2] == [{"ref": "demo.write", "n": 1},
                              "Capability call denied: demo.other (--deny demo.other denies it) (line 4, column 30)"]
    assert [(a["policy"], a.get("override"), a["reason"]) for a in env.to_json().get("approvals", [])] == [
        ("allow", "--allow write", "--allow write allows it"),
        ("deny", "--deny demo.other", "--deny demo.other denies it"),
        ("ask", None, "the approver denied it")]


@pytest.mark.anyio
async def test_questions_wait_their_turn_and_a_standing_answer_decides_the_queued_one() -> None:
    started: list[str] = []
    release = anyio.Event()

    async def approver(call: CapabilityCall) -> str:
        started.append(call.arguments["n"])
        await release.wait()
        return "always"

    g = gate(approver, timeout=0.5)  # a turn's timeout counts from the turn, not from the queue
    trail = AuditTrail()
    results: dict[int, Any] = {}

    async def ask(n: int) -> None:
        results[n] = await g.decide("demo.write", "write", run_id="r", run_name="w", arguments={"n": n},
                                    intent=None, audit=trail)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, 1)
        await wait_all_tasks_blocked()
        tg.start_soon(ask, 2)
        await wait_all_tasks_blocked()
        assert started == [1] and g.waiting == 1  # the second question is queued, not shown
        release.set()
    assert started == [1]  # the answer "always" decided the queued question without asking
    assert results[1][1].reason == "the approver allowed it, and this ref for the rest of the run"
    assert results[2][1].reason == "an earlier answer allowed this ref for the rest of the run"
    assert g.waiting == 0


@pytest.mark.anyio
async def test_a_queued_question_that_is_cancelled_leaves_the_queue() -> None:
    release = anyio.Event()

    async def approver(call: CapabilityCall) -> str:
        await release.wait()
        return "allow"

    g = gate(approver)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: g.decide("demo.write", "write", run_id="a", run_name="w", arguments={},
                                       intent=None))
        await wait_all_tasks_blocked()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await g.decide("demo.write", "write", run_id="b", run_name="w", arguments={}, intent=None)
        assert g.waiting == 0
        release.set()


@pytest.mark.anyio
async def test_the_library_approver_gets_the_classifier_verdict() -> None:
    seen: list[CapabilityCall] = []

    async def approver(call: CapabilityCall) -> str:
        seen.append(call)
        return "deny"

    evaluator = FixtureEvaluator({"answers": {"safe": {"noul": 0.2}, "secrets": {"noul": 0.0},
                                              "destructive": {"noul": 0.0}, "sessionOwned": {"noul": 0.0}}})
    g = PolicyGate({"write": "auto"}, approver=approver, evaluator=evaluator, threshold=0.5,
                   approver_timeout_s=5, classifier_timeout_s=5, max_request_bytes=1_048_576)
    _, outcome, probability = await g.decide("demo.write", "write", run_id="r", run_name="writer",
                                             arguments={"n": 1}, intent="write a file")
    [call] = seen
    assert call.program == "writer" and call.classifier is not None
    assert call.classifier.decision == "ask" and "0.20" in call.classifier.reason
    assert call.classifier.probabilities is not None and call.classifier.probabilities["safe"] == 0.2
    assert probability == 0.2 and not outcome.allowed


@pytest.mark.anyio
async def test_an_approver_that_answers_after_its_timeout_does_not_allow() -> None:
    """An approver that outlives its timeout (it swallowed the cancellation, as a thread-based
    `input()` awaited with `anyio.to_thread.run_sync` does) and then says allow is still a timeout."""
    async def approver(call: CapabilityCall) -> str:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            return "allow"
        raise AssertionError("unreachable")

    g = gate(approver, timeout=0.01)
    trail = AuditTrail()
    _, outcome, _ = await g.decide("demo.write", "write", run_id="r", run_name="w", arguments={}, intent=None,
                                   audit=trail)
    assert not outcome.allowed and outcome.reason == "the approver did not answer in time"


@pytest.mark.anyio
async def test_a_stopped_run_is_not_allowed_by_an_approver_that_swallowed_its_cancellation() -> None:
    asking = anyio.Event()

    async def approver(call: CapabilityCall) -> str:
        asking.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            return "always"
        raise AssertionError("unreachable")

    g = gate(approver)
    trail = AuditTrail()
    decided: list[Any] = []
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            async def ask() -> None:
                decided.append(await g.decide("demo.write", "write", run_id="r", run_name="w", arguments={},
                                              intent=None, audit=trail))
            tg.start_soon(ask)
            await asking.wait()
            scope.cancel()
    assert scope.cancelled_caught and decided == []  # the cancellation went on up; nothing was decided
    assert trail.standing.allowed_refs == set()  # and "always" was not remembered for the run


@pytest.mark.anyio
async def test_a_secret_in_the_users_words_is_redacted_in_the_question() -> None:
    """The "user asked" line is evidence like the arguments: the classifier sees it redacted,
    and so does every approver (a terminal's scrollback, an MCP client's log)."""
    seen: list[CapabilityCall] = []

    async def approver(call: CapabilityCall) -> str:
        seen.append(call)
        return "deny"

    token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    await gate(approver).decide("demo.write", "write", run_id="r", run_name="w", arguments={"n": 1},
                                intent=f"push it with token {token}")
    [call] = seen
    assert call.intent == "push it with token [redacted: github token]"
    assert token not in str(call.facts()) and token not in str(call.to_json())
