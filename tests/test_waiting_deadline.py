"""One waiting rule, on fake sources and a fake clock: every wait makes its last try at its
deadline, never before, and a quiet page that is not trusted yet (a loading shell) is waited
for, not called exhausted. The same edges on real Chromium: tests/test_assertions_browser.py
and tests/test_verification_browser.py."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import pytest

from fabric_jev import FixtureEvaluator
from fabric_jev.assertions import Snapshot, check, exists
from fabric_jev.verification import (
    MemoryChannels,
    MemoryElement,
    Observation,
    VerificationFailed,
    compile_verification,
    poll,
    run_verification,
)

pytestmark = pytest.mark.anyio


class Clock:
    """Fake time: only the waits under test move it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.reads: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await anyio.lowlevel.checkpoint()


def el(name: str) -> dict[str, Any]:
    box = {"x": 10, "y": 10, "width": 80, "height": 30}
    return {"role": "button", "name": name, "text": name, "visible": True, "in_viewport": True,
            "bbox": box, "viewport_bbox": box}


def page(*elements: dict[str, Any], quiet_ms: int = 2000, node_count: int = 50) -> Snapshot:
    return Snapshot.parse({"url": "http://127.0.0.1/app", "ready_state": "complete", "node_count": node_count,
                           "quiet_ms": quiet_ms, "observed_ms": 5000,
                           "elements": [{"index": i, **e} for i, e in enumerate(elements)]})


#: A loading shell: "Loading…", quiet, no controls yet — confidence 0.6, under the default 0.7.
SHELL = page()
READY = page(el("Save"))


class AppearsAt:
    """A page that shows `before` until the clock reaches `at`, then `after`; it records when it was looked at."""

    def __init__(self, clock: Clock, at: float, before: Snapshot = SHELL, after: Snapshot = READY) -> None:
        self.clock, self.at, self.before, self.after = clock, at, before, after
        self.looks: list[float] = []

    async def snapshot(self) -> Snapshot:
        self.looks.append(self.clock.now)
        return self.after if self.clock.now >= self.at else self.before


# timeout, poll: the seed's defaults, verification see's (poll 0.05 growing ×1.5 to timeout/4), others;
# in each, 95% of the timeout falls after the last look the backoff schedule alone would make, so
# only the look at the deadline can see it (a 10 s check once last looked at 7.7 s).
SCHEDULES = [(10.0, 0.25), (3.0, 0.05), (2.0, 0.1), (30.0, 0.25), (0.5, 0.2)]


@pytest.mark.parametrize(("timeout", "poll_s"), SCHEDULES)
async def test_the_deadline_edge_an_element_at_95_percent_of_the_timeout_passes(timeout: float,
                                                                              poll_s: float) -> None:
    clock = Clock()
    source = AppearsAt(clock, 0.95 * timeout, before=page(el("Cancel")))
    result = await check(exists("name=Save"), "save shown").eventually(
        source, timeout=timeout, poll=poll_s, clock=clock, sleep=clock.sleep)
    assert result.passed, result.message()
    assert source.looks[-1] == pytest.approx(timeout)  # found by the look at the deadline


@pytest.mark.parametrize(("timeout", "poll_s"), SCHEDULES)
async def test_the_last_look_is_at_the_deadline_never_before(timeout: float, poll_s: float) -> None:
    clock = Clock()
    source = AppearsAt(clock, float("inf"), before=page(el("Cancel")))
    result = await check(exists("name=Save"), "save shown").eventually(
        source, timeout=timeout, poll=poll_s, clock=clock, sleep=clock.sleep)
    assert result.reason == "timeout" and result.last_reason == "no_match"
    assert source.looks[-1] == pytest.approx(timeout) and clock.now == pytest.approx(timeout)
    assert len(source.looks) == len(set(source.looks))  # one look per moment: no extra try at the end


async def test_the_loading_shell_is_waited_for_not_exhausted() -> None:
    # The shell renders its button 1.5 s later: under the default min_confidence (0.7) the
    # quiet, control-less shell (0.6) is not judged, but it is looked at again until it renders.
    clock = Clock()
    source = AppearsAt(clock, 1.5)
    result = await check(exists("name=Save"), "save shown").eventually(source, clock=clock, sleep=clock.sleep)
    assert result.passed, result.message()
    assert [a.reason for a in result.attempts[:-1]] == ["low_confidence"] * (len(result.attempts) - 1)
    assert len(result.attempts) > 3  # more than max_retries low-confidence tries, and never exhausted


async def test_a_shell_that_never_renders_times_out_at_the_deadline_saying_why() -> None:
    clock = Clock()
    source = AppearsAt(clock, float("inf"))
    result = await check(exists("name=Save"), "save shown").eventually(source, clock=clock, sleep=clock.sleep)
    assert result.reason == "timeout" and result.last_reason == "low_confidence"
    assert clock.now == pytest.approx(10) and source.looks[-1] == pytest.approx(10)
    assert "timeout (last: low_confidence)" in result.message()
    assert "no interactive elements" in result.attempts[-1].detail


