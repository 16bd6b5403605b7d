"""Failure kinds, recovery actions and the policy that maps one to the other.

Pure decisions: `EscalationPolicy.decide(event, counters)` depends only on the
failure event and on how often each action was taken so far in this check,
so a table of cases pins it (tests/test_assertions_unit.py). `Check.eventually`
honours every action the policy returns; an action the source cannot carry
out (a source that cannot scroll, a reload it refuses) is written in the
attempt log with the reason, and the check goes on as after a retry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable


class FailureKind(StrEnum):
    """Why one try of a check failed (the values are the reason codes in results and traces)."""

    NO_SNAPSHOT = "no_snapshot"  # the page could not be snapshotted
    NO_MATCH = "no_match"  # nothing visible matches the query
    MATCH_OFFSCREEN = "match_offscreen"  # matches exist, none in the viewport
    MATCH_OCCLUDED = "match_occluded"  # in view, but covered
    STATE_MISMATCH = "state_mismatch"  # found, in the wrong state
    NO_BASELINE = "no_baseline"  # a diff predicate, but no snapshot from before the last action
    LOW_CONFIDENCE = "low_confidence"  # the snapshot was not trusted enough to judge
    SNAPSHOT_EXHAUSTED = "snapshot_exhausted"  # too many low-confidence snapshots in a row
    TIMEOUT = "timeout"  # no time left for another try


class RecoveryAction(StrEnum):
    """What the check does after a failed try."""

    RETRY = "retry"  # wait the backoff, take a fresh snapshot
    SCROLL = "scroll"  # scroll the best match into view, then a fresh snapshot
    RELOAD = "reload"  # ask the source to reload the page (it may refuse)
    VISION = "vision"  # ask the check's vision fallback one yes/no question; ends the check
    GIVE_UP = "give_up"  # end the check now with this failure
    DONE = "done"  # not a recovery: the try passed


@dataclass(frozen=True)
class FailureEvent:
    """One failed try, as the policy sees it."""

    kind: FailureKind
    attempt: int  # 1-based number of this try
    streak: int = 1  # consecutive tries, this one included, that failed with this kind
    confidence: float | None = None
    matches: int = 0  # elements the predicate's query found (a scroll needs one)
    vision: bool = False  # a vision fallback is enabled for this check
    last_kind: FailureKind | None = None  # for TIMEOUT: why the last try failed


@runtime_checkable
class Escalation(Protocol):
    """Any policy: a custom one returns one of the `RecoveryAction`s for each failure."""

    def decide(self, event: FailureEvent, counters: Mapping[RecoveryAction, int]) -> RecoveryAction: ...


@dataclass(frozen=True)
class EscalationPolicy:
    """The default policy, bounded and deterministic given the event and the counters.

    - `match_offscreen` with a match: scroll it into view, at most `max_scrolls` times;
    - `no_snapshot` / `no_match` for `reload_after` tries in a row: reload, at most
      `max_reloads` times (0 by default: a reload loses page state);
    - `snapshot_exhausted`: the vision fallback if the check enabled one, else give up;
    - `timeout`: the vision fallback if `vision_on_timeout` and enabled, else give up;
    - `no_baseline`: give up (retrying cannot create a "before");
    - anything else: retry.
    """

    max_scrolls: int = 2
    max_reloads: int = 0
    reload_after: int = 2
    vision_on_timeout: bool = False

    def decide(self, event: FailureEvent, counters: Mapping[RecoveryAction, int]) -> RecoveryAction:
        kind = event.kind
        if kind is FailureKind.TIMEOUT:
            return RecoveryAction.VISION if self.vision_on_timeout and event.vision else RecoveryAction.GIVE_UP
        if kind is FailureKind.SNAPSHOT_EXHAUSTED:
            return RecoveryAction.VISION if event.vision else RecoveryAction.GIVE_UP
        if kind is FailureKind.NO_BASELINE:
            return RecoveryAction.GIVE_UP
        if kind is FailureKind.MATCH_OFFSCREEN and event.matches \
                and counters.get(RecoveryAction.SCROLL, 0) < self.max_scrolls:
            return RecoveryAction.SCROLL
        if kind in (FailureKind.NO_SNAPSHOT, FailureKind.NO_MATCH) and event.streak >= self.reload_after \
                and counters.get(RecoveryAction.RELOAD, 0) < self.max_reloads:
            return RecoveryAction.RELOAD
        return RecoveryAction.RETRY


__all__ = ["Escalation", "EscalationPolicy", "FailureEvent", "FailureKind", "RecoveryAction"]
