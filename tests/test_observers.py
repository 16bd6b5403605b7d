"""Observers and advice (contract §8): the session side directly, then through programs."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from fabric_jev import (
    CapabilityError,
    FixtureEvaluator,
    HostConfig,
    JevError,
    JevHost,
    MainSession,
    ProgramInvalid,
    RunState,
    ToolResult,
)
from fabric_jev.contract.advice import AdviceRequest, parse_advice
from fabric_jev.contract.observe import parse_observe
from fabric_jev.evaluators.base import EvaluatorStatus
from fabric_jev.host.observers import Advice, Observer
from tests.conftest import program, seed_starters

#: Advice is an agent-risk call; these tests' application allows it.
ADVICE_ALLOWED: dict[str, Any] = {"agent": "allow"}

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def session_with(deliveries: list[Advice], *, fail: bool = False) -> tuple[MainSession, Clock]:
    clock = Clock()

    async def deliver(advice: Advice) -> None:
        if fail:
            raise RuntimeError("transport down")
        deliveries.append(advice)

    return MainSession("s-1", deliver=deliver, clock=clock), clock


def observer(session: MainSession, **options: Any) -> Observer:
    raw = {"events": ["input", "turn_end", "tool_error", "agent_end", "agent_settled"], **options}
    return session.create(parse_observe(raw))


async def consume(obs: Observer) -> dict[str, Any]:
    with anyio.fail_after(1):
        return await obs.next_event()


# ---------------------------------------------------------------- options


@pytest.mark.parametrize(("raw", "needle"), [
    ({"events": []}, "events"),
    ({"events": ["input", "input"]}, "unique"),
    ({"events": ["typing"]}, "events"),
    ({"events": ["input"], "include": ["thinking"]}, "include"),
    ({"events": ["input"], "maxChars": 100}, "maxChars"),
    ({"events": ["input"], "maxChars": 9000}, "maxChars"),
    ({"events": ["input"], "queueSize": 0}, "queueSize"),
    ({"events": ["input"], "queueSize": 33}, "queueSize"),
    ({"events": ["input"], "maxEventAgeMs": 50}, "maxEventAgeMs"),
    ({"events": ["input"], "maxAdvice": 17}, "maxAdvice"),
    ({"events": ["input"], "delivery": "email"}, "delivery"),
    ({"events": ["input"], "triggerTurn": True}, "triggerTurn needs a delivery"),
    ({"events": ["input"], "bogus": 1}, "bogus"),
])
def test_observe_options_are_checked(raw: dict[str, Any], needle: str) -> None:
    with pytest.raises(ProgramInvalid, match=needle):
        parse_observe(raw)


def test_observe_defaults() -> None:
    o = parse_observe({"events": ["turn_end"]})
    assert (o.include, o.max_chars, o.queue_size, o.max_event_age_ms, o.delivery, o.trigger_turn,
            o.max_advice) == ((), 4096, 8, 30000, None, False, 4)


# ---------------------------------------------------------------- payloads


async def test_event_shape_and_no_text_without_include() -> None:
    session, _ = session_with([])
    obs = observer(session)
    session.user_input("hello there")
    ev = await consume(obs)
    assert set(ev) == {"id", "sequence", "event", "source", "sessionId", "revision", "at", "payload",
                       "truncated"}
    assert ev["event"] == "input" and ev["source"] == "main" and ev["sessionId"] == "s-1"
    assert ev["payload"] == {"turnIndex": 1, "automatic": False} and ev["truncated"] is False


async def test_each_include_on_each_event_kind() -> None:
    session, _ = session_with([])
    obs = observer(session, include=["inputText", "assistantText", "toolResults"])
    session.user_input("run the tests")
    session.turn_end(["Done.", "All good."], stop_reason="end_turn",
                     tool_results=[ToolResult("bash", False, "3 passed")])
    session.tool_error("bash", "exit 1")
    session.agent_end()
    session.agent_settled()
    got = [await consume(obs) for _ in range(5)]
    assert got[0]["payload"] == {"turnIndex": 1, "automatic": False, "inputText": "run the tests"}
    assert got[1]["payload"] == {"turnIndex": 1, "stopReason": "end_turn", "toolResultCount": 1,
                                 "assistantText": ["Done.", "All good."],
                                 "toolResults": [{"toolName": "bash", "isError": False, "text": "3 passed"}]}
    assert got[2]["payload"] == {"turnIndex": 1, "toolName": "bash", "isError": True,
                                 "toolResults": [{"toolName": "bash", "isError": True, "text": "exit 1"}]}
    assert got[3]["payload"] == {"turnIndex": 1} and got[4]["payload"] == {"turnIndex": 1}


async def test_include_only_what_was_asked() -> None:
    session, _ = session_with([])
    obs = observer(session, include=["toolResults"])
    session.user_input("secret plan")
    session.turn_end(["prose"], tool_results=[ToolResult("t", False, "out")])
    first, second = await consume(obs), await consume(obs)
    assert "inputText" not in first["payload"]
    assert "assistantText" not in second["payload"] and second["payload"]["toolResults"][0]["text"] == "out"


async def test_block_and_result_caps_and_one_char_budget() -> None:
    session, _ = session_with([])
    obs = observer(session, include=["assistantText", "toolResults"], maxChars=300)
    session.turn_end([f"block {i} " + "x" * 20 for i in range(40)],
                     tool_results=[ToolResult("t", False, "y" * 50) for _ in range(20)])
    ev = await consume(obs)
    payload = ev["payload"]
    texts = payload["assistantText"] + [r["text"] for r in payload["toolResults"]]
    assert sum(len(t) for t in texts) == 300 and ev["truncated"] is True
    assert len(payload["assistantText"]) <= 32 and len(payload["toolResults"]) <= 16
    assert payload["toolResultCount"] == 20


async def test_redaction_before_anything_leaves() -> None:
    session, _ = session_with([])
    obs = observer(session, include=["inputText", "toolResults"])
    session.user_input("my key is sk-abcdefghijklmnopqrstuvwx and password=hunter2")
    session.tool_error("http", "Authorization: Bearer abcdefghijklmnop\nok")
    a, b = await consume(obs), await consume(obs)
    assert "sk-abcdef" not in str(a) and "hunter2" not in str(a)
    assert "[redacted: api key]" in a["payload"]["inputText"]
    assert "abcdefghijklmnop" not in str(b) and b["payload"]["toolResults"][0]["text"].endswith("\nok")


async def test_ordinary_text_is_not_redacted() -> None:
    session, _ = session_with([])
    obs = observer(session, include=["inputText"])
    text = "The token budget ran out; the password check passed; basic tests OK."
    session.user_input(text)
    assert (await consume(obs))["payload"]["inputText"] == text


# ---------------------------------------------------------------- queue


async def test_overflow_drops_the_oldest() -> None:
    session, _ = session_with([])
    obs = observer(session, queueSize=2)
    for i in range(5):
        session.user_input(f"m{i}")
    assert obs.counts().to_json() == {"events": ["input", "turn_end", "tool_error", "agent_end", "agent_settled"],
                            "received": 5, "consumed": 0, "dropped": 3, "queued": 2,
                            "adviceDelivered": 0, "adviceSuppressed": 0}
    assert (await consume(obs))["sequence"] == 4


async def test_old_events_are_discarded_at_dequeue() -> None:
    session, clock = session_with([])
    obs = observer(session, maxEventAgeMs=100)
    session.user_input("old")
    clock.now += 0.2
    session.user_input("fresh")
    ev = await consume(obs)
    assert ev["payload"]["turnIndex"] == 2 and obs.dropped == 1 and obs.consumed == 1


async def test_only_subscribed_events_and_no_replay() -> None:
    session, _ = session_with([])
    session.user_input("before the observer existed")
    obs = session.create(parse_observe({"events": ["turn_end"]}))
    session.user_input("not subscribed")
    session.turn_end(["t"])
    assert obs.received == 1 and (await consume(obs))["event"] == "turn_end"


async def test_second_pending_next_event_is_refused() -> None:
    session, _ = session_with([])
    obs = observer(session)
    errors: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(obs.next_event)
        await anyio.wait_all_tasks_blocked()
        try:
            await obs.next_event()
        except JevError as exc:
            errors.append(str(exc))
        tg.cancel_scope.cancel()
    assert errors == ["Only one program.nextEvent may be pending at a time"]


# ---------------------------------------------------------------- advice


async def turn(session: MainSession, obs: Observer, text: str = "go") -> dict[str, Any]:
    session.user_input(text)
    session.turn_end(["done"])
    await consume(obs)
    return await consume(obs)


MSG = "Check the failing verification before claiming completion."


async def test_delivered_advice_shape() -> None:
    got: list[Advice] = []
    session, _ = session_with(got)
    obs = observer(session, delivery="followUp", triggerTurn=True)
    ev = await turn(session, obs)
    assert await obs.advise(AdviceRequest(ev["id"], MSG)) == {"delivered": True}
    assert got == [Advice(MSG, "followUp", True, "s-1", ev["id"], "")]
    assert obs.counts().advice_delivered == 1


async def test_reason_disabled() -> None:
    session, _ = session_with([])
    obs = observer(session)
    ev = await turn(session, obs)
    assert await obs.advise(AdviceRequest(ev["id"], MSG)) == {"delivered": False, "reason": "disabled"}


async def test_reason_stale_not_the_last_consumed() -> None:
    session, _ = session_with([])
    obs = observer(session, delivery="steer")
    session.user_input("a")
    first = await consume(obs)
    session.turn_end(["x"])
    await consume(obs)
    assert (await obs.advise(AdviceRequest(first["id"], MSG)))["reason"] == "stale"


async def test_reason_stale_revision_moved() -> None:
    session, _ = session_with([])
    obs = observer(session, delivery="steer")
    ev = await turn(session, obs)
    session.compaction()
    assert (await obs.advise(AdviceRequest(ev["id"], MSG)))["reason"] == "stale"


async def test_reason_stale_too_old() -> None:
    session, clock = session_with([])
    obs = observer(session, delivery="steer", maxEventAgeMs=1000)
    ev = await turn(session, obs)
    clock.now += 1.5
    assert (await obs.advise(AdviceRequest(ev["id"], MSG)))["reason"] == "stale"


async def test_reason_stale_main_halted() -> None:
    session, _ = session_with([])
    obs = observer(session, delivery="steer")
    ev = await turn(session, obs)
    session.halted = True  # what abort sets, before observers are torn down
    assert (await obs.advise(AdviceRequest(ev["id"], MSG)))["reason"] == "stale"


async def test_reason_duplicate() -> None:
    got: list[Advice] = []
    session, _ = session_with(got)
    obs = observer(session, delivery="steer")
    ev = await turn(session, obs)
    assert (await obs.advise(AdviceRequest(ev["id"], MSG)))["delivered"] is True
    assert (await obs.advise(AdviceRequest(ev["id"], MSG)))["reason"] == "duplicate"


async def test_reason_budget() -> None:
    got: list[Advice] = []
    session, _ = session_with(got)
    obs = observer(session, delivery="steer", maxAdvice=1)
    first = await turn(session, obs, "one")
    assert (await obs.advise(AdviceRequest(first["id"], MSG)))["delivered"] is True
    second = await turn(session, obs, "two")
    assert (await obs.advise(AdviceRequest(second["id"], MSG)))["reason"] == "budget"
    assert len(got) == 1


async def test_reason_feedback_and_automatic_input_keeps_the_latch() -> None:
    got: list[Advice] = []
    session, _ = session_with(got)
    obs = observer(session, delivery="steer")
    first = await turn(session, obs, "real input")
    assert (await obs.advise(AdviceRequest(first["id"], MSG)))["delivered"] is True
    session.user_input("continuation", automatic=True)
    session.turn_end(["again"])
    await consume(obs)
    ev = await consume(obs)
    assert (await obs.advise(AdviceRequest(ev["id"], MSG)))["reason"] == "feedback"
    ev = await turn(session, obs, "real input again")
    assert (await obs.advise(AdviceRequest(ev["id"], MSG)))["delivered"] is True
    assert len(got) == 2


async def test_reason_delivery_failed_is_not_retried() -> None:
    session, _ = session_with([], fail=True)
    obs = observer(session, delivery="steer")
    ev = await turn(session, obs)
    assert (await obs.advise(AdviceRequest(ev["id"], MSG)))["reason"] == "delivery_failed"
    # The latch was set before delivering, and the attempt counted: no retry path.
    assert session.latch.set and obs.attempts == 1
    assert (await obs.advise(AdviceRequest(ev["id"], MSG)))["reason"] == "duplicate"


async def test_two_observers_on_one_input_deliver_once() -> None:
    got: list[Advice] = []
    session, _ = session_with(got)
    a, b = observer(session, delivery="steer"), observer(session, delivery="steer")
    session.user_input("go")
    session.turn_end(["done"])
    ev_a = [await consume(a), await consume(a)][1]
    ev_b = [await consume(b), await consume(b)][1]
    results = [await a.advise(AdviceRequest(ev_a["id"], MSG)),
               await b.advise(AdviceRequest(ev_b["id"], MSG))]
    assert results == [{"delivered": True}, {"delivered": False, "reason": "feedback"}]
    assert len(got) == 1


@pytest.mark.parametrize("args", [None, {"eventId": "x"}, {"eventId": "x", "message": ""},
                                  {"eventId": "x", "message": "m" * 2001}, {"eventId": 1, "message": "m"}])
def test_malformed_advice_is_refused_before_anything_else(args: Any) -> None:
    assert parse_advice(args) is None


# ---------------------------------------------------------------- through programs

ECHO = """
for (;;) {
  const ev = await program.nextEvent();
  await program.emit({id: ev.id, event: ev.event, text: ev.payload.inputText ?? null});
}
"""


async def test_programs_observe_and_abort_cancels_them() -> None:
    session = MainSession("s-2")
    async with JevHost(HostConfig(max_concurrent_runs=4, approvals=ADVICE_ALLOWED)) as host:
        host.bind_session(session)
        env = await host.spawn(program(ECHO, inputSchema={"type": "null"}), None,
                               observe={"events": ["input"], "include": ["inputText"]})
        session.user_input("first")
        got = await host.progress(env.id, after=0)
        assert got.events[0].value["text"] == "first"
        assert got.observation is not None
        assert got.observation.to_json() == {"events": ["input"], "received": 1, "consumed": 1, "dropped": 0,
                                             "queued": 0, "adviceDelivered": 0, "adviceSuppressed": 0}
        session.abort()
        done = await host.wait(env.id)
        assert done.state is RunState.CANCELLED
        session.user_input("after abort")  # nothing restarts, nothing is received
        assert host.envelope(env.id).observation.received == 1


async def test_navigation_and_shutdown_cancel_observers() -> None:
    for end in ("navigate", "shutdown"):
        session = MainSession()
        async with JevHost(HostConfig(approvals=ADVICE_ALLOWED)) as host:
            host.bind_session(session)
            env = await host.spawn(program(ECHO), None, observe={"events": ["input"]})
            getattr(session, end)()
            assert (await host.wait(env.id)).state is RunState.CANCELLED


async def test_next_event_without_observe_and_observe_without_session() -> None:
    async with JevHost(HostConfig(approvals=ADVICE_ALLOWED)) as host:
        env = await host.run(program("try { await program.nextEvent(); } catch (e) { return e.message; }"), None)
        assert env.result == "program.nextEvent needs spawn with observe (line 1, column 21)"
        with pytest.raises(ProgramInvalid, match="bind_session"):
            await host.spawn(program(ECHO), None, observe={"events": ["input"]})
        with pytest.raises(ProgramInvalid, match="Invalid observe options"):
            await host.spawn(program(ECHO), None, observe={"events": ["nope"]})


async def test_seed_verification_advisor_delivers_exactly_one_advice() -> None:
    advisor = seed_starters()["observer"]
    delivered: list[Advice] = []

    async def deliver(advice: Advice) -> None:
        delivered.append(advice)

    session = MainSession("main", deliver=deliver)
    fixture = FixtureEvaluator({"answers": {"contradiction": {"noul": 0.05}}, "rules": [
        {"question": "contradiction", "stateContains": "FAILED", "answer": {"noul": 0.97}}]})
    async with JevHost(HostConfig(approvals=ADVICE_ALLOWED), evaluator=fixture) as host:
        host.bind_session(session)
        # The verification-advisor observer of the Jev skill, as the seed writes it.
        env = await host.spawn(advisor["program"], advisor["input"], observe=advisor["observe"])
        # Turn 1: honest report. Turn 2: claims success over a failing check. Turn 3: automatic
        # continuation repeating the claim: the latch holds, so no second advice.
        session.user_input("Fix the login bug")
        session.turn_end(["I looked at the code."], tool_results=[ToolResult("pytest", False, "12 passed")])
        first = await host.progress(env.id, after=0)
        session.user_input("Is it done?")
        session.turn_end(["All done, everything works!"],
                         tool_results=[ToolResult("pytest", True, "1 FAILED test_login")])
        second = await host.progress(env.id, after=1)
        session.user_input("continue", automatic=True)
        session.turn_end(["Done, it works."], tool_results=[ToolResult("pytest", True, "1 FAILED test_login")])
        third = await host.progress(env.id, after=2)
        status = host.envelope(env.id)
        await host.stop(env.id)
    assert first.events[0].value["advice"] is None
    assert second.events[0].value["advice"] == {"delivered": True}
    assert third.events[0].value["advice"] == {"delivered": False, "reason": "feedback"}
    assert [a.message for a in delivered] == [
        "Check the reported failing verification before claiming completion."]
    assert delivered[0].delivery == "steer" and delivered[0].trigger_turn is False
    assert status.observation.advice_delivered == 1 and status.observation.advice_suppressed == 1
    assert fixture.calls == 3


def test_the_documented_example_runs() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, str(root / "examples/observer-session/simulate.py")],
                          capture_output=True, text=True, timeout=60, cwd=root)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines.count("advice (steer): Check the reported failing verification before claiming completion.") == 1
    assert "observer state: cancelled" in lines


async def test_host_advise_uses_the_same_checks() -> None:
    delivered: list[Advice] = []

    async def deliver(advice: Advice) -> None:
        delivered.append(advice)

    session = MainSession("s-host", deliver=deliver)
    async with JevHost(HostConfig(approvals=ADVICE_ALLOWED)) as host:
        host.bind_session(session)
        env = await host.spawn(program(ECHO, requires=["jev.advise"]), None,
                               observe={"events": ["input"], "delivery": "followUp"})
        session.user_input("hello")
        got = await host.progress(env.id, after=0)
        event_id = got.events[0].value["id"]
        assert await host.advise(env.id, {"eventId": event_id, "message": "hi"}) == {"delivered": True}
        assert await host.advise(env.id, {"eventId": event_id, "message": "hi"}) == {
            "delivered": False, "reason": "duplicate"}
        plain = await host.spawn(program(ECHO), None, observe={"events": ["input"]})
        with pytest.raises(JevError, match=r"jev\.advise"):
            await host.advise(plain.id, {"eventId": event_id, "message": "x"})
    assert [a.delivery for a in delivered] == ["followUp"]


# ---------------------------------------------------------------- freshness (issue 13 item 5)

ONE_ADVICE = """
const event = await program.nextEvent();
const result = await jev.evaluate({state: {turn: event.payload},
  questions: {drift: {type: "noul", instructions: "Does this turn claim completion without evidence?"}}});