async def test_only_a_page_that_keeps_changing_is_exhausted() -> None:
    clock = Clock()
    source = AppearsAt(clock, float("inf"), before=page(el("Save"), quiet_ms=20))  # mutating all the time
    result = await check(exists("name=Save"), "save shown").eventually(source, clock=clock, sleep=clock.sleep)
    assert result.reason == "snapshot_exhausted" and len(source.looks) == 3
    assert clock.now < 10


async def test_a_quiet_shell_between_busy_snapshots_restarts_the_count() -> None:
    # busy, busy, quiet shell, busy, busy, ...: never three changing snapshots in a row.
    clock = Clock()
    shots = [page(el("Save"), quiet_ms=20), page(el("Save"), quiet_ms=20), SHELL]

    class Flicker:
        taken = 0

        async def snapshot(self) -> Snapshot:
            self.taken += 1
            return shots[(self.taken - 1) % 3]

    result = await check(exists("name=Gone"), "gone").eventually(Flicker(), timeout=5, clock=clock,
                                                                 sleep=clock.sleep)
    assert result.reason == "timeout" and clock.now == pytest.approx(5)


# 95% of the timeout falls after the last read of the regular schedule: only the read at the
# deadline sees it.
@pytest.mark.parametrize(("timeout", "interval"), [(0.3, 0.1), (1.0, 0.4), (10.0, 1.5)])
async def test_poll_reads_last_at_the_deadline(timeout: float, interval: float) -> None:
    clock = Clock()

    async def read(_: anyio.Event) -> str:
        clock.reads.append(clock.now)
        return "Saved" if clock.now >= 0.95 * timeout else "Saving…"

    outcome = await poll(read, lambda text: text == "Saved", timeout=timeout, interval=interval, clock=clock,
                         sleep=clock.sleep)
    assert outcome.passed and clock.reads[-1] == pytest.approx(timeout)
    assert len(clock.reads) == len(set(clock.reads))


DICT: dict[str, Any] = {"id": "edge", "version": "1", "checks": [
    {"id": "saved", "description": "Visible page text contains Saved",
     "assertion": {"kind": "textContains", "text": "Saved", "timeoutMs": 3000}},
    {"id": "count", "description": "The list holds at least three rows",
     "assertion": {"kind": "observe", "observation": {"id": "rows", "version": "1"}, "path": ["count"],
                   "predicate": {"kind": "atLeast", "value": 3}, "timeoutMs": 1000}},
]}


class LateText(MemoryChannels):
    """In-memory channels on a fake clock whose page text says Saved from 95% of its check's timeout."""

    async def text(self, cancel: anyio.Event) -> str:
        return "Saved" if self.clock() >= 0.95 * 3.0 else "Saving…"


async def test_text_contains_and_observe_pass_at_95_percent_of_their_timeouts() -> None:
    evaluator = FixtureEvaluator({"answers": {"coverage": {"noul": 0.97}, "check_0": {"noul": 0.95},
                                              "check_1": {"noul": 0.95}}})
    compiled = await compile_verification("The text says Saved and the list has three rows.", DICT, evaluator)
    assert compiled.status == "ready" and compiled.plan is not None
    clock = Clock()
    # Reads every 0.4 s: 95% of 3 s (2.85 s) and of 1 s (0.95 s) fall after the last regular read.
    channels = LateText(elements=[MemoryElement("Saved")], sample_ms=400, clock=clock, sleep=clock.sleep)
    rows_from: list[float] = []

    async def rows(_: anyio.Event) -> Any:
        # The rows arrive at 95% of the observe check's 1 s, counted from when it starts.
        if not rows_from:
            rows_from.append(clock.now)
        return {"count": 3 if clock.now - rows_from[0] >= 0.95 else 2}

    result = await run_verification(compiled.plan, DICT, {"rows": Observation("1", rows)}, channels)
    assert result.status == "passed"
    assert clock.now == pytest.approx(4.0)  # each check passed at its own deadline: 3 s, then 1 s

    # A timeout that ends before the text arrives fails there: the deadline is where the waiting ends.
    late = copy.deepcopy(DICT)
    late["checks"][0]["assertion"]["timeoutMs"] = 2800
    compiled = await compile_verification("The text says Saved and the list has three rows.", late, evaluator)
    assert compiled.plan is not None
    clock.now = 0.0
    with pytest.raises(VerificationFailed) as err:
        await run_verification(compiled.plan, late, {"rows": Observation("1", rows)}, channels)
    assert err.value.check_id == "saved" and clock.now == pytest.approx(2.8)
