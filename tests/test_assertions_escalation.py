"""Failure kinds, recovery actions, the escalation table, every action honoured, diff
predicates and the shared waiter — on synthetic snapshots and a fake clock."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest

from fabric_jev._waiting import Waiter
from fabric_jev.assertions import (
    EscalationPolicy,
    FailureEvent,
    FailureKind,
    RecoveryAction,
    Snapshot,
    VisionFallback,
    added,
    changed,
    check,
    exists,
    is_enabled,
    modified,
    removed,
)
from fabric_jev.verification import poll
from tests.assertion_support import ScriptedSource

pytestmark = pytest.mark.anyio
K, A = FailureKind, RecoveryAction


def el(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"role": "button", "name": "", "visible": True, "in_viewport": True,
                            "bbox": {"x": 10, "y": 10, "width": 80, "height": 30}}
    base.update(kw)
    return base


def snap(*elements: dict[str, Any], **kw: Any) -> Snapshot:
    return Snapshot.parse({"url": "http://127.0.0.1/app", "node_count": 50, "quiet_ms": 2000,
                           "observed_ms": 5000, **kw,
                           "elements": [{"index": i, **e} for i, e in enumerate(elements)]})


# ---------------------------------------------------------------- the table

TABLE: list[tuple[FailureEvent, dict[RecoveryAction, int], RecoveryAction]] = [
    (FailureEvent(K.NO_SNAPSHOT, 1), {}, A.RETRY),
    (FailureEvent(K.NO_MATCH, 1), {}, A.RETRY),
    (FailureEvent(K.STATE_MISMATCH, 4, streak=4), {}, A.RETRY),
    (FailureEvent(K.MATCH_OCCLUDED, 1, matches=1), {}, A.RETRY),
    (FailureEvent(K.LOW_CONFIDENCE, 1, confidence=0.3), {}, A.RETRY),
    (FailureEvent(K.MATCH_OFFSCREEN, 1, matches=1), {}, A.SCROLL),
    (FailureEvent(K.MATCH_OFFSCREEN, 2, matches=1), {A.SCROLL: 1}, A.SCROLL),
    (FailureEvent(K.MATCH_OFFSCREEN, 3, matches=1), {A.SCROLL: 2}, A.RETRY),
    (FailureEvent(K.MATCH_OFFSCREEN, 1, matches=0), {}, A.RETRY),
    (FailureEvent(K.SNAPSHOT_EXHAUSTED, 3), {}, A.GIVE_UP),
    (FailureEvent(K.SNAPSHOT_EXHAUSTED, 3, vision=True), {}, A.VISION),
    (FailureEvent(K.TIMEOUT, 6, vision=True, last_kind=K.NO_MATCH), {}, A.GIVE_UP),
    (FailureEvent(K.NO_BASELINE, 1), {}, A.GIVE_UP),
]
RELOADING = EscalationPolicy(max_reloads=1, reload_after=2, vision_on_timeout=True)
TABLE_RELOADING: list[tuple[FailureEvent, dict[RecoveryAction, int], RecoveryAction]] = [
    (FailureEvent(K.NO_MATCH, 1, streak=1), {}, A.RETRY),
    (FailureEvent(K.NO_MATCH, 2, streak=2), {}, A.RELOAD),
    (FailureEvent(K.NO_SNAPSHOT, 2, streak=2), {}, A.RELOAD),
    (FailureEvent(K.NO_MATCH, 5, streak=2), {A.RELOAD: 1}, A.RETRY),
    (FailureEvent(K.STATE_MISMATCH, 2, streak=2), {}, A.RETRY),
    (FailureEvent(K.TIMEOUT, 6, vision=True, last_kind=K.NO_MATCH), {}, A.VISION),
    (FailureEvent(K.TIMEOUT, 6, vision=False, last_kind=K.NO_MATCH), {}, A.GIVE_UP),
]


@pytest.mark.parametrize(("event", "counters", "action"), TABLE)
def test_default_policy_table(event: FailureEvent, counters: dict[RecoveryAction, int],
                              action: RecoveryAction) -> None:
    assert EscalationPolicy(max_scrolls=2).decide(event, Counter(counters)) is action


@pytest.mark.parametrize(("event", "counters", "action"), TABLE_RELOADING)
def test_reloading_policy_table(event: FailureEvent, counters: dict[RecoveryAction, int],
                                action: RecoveryAction) -> None:
    assert RELOADING.decide(event, Counter(counters)) is action


def test_kinds_and_actions_are_the_trace_strings() -> None:
    assert K.NO_MATCH == "no_match" and A.GIVE_UP == "give_up"
    assert {a.value for a in A} == {"retry", "scroll", "reload", "vision", "give_up", "done"}


# ---------------------------------------------------------------- every action honoured


class Source(ScriptedSource):
    def __init__(self, *snapshots: Snapshot | Exception, reload_ok: bool | None = None,
                 after_reload: Snapshot | None = None, can_scroll: bool = True) -> None:
        super().__init__(*snapshots)
        self.reload_ok = reload_ok
        self.after_reload = after_reload
        if not can_scroll:
            self.scroll_into_view = None  # type: ignore[assignment,method-assign]

    def after_scroll(self, element: Any) -> Snapshot:
        return snap(el(name=element.name))

    async def reload(self) -> bool:
        self.asked.append("reload")
        if self.reload_ok is None:
            raise RuntimeError("this page may not be reloaded")
        if self.reload_ok and self.after_reload is not None:
            self.snapshots = [self.after_reload]
            self.taken = 0
        return self.reload_ok


class Fixed:
    """A custom policy: always the same action."""

    def __init__(self, action: RecoveryAction) -> None:
        self.action = action
        self.seen: list[FailureEvent] = []

    def decide(self, event: FailureEvent, counters: Any) -> RecoveryAction:
        self.seen.append(event)
        return self.action


class Vision:
    def __init__(self, answer: bool | None) -> None:
        self.answer = answer

    async def ask(self, question: str, image: bytes) -> bool | None:
        return self.answer


async def run(c: Any, source: Source, **kw: Any) -> Any:
    return await c.eventually(source, clock=source.clock, sleep=source.sleep, **kw)


MISSING = snap(el(name="Other"))
SAVE = snap(el(name="Save"))


async def test_give_up_ends_at_once_with_the_failure_kind() -> None:
    source = Source(MISSING)
    result = await run(check(exists("name=Save"), "save", policy=Fixed(A.GIVE_UP)), source, timeout=5)
    assert result.reason is K.NO_MATCH and source.taken == 1 and source.now == 0
    assert [(a.reason, a.action) for a in result.attempts] == [(K.NO_MATCH, A.GIVE_UP)]


async def test_reload_goes_through_the_source() -> None:
    source = Source(MISSING, reload_ok=True, after_reload=SAVE)
    result = await run(check(exists("name=Save"), "save", policy=Fixed(A.RELOAD)), source, timeout=5)
    assert result.passed and source.asked == ["reload"]
    assert [a.action for a in result.attempts] == [A.RELOAD, A.DONE]
    assert result.attempts[0].detail == "reloaded" and source.now == 0  # no backoff after a reload


@pytest.mark.parametrize(("reload_ok", "detail"), [(False, "refused by the source"),
                                                   (None, "refused: RuntimeError: this page may not")])
async def test_a_refused_reload_is_logged_and_the_check_goes_on(reload_ok: bool | None, detail: str) -> None:
    source = Source(MISSING, reload_ok=reload_ok)
    policy = EscalationPolicy(max_reloads=1, reload_after=1)
    result = await run(check(exists("name=Save"), "save", policy=policy), source, timeout=0.5, poll=0.1)
    assert result.reason is K.TIMEOUT and result.last_reason is K.NO_MATCH
    assert source.asked == ["reload"] and result.attempts[0].action is A.RELOAD
    assert result.attempts[0].detail.startswith(detail)
    assert [a.action for a in result.attempts[1:-1]] == [A.RETRY] * (len(result.attempts) - 2)


async def test_a_source_without_reload_refuses() -> None:
    class Plain:
        async def snapshot(self) -> Snapshot:
            return MISSING

    result = await check(exists("name=Save"), "save", policy=Fixed(A.RELOAD)).eventually(
        Plain(), timeout=0.05, poll=0.01)
    assert result.attempts[0].detail == "refused: the source cannot reload"


async def test_scroll_is_honoured_even_from_a_custom_policy_and_a_missing_scroll_is_logged() -> None:
    far = snap(el(name="Save", in_viewport=False))
    source = Source(far)
    result = await run(check(exists("name=Save"), "save", policy=Fixed(A.SCROLL)), source, timeout=5)
    assert result.passed and source.asked == ["scroll Save"]
    cannot = Source(far, can_scroll=False)
    result = await run(check(exists("name=Save"), "save", policy=Fixed(A.SCROLL)), cannot,
                       timeout=0.2, poll=0.1)
    assert not result.passed and result.attempts[0].detail == "not done: the source cannot scroll"


@pytest.mark.parametrize(("answer", "passed", "said"), [(True, True, "yes"), (False, False, "no"),
                                                        (None, False, "unsure")])
async def test_vision_from_a_custom_policy_decides_the_check(answer: bool | None, passed: bool,
                                                             said: str) -> None:
    source = Source(MISSING)
    c = check(exists("name=Save"), "save", policy=Fixed(A.VISION),
              vision=VisionFallback(Vision(answer), "Is a Save button visible?"))
    result = await run(c, source, timeout=5)
    assert result.passed is passed and result.vision == said and source.asked == ["screenshot"]
    assert result.reason is (None if passed else K.NO_MATCH)


async def test_vision_without_a_fallback_says_so() -> None:
    result = await run(check(exists("name=Save"), "save", policy=Fixed(A.VISION)), Source(MISSING))
    assert not result.passed and result.reason is K.NO_MATCH
    assert result.attempts[-1].detail == "not done: this check enabled no vision fallback"


async def test_vision_on_timeout_when_the_policy_asks_for_it() -> None:
    source = Source(MISSING)
    c = check(exists("name=Save"), "save", policy=EscalationPolicy(vision_on_timeout=True),
              vision=VisionFallback(Vision(True), "Is Save there?"))
    result = await run(c, source, timeout=0.3, poll=0.1)
    assert result.passed and result.vision == "yes" and result.attempts[-1].action is A.VISION


async def test_a_retried_exhaustion_starts_counting_again() -> None:
    class RetryExhausted:
        def decide(self, event: FailureEvent, counters: Any) -> RecoveryAction:
            if event.kind is K.SNAPSHOT_EXHAUSTED and counters[A.RETRY] >= 4:
                return A.GIVE_UP
            return A.RETRY

    busy = snap(el(name="Save"), quiet_ms=10)
    result = await run(check(exists("name=Save"), "busy", policy=RetryExhausted()), Source(busy),
                       timeout=100, max_retries=2)
    kinds = [a.reason for a in result.attempts]
    assert kinds == [K.LOW_CONFIDENCE, K.SNAPSHOT_EXHAUSTED, K.LOW_CONFIDENCE, K.SNAPSHOT_EXHAUSTED,
                     K.LOW_CONFIDENCE, K.SNAPSHOT_EXHAUSTED]
    assert result.reason is K.SNAPSHOT_EXHAUSTED


async def test_the_policy_sees_streaks_attempts_and_matches() -> None:
    policy = Fixed(A.RETRY)
    far = snap(el(name="Save", in_viewport=False))
    await run(check(exists("name=Save"), "save", policy=policy), Source(MISSING, MISSING, far),
              timeout=0.5, poll=0.1)
    first = [(e.kind, e.attempt, e.streak, e.matches) for e in policy.seen[:3]]
    assert first == [(K.NO_MATCH, 1, 1, 0), (K.NO_MATCH, 2, 2, 0), (K.MATCH_OFFSCREEN, 3, 1, 1)]
    assert policy.seen[-1].kind is K.TIMEOUT and policy.seen[-1].last_kind is K.MATCH_OFFSCREEN


async def test_a_stalled_snapshot_cannot_outlive_the_deadline() -> None:
    class Stuck:
        async def snapshot(self) -> Snapshot:
            await anyio.sleep_forever()
            raise AssertionError

    result = await check(exists("name=Save"), "stuck").eventually(Stuck(), timeout=0.05, poll=0.01)
    assert result.reason is K.TIMEOUT and result.last_reason is K.NO_SNAPSHOT
    assert "did not answer before the deadline" in result.attempts[-1].detail


async def test_results_and_traces_carry_the_enums() -> None:
    result = await run(check(exists("name=Save"), "save"), Source(MISSING), timeout=0.2, poll=0.1)
    assert isinstance(result.reason, FailureKind) and isinstance(result.attempts[0].action, RecoveryAction)
    trace = result.trace_event()
    assert trace["reason"] == "timeout" and type(trace["reason"]) is str
    assert type(trace["attempts"][0]["action"]) is str


# ---------------------------------------------------------------- diff predicates


BEFORE = snap(el(name="Add", testid="add"), el(role="checkbox", name="A", checked=False),
              el(role="listitem", name="one"))
AFTER = snap(el(name="Add", testid="add"), el(role="checkbox", name="A", checked=True),
             el(role="listitem", name="one"), el(role="listitem", name="two"))


def test_diff_predicates_against_the_baseline() -> None:
    now = AFTER.with_baseline(BEFORE)
    assert added("role=listitem").assess(now).passed
    assert not added("role=listitem", 2).assess(now).passed
    assert modified("role=checkbox", "checked").assess(now).passed
    assert not modified("role=checkbox", "value").assess(now).passed
    assert changed().assess(now).passed and not changed("role=link").assess(now).passed
    gone = BEFORE.with_baseline(AFTER)
    out = removed("role=listitem").assess(gone)
    assert out.passed and [e.name for e in out.matches] == ["two"]
    same = BEFORE.with_baseline(BEFORE)
    failed = changed().assess(same)
    assert failed.reason is K.STATE_MISMATCH and failed.actual == "0 added, 0 removed, 0 modified"
    with pytest.raises(ValueError, match="unknown state field"):
        modified("role=checkbox", "colour")


def test_no_baseline_is_its_own_kind_and_the_default_policy_gives_up() -> None:
    out = added("role=listitem").assess(AFTER)
    assert out.reason is K.NO_BASELINE and "before the last action" in out.actual
    assert with_nested_baseline_dropped()


def with_nested_baseline_dropped() -> bool:
    chained = AFTER.with_baseline(BEFORE.with_baseline(AFTER))
    return chained.baseline is not None and chained.baseline.baseline is None \
        and "baseline" not in chained.redacted_json()


async def test_diff_predicate_inside_eventually_waits_for_the_change() -> None:
    source = Source(BEFORE.with_baseline(BEFORE), BEFORE.with_baseline(BEFORE), AFTER.with_baseline(BEFORE))
    result = await run(check(added("role=listitem name=two"), "row added"), source, timeout=5)
    assert result.passed and [a.action for a in result.attempts] == [A.RETRY, A.RETRY, A.DONE]
    nothing = await run(check(added("role=listitem"), "row added"), Source(AFTER), timeout=5)
    assert nothing.reason is K.NO_BASELINE and len(nothing.attempts) == 1


# ---------------------------------------------------------------- the waiter


async def test_waiter_backoff_is_capped_and_never_sleeps_past_the_deadline() -> None:
    now = [0.0]
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(round(s, 4))
        now[0] += s

    waiter: Waiter[int] = Waiter(1.0, 0.1, backoff=2, max_interval=0.3, clock=lambda: now[0], sleep=sleep)
    tries = 1
    while await waiter.next_try():
        tries += 1
    # The pause that would pass the deadline is cut to end at it: the last try is at 1.0 s.
    assert slept == [0.1, 0.2, 0.3, 0.3, 0.1] and tries == 6 and waiter.over and waiter.left == 0
    longer: Waiter[int] = Waiter(1.0, 0.1, clock=lambda: now[0], sleep=sleep)
    await longer.pause(at_least=5)
    assert slept[-1] == pytest.approx(1.0) and longer.over and not await longer.next_try()


async def test_the_last_try_is_at_the_deadline_even_when_the_clock_lands_short() -> None:
    # A sleep that wakes a hair early (or float sums) must neither buy one more try
    # nor end the wait before the try at the deadline.
    now = [0.0]

    async def early(s: float) -> None:
        now[0] += s - 1e-9

    waiter: Waiter[int] = Waiter(0.3, 0.1, clock=lambda: now[0], sleep=early)
    tries = 1
    while await waiter.next_try():
        tries += 1
    assert tries == 4 and now[0] == pytest.approx(0.3)


async def test_waiter_bounded_read_stalls_and_sets_the_token() -> None:
    tokens: list[anyio.Event] = []

    async def stuck(token: anyio.Event) -> int:
        tokens.append(token)
        await anyio.sleep_forever()
        return 0

    waiter: Waiter[int] = Waiter(0.02, 0.01)
    got = await waiter.bounded(stuck)
    assert got.stalled and not got.ok and tokens[0].is_set()


async def test_waiter_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        Waiter(1.0, 0.1, backoff=0.5)


async def test_poll_and_eventually_share_the_deadline_rules() -> None:
    reads = iter([1, 2, 3])

    async def read(_t: anyio.Event) -> int:
        return next(reads)

    outcome = await poll(read, lambda v: v == 3, timeout=5, interval=0.001)
    assert outcome.passed and outcome.reads == 3


async def test_cancellation_is_re_raised_from_eventually() -> None:
    class Stuck:
        async def snapshot(self) -> Snapshot:
            await anyio.sleep_forever()
            raise AssertionError

    with anyio.move_on_after(0.02) as scope:
        await check(is_enabled("name=Save"), "stuck").eventually(Stuck(), timeout=30)
    assert scope.cancelled_caught


def test_frames_that_cannot_be_read_or_are_navigating_lower_confidence() -> None:
    from fabric_jev.assertions import confidence

    frames = ({"path": "", "url": "http://127.0.0.1/"},
              {"path": "checkout", "url": "http://127.0.0.1/pay", "error": "detached"},
              {"path": "help", "url": "http://127.0.0.1/help", "navigating": True},
              {"path": "ads", "url": "http://127.0.0.1/ads", "ready_state": "loading"})
    conf = confidence(snap(el(name="Save"), frames=frames))
    assert conf.value == pytest.approx(0.5 * 0.5 * 0.7)
    assert conf.reasons == ("frame checkout could not be read (detached)", "frame help is navigating",
                            "frame ads is still loading")


async def test_a_policy_that_answers_no_recovery_action_is_refused() -> None:
    with pytest.raises(ValueError, match="not a recovery action"):
        await run(check(exists("name=Save"), "save", policy=Fixed(A.DONE)), Source(MISSING))