return await program.advise({eventId: event.id, message: "Verify the tests before claiming completion."});
"""


class Gated:
    """An evaluator that holds its answer until released: an evaluation in flight."""

    def __init__(self) -> None:
        self.received = anyio.Event()
        self.release = anyio.Event()
        self.calls = 0

    async def evaluate(self, request: Any, *, timeout: float, cancel: Any = None) -> Any:
        self.calls += 1
        self.received.set()
        await self.release.wait()
        return await FixtureEvaluator({"answers": {"drift": {"noul": 0.99}}}).evaluate(request, timeout=timeout)

    def status(self) -> EvaluatorStatus:
        return EvaluatorStatus("test", "test")

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize(("during", "advice"), [
    ("turn_start", {"delivered": True}),
    ("turn_end", {"delivered": False, "reason": "stale"}),
    ("tool_error", {"delivered": True}),
])
async def test_a_newer_completed_turn_during_inference_makes_advice_stale(during: str, advice: Any) -> None:
    delivered: list[Advice] = []

    async def deliver(a: Advice) -> None:
        delivered.append(a)

    session = MainSession("main", deliver=deliver)
    evaluator = Gated()
    async with JevHost(HostConfig(approvals=ADVICE_ALLOWED), evaluator=evaluator) as host:
        host.bind_session(session)
        env = await host.spawn(program(ONE_ADVICE, requires=["jev.evaluate", "jev.advise"]), None,
                               observe={"events": ["turn_end"], "include": ["assistantText"], "delivery": "steer"})
        session.user_input("Fix it")
        session.turn_end(["Completed without running tests"])
        await evaluator.received.wait()
        if during == "turn_start":
            session.turn_start()
        elif during == "turn_end":
            session.turn_end(["Next turn"])
        else:
            session.tool_error("bash", "exit 1")
        evaluator.release.set()
        final = await host.wait(env.id)
    assert final.state == "completed" and final.result == advice
    assert len(delivered) == (1 if advice["delivered"] else 0)


@pytest.mark.parametrize("cause", ["aborted turn", "foreign session", "foreign session input"])
async def test_an_aborted_turn_or_another_sessions_event_ends_the_observer(cause: str) -> None:
    session = MainSession("main", deliver=_ignore)
    async with JevHost(HostConfig(approvals=ADVICE_ALLOWED)) as host:
        host.bind_session(session)
        env = await host.spawn(program("const e = await program.nextEvent(); return e.sessionId;",
                                       requires=[]), None, observe={"events": ["turn_end", "input"]})
        session.turn_start()
        if cause == "aborted turn":
            session.turn_end(["partial"], stop_reason="aborted")
        elif cause == "foreign session":
            session.turn_end(["elsewhere"], session_id="other-session")
        else:
            session.user_input("elsewhere", session_id="other-session")
        final = await host.wait(env.id)
        assert final.state == "cancelled"
        # Nothing is resurrected by later events of this session.
        session.user_input("again")
        assert not session._observers


async def test_events_carry_the_session_id_and_turn_start_is_not_delivered() -> None:
    session = MainSession("main-7", deliver=_ignore)
    async with JevHost() as host:
        host.bind_session(session)
        env = await host.spawn(program("const e = await program.nextEvent(); return [e.event, e.sessionId];",
                                       requires=[]), None, observe={"events": ["turn_end"]})
        session.turn_start()
        session.turn_end(["done"], session_id="main-7")
        final = await host.wait(env.id)
    assert final.result == ["turn_end", "main-7"]


async def test_observing_needs_read_approval_of_the_session() -> None:
    session = MainSession("main", deliver=_ignore)
    async with JevHost(HostConfig(approvals={"read": "deny"})) as host:
        host.bind_session(session)
        with pytest.raises(CapabilityError, match=r"jev\.observe \(the read policy denies it\)"):
            await host.spawn(program("return null;", requires=[]), None, observe={"events": ["turn_end"]})
        assert not session._observers and host.status().runs == ()
    async with JevHost() as host:  # read: allow by default, and the decision is on record
        host.bind_session(session)
        env = await host.spawn(program("return null;", requires=[]), None, observe={"events": ["turn_end"]})
        final = await host.wait(env.id)
    assert [(a["ref"], a["risk"], a["allowed"]) for a in final.to_json().get("approvals", [])] == [("jev.observe", "read", True)]


async def _ignore(advice: Advice) -> None:
    return None


# ---------------------------------------------------------------- the user's words, read when asked (issue 31)

#: An observer that advises on every completed turn (its advice is an agent-risk call).
ADVISE_EACH_TURN = """
for (;;) {
  const event = await program.nextEvent();
  await program.emit(await program.advise({eventId: event.id, message: "Run the tests before claiming completion."}));
}
"""
DELIVERS = {"events": ["turn_end"], "delivery": "steer", "maxAdvice": 4}


async def test_the_late_intent_an_observer_spawned_before_the_first_input_asks_with_it() -> None:
    # The normal order: the observer starts, then the user speaks. Its advice calls are asked
    # about with the session's latest real input as it is when each is asked, not at launch.
    asked: list[str | None] = []

    async def approver(call: Any) -> str:
        asked.append(call.intent)
        assert ("user asked", call.intent) in call.facts()
        return "allow"

    session = MainSession("late", deliver=_ignore)
    async with JevHost(HostConfig(approvals={"agent": "ask"}), approver=approver) as host:
        host.bind_session(session)
        env = await host.spawn(program(ADVISE_EACH_TURN, requires=["jev.advise"]), None, observe=DELIVERS)
        session.user_input("Fix the login bug")
        session.turn_end(["Fixed."])
        first = await host.progress(env.id, after=0)
        session.user_input("continue", automatic=True)  # not the user's words: the text stays
        session.turn_end(["Still fixing."])
        await host.progress(env.id, after=1)
        session.user_input("Now add a logout button")
        session.turn_end(["Added."])
        await host.progress(env.id, after=2)
        await host.stop(env.id)
    assert first.events[0].value == {"delivered": True}
    assert asked == ["Fix the login bug", "Fix the login bug", "Now add a logout button"]


async def test_the_late_intent_reaches_the_classifier_of_an_auto_policy() -> None:
    # agent: auto asks the classifier, which needs the user's text (none means ask a person, and
    # with no approver, no). The fixture judges the advice safe only when that text is in its
    # evidence, so the advice is delivered only if the classifier saw the input given after launch.
    fixture = FixtureEvaluator({"answers": {"safe": {"noul": 0.1}, "secrets": {"noul": 0.02},
                                            "destructive": {"noul": 0.02}, "sessionOwned": {"noul": 0.5}},
                                "rules": [{"question": "safe", "stateContains": "Fix the login bug",
                                           "answer": {"noul": 0.95}}]})
    delivered: list[Advice] = []

    async def deliver(advice: Advice) -> None:
        delivered.append(advice)

    session = MainSession("auto", deliver=deliver)
    async with JevHost(HostConfig(approvals={"agent": "auto"}), evaluator=fixture) as host:
        host.bind_session(session)
        env = await host.spawn(program(ADVISE_EACH_TURN, requires=["jev.advise"]), None, observe=DELIVERS)
        session.user_input("Fix the login bug")
        session.turn_end(["Fixed."])
        got = await host.progress(env.id, after=0)
        final = await host.stop(env.id)
    assert got.events[0].value == {"delivered": True} and len(delivered) == 1
    assert fixture.calls == 1
    [decision] = [a for a in final.to_json().get("approvals", []) if a["ref"] == "jev.advise"]
    assert decision["allowed"] is True and decision["policy"] == "auto"


async def test_an_explicit_intent_stays_what_the_launch_said() -> None:
    asked: list[str | None] = []

    async def approver(call: Any) -> str:
        asked.append(call.intent)
        return "allow"

    session = MainSession("fixed", deliver=_ignore)
    async with JevHost(HostConfig(approvals={"agent": "ask"}), approver=approver) as host:
        host.bind_session(session)
        env = await host.spawn(program(ADVISE_EACH_TURN, requires=["jev.advise"]), None, observe=DELIVERS,
                               intent="only watch the login work")
        session.user_input("Fix the login bug")
        session.turn_end(["Fixed."])
        await host.progress(env.id, after=0)
        await host.stop(env.id)
    assert asked == ["only watch the login work"]
