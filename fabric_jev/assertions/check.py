"""`check(predicate, label, required).once()` and `.eventually(...)`: the assertion funnel.

Every try takes a fresh snapshot. A snapshot whose confidence is below
`min_confidence` is not judged; after `max_retries` such snapshots in a row
the check is `snapshot_exhausted`. After each failed try the escalation
policy (escalation.py) names the recovery action, and the check carries it
out: retry, scroll, reload (through the source, which may refuse), ask the
vision fallback (only if enabled for this check), or give up. Waiting —
deadline, backoff, cancellation, the attempt log — goes through the shared
`fabric_jev._waiting.Waiter`. Failures carry a reason code, the nearest
matches and the attempt log; a failed `required` check raises `AssertionFailed`.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

import anyio
from pydantic import ConfigDict, Field, PlainSerializer

from .._files import atomic_write
from .._waiting import Waiter
from ..contract.wire_model import WireModel
from ..errors import CheckFailed
from .escalation import Escalation, EscalationPolicy, FailureEvent, FailureKind, RecoveryAction
from .nearest import Near, nearest
from .predicates import Predicate, PredicateOutcome
from .snapshot import QUIET_SETTLED_MS, Element, Snapshot, confidence
from .snapshot_diff import describe_changes

#: The reason codes a finished check can carry (FailureKind values; `low_confidence`
#: appears only on single attempts and as a timeout's `last_reason`: never judged).
REASONS = tuple(k.value for k in FailureKind if k is not FailureKind.LOW_CONFIDENCE)
TRACE_TYPE: Literal["fabric_jev.check"] = "fabric_jev.check"
#: `eventually`'s defaults, the smart-assert seed's (timeout_s=10, poll_s=0.25, min_confidence=0.7).
EVENTUALLY_TIMEOUT = 10.0
EVENTUALLY_POLL = 0.25
EVENTUALLY_MIN_CONFIDENCE = 0.7
EVENTUALLY_MAX_RETRIES = 3


@runtime_checkable
class SnapshotSource(Protocol):
    """What a driver offers: fresh snapshots; optionally `scroll_into_view(element)`,
    `reload() -> bool` (False or an exception: refused) and `screenshot() -> bytes`."""

    async def snapshot(self) -> Snapshot: ...


@runtime_checkable
class VisionProvider(Protocol):
    async def ask(self, question: str, image: bytes) -> bool | None:
        """Answer one narrow yes/no question about a screenshot; None when unsure."""
        ...


@runtime_checkable
class ProposingVisionProvider(VisionProvider, Protocol):
    async def propose(self, question: str, image: bytes) -> list[tuple[float, float, float, float]]:
        """Boxes (x, y, width, height, screenshot pixels) of what the question is about."""
        ...


@dataclass(frozen=True)
class VisionFallback:
    """Enabled per check: may turn an otherwise-failed check into pass or fail.

    `mode="verify"` asks the provider's `ask` one yes/no question. `mode="propose"`
    asks its `propose(question, png) -> [(x, y, width, height), ...]` where the
    thing is, and passes only if the predicate holds on the last snapshot and a
    proposed box lies on one of the elements it matched: the assertion does not
    change, vision only vouches for a snapshot the page was too busy to trust.
    """

    provider: VisionProvider
    question: str
    mode: Literal["verify", "propose"] = "verify"

    def __post_init__(self) -> None:
        if self.mode not in ("verify", "propose"):
            raise ValueError(f"VisionFallback mode must be verify or propose, not {self.mode!r}")
        if self.mode == "propose" and not isinstance(self.provider, ProposingVisionProvider):
            raise ValueError("mode='propose' needs a provider with propose(question, image)")


def _under(box: tuple[float, float, float, float], element: Element) -> bool:
    """A proposed box (screenshot pixels) and an element's viewport box share a centre:
    either centre lies inside the other box."""
    x, y, w, h = box
    b = element.viewport_bbox
    if b.width <= 0 or b.height <= 0:
        return False
    cx, cy = x + w / 2, y + h / 2
    ex, ey = b.x + b.width / 2, b.y + b.height / 2
    return (b.x <= cx <= b.x + b.width and b.y <= cy <= b.y + b.height) or (x <= ex <= x + w and y <= ey <= y + h)


class Attempt(WireModel):
    """One try of a check: why it failed (None: it held), how sure, and what came next."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int
    reason: FailureKind | None
    confidence: float | None
    action: RecoveryAction
    detail: str = ""


def _sorted(artifacts: dict[str, str]) -> dict[str, str]:
    return dict(sorted(artifacts.items()))


class CheckResult(WireModel):
    """What a check came to, filled in as it runs; its JSON is the trace event (`trace_event`)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["fabric_jev.check"] = TRACE_TYPE
    version: Literal[1] = 1
    label: str
    predicate: str
    required: bool
    passed: bool
    reason: FailureKind | None
    last_reason: FailureKind | None = None
    expected: str
    actual: str
    nearest: list[Near] = Field(default_factory=list)
    attempts: list[Attempt] = Field(default_factory=list)
    confidence: float | None = None
    url: str = ""
    vision: str | None = None  # "yes" / "no" / "unsure" when the fallback was asked
    artifacts: Annotated[dict[str, str], PlainSerializer(_sorted)] = Field(default_factory=dict)
    snapshot: Snapshot | None = Field(default=None, exclude=True)

    def message(self) -> str:
        head = f'check "{self.label}" ' + ("passed" if self.passed else f"failed: {self.reason}")
        if self.reason == "timeout" and self.last_reason:
            head += f" (last: {self.last_reason})"
        lines = [head, f"  expected: {self.expected}", f"  actual:   {self.actual}"]
        if self.nearest and not self.passed:
            lines.append("  nearest:")
            lines += [f"    {i}. {n.element.label()} ({n.why}, score {n.score:.2f})"
                      for i, n in enumerate(self.nearest, 1)]
        if not self.passed and self.snapshot is not None and self.snapshot.baseline is not None:
            lines.append("  since the last action: " + describe_changes(self.snapshot.baseline, self.snapshot))
        if self.vision:
            lines.append(f"  vision fallback answered: {self.vision}")
        lines.append("  log:")
        for a in self.attempts:
            conf = "n/a" if a.confidence is None else f"{a.confidence:.2f}"
            lines.append(f"    #{a.n} {a.reason or 'passed'} (confidence {conf}) -> {a.action}"
                         + (f": {a.detail}" if a.detail else ""))
        if self.artifacts:
            lines.append("  artifacts: " + ", ".join(f"{k}={v}" for k, v in sorted(self.artifacts.items())))
        # Redacted like the trace and snapshot artifacts: a failure's message lands in test
        # reports and CI logs, and the page text it quotes may hold a credential.
        from ..redaction.redactor import redact_text

        return redact_text("\n".join(lines))[0]

    def trace_event(self) -> dict[str, object]:
        """A stable, JSON-serialisable record (no timestamps), for logs and golden files: its JSON."""
        return self.to_json()


class AssertionFailed(CheckFailed):
    """A required check failed; `result` holds everything the message shows."""

    def __init__(self, result: CheckResult) -> None:
        super().__init__(result.message())
        self.result = result


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:60] or "check"


class Check:
    def __init__(self, predicate: Predicate, label: str, required: bool = False, *,
                 source: SnapshotSource | None = None, vision: VisionFallback | None = None,
                 artifacts_dir: str | Path | None = None, nearest_n: int = 3,
                 policy: Escalation | None = None,
                 on_trace: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.predicate = predicate
        self.label = label
        self.required = required
        self.source = source
        self.vision = vision
        self.artifacts_dir = Path(artifacts_dir) if artifacts_dir is not None else None
        self.nearest_n = nearest_n
        self.policy: Escalation = policy or EscalationPolicy()
        self.on_trace = on_trace

    def _source(self, source: SnapshotSource | None) -> SnapshotSource:
        src = source or self.source
        if src is None:
            raise ValueError("check needs a snapshot source (pass one to check() or once/eventually)")
        return src

    async def _take(self, source: SnapshotSource, waiter: Waiter[Attempt] | None = None
                    ) -> tuple[Snapshot | None, str]:
        async def read(_token: anyio.Event) -> Snapshot:
            return await source.snapshot()

        try:
            if waiter is None:
                snap: Snapshot | None = await source.snapshot()
            else:
                got = await waiter.bounded(read)
                if got.stalled:
                    return None, "the snapshot did not answer before the deadline"
                snap = got.value
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # the page is gone, navigating, or the driver failed
            return None, f"{type(exc).__name__}: {exc}"[:300]
        if snap is None:
            return None, "the source returned no snapshot"
        return (snap if isinstance(snap, Snapshot) else Snapshot.parse(snap)), ""

    async def once(self, source: SnapshotSource | None = None) -> CheckResult:
        """One fresh snapshot, judged as it is (no retries, no confidence gate)."""
        snap, error = await self._take(self._source(source))
        if snap is None:
            result = self._result(False, FailureKind.NO_SNAPSHOT, None, None, [
                Attempt(n=1, reason=FailureKind.NO_SNAPSHOT, confidence=None, action=RecoveryAction.GIVE_UP,
                        detail=error)])
        else:
            out = self.predicate.assess(snap)
            conf = confidence(snap).value
            action = RecoveryAction.DONE if out.passed else RecoveryAction.GIVE_UP
            result = self._result(out.passed, out.reason, out, snap,
                                  [Attempt(n=1, reason=out.reason, confidence=conf, action=action)])
        return await self._finish(result, self._source(source))

    async def eventually(
        self, source: SnapshotSource | None = None, *, timeout: float = EVENTUALLY_TIMEOUT,
        poll: float = EVENTUALLY_POLL, min_confidence: float = EVENTUALLY_MIN_CONFIDENCE,
        max_retries: int = EVENTUALLY_MAX_RETRIES,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> CheckResult:
        """Retry with fresh snapshots and backoff until it passes, times out or gives up.

        Pauses start at `poll` and grow ×1.5 up to `timeout / 4`; the pause that
        would pass the deadline is cut to end at it, so the last try looks at the
        page at the deadline. A snapshot may answer up to 1 s after it
        (`_waiting.READ_GRACE`); one that stalls longer ends the check as `timeout`.
        """
        src = self._source(source)
        waiter: Waiter[Attempt] = Waiter(timeout, poll, backoff=1.5, max_interval=timeout / 4,
                                         clock=clock, sleep=sleep)
        attempts = waiter.log
        counters: Counter[RecoveryAction] = Counter()
        low_streak = 0
        streak: tuple[FailureKind | None, int] = (None, 0)
        last: tuple[FailureKind | None, PredicateOutcome | None, Snapshot | None] = (None, None, None)
        n = 0
        while True:
            n += 1
            snap, error = await self._take(src, waiter)
            out: PredicateOutcome | None = None
            conf_value: float | None = None
            detail = error
            if snap is None:
                kind = FailureKind.NO_SNAPSHOT
            else:
                conf = confidence(snap)
                conf_value = conf.value
                if conf.value < min_confidence:
                    # Only a page that keeps changing is exhausted; one that is quiet but not
                    # trusted yet (a loading shell: no controls, a document still loading) is
                    # looked at again until the deadline.
                    low_streak = low_streak + 1 if conf.changing else 0
                    kind = (FailureKind.SNAPSHOT_EXHAUSTED if low_streak >= max_retries
                            else FailureKind.LOW_CONFIDENCE)
                    detail = "; ".join(conf.reasons)
                else:
                    low_streak = 0
                    out = self.predicate.assess(snap)
                    if out.passed:
                        attempts.append(Attempt(n=n, reason=None, confidence=conf_value, action=RecoveryAction.DONE))
                        return await self._finish(self._result(True, None, out, snap, attempts), src)
                    assert out.reason is not None
                    kind = out.reason
            if kind is not FailureKind.LOW_CONFIDENCE:
                last = (kind, out, snap)
            elif last[2] is None or last[0] is FailureKind.LOW_CONFIDENCE:
                last = (kind, None, snap)  # never judged yet: a timeout says so (last: low_confidence)
            streak = (kind, streak[1] + 1 if streak[0] is kind else 1)
            event = FailureEvent(kind, n, streak[1], conf_value, len(out.matches) if out else 0,
                                 self.vision is not None)
            action = self.policy.decide(event, counters)
            counters[action] += 1
            if action is RecoveryAction.GIVE_UP:
                attempts.append(Attempt(n=n, reason=kind, confidence=conf_value, action=action, detail=detail))
                return await self._failed(src, kind, last, attempts)
            if action is RecoveryAction.VISION:
                attempts.append(Attempt(n=n, reason=kind, confidence=conf_value, action=action, detail=detail))
                return await self._ask_vision(src, kind, last, attempts)
            if action is RecoveryAction.SCROLL:
                done, note = await self._scroll(src, out)
                attempts.append(Attempt(n=n, reason=kind, confidence=conf_value, action=action, detail=note))
                if done and not waiter.over:
                    continue  # look again at once: the scroll is the change we waited for
            elif action is RecoveryAction.RELOAD:
                done, note = await self._reload(src)
                attempts.append(Attempt(n=n, reason=kind, confidence=conf_value, action=action, detail=note))
                if done:
                    low_streak = 0
                    if not waiter.over:
                        continue
            elif action is RecoveryAction.RETRY:
                if kind is FailureKind.SNAPSHOT_EXHAUSTED:
                    low_streak = 0  # the policy chose to keep trying: start counting again
            else:
                raise ValueError(f"escalation policy returned {action!r}, not a recovery action")
            if waiter.over:  # this was the try at the deadline
                return await self._timed_out(src, n, kind, conf_value, detail, last, counters, attempts,
                                             streak[1], out)
            if action is RecoveryAction.RETRY:
                attempts.append(Attempt(n=n, reason=kind, confidence=conf_value, action=action, detail=detail))
            settle = 0.0
            if kind in (FailureKind.LOW_CONFIDENCE, FailureKind.SNAPSHOT_EXHAUSTED) and snap is not None \
                    and snap.quiet_ms < QUIET_SETTLED_MS:
                # Give a burst of mutations (a page finishing its load) the time it
                # needs to settle, so only a page that keeps mutating is exhausted.
                settle = (QUIET_SETTLED_MS - snap.quiet_ms) / 1000
            await waiter.pause(settle)

    async def _timed_out(self, src: SnapshotSource, n: int, kind: FailureKind, conf: float | None,
                         detail: str, last: tuple[FailureKind | None, PredicateOutcome | None, Snapshot | None],
                         counters: Counter[RecoveryAction], attempts: list[Attempt], streak: int,
                         out: PredicateOutcome | None) -> CheckResult:
        event = FailureEvent(FailureKind.TIMEOUT, n, streak, conf, len(out.matches) if out else 0,
                             self.vision is not None, last_kind=kind)
        action = self.policy.decide(event, counters)
        counters[action] += 1
        if action is RecoveryAction.VISION:
            attempts.append(Attempt(n=n, reason=kind, confidence=conf, action=action, detail=detail))
            return await self._ask_vision(src, FailureKind.TIMEOUT, last, attempts)
        note = detail if action is RecoveryAction.GIVE_UP else \
            f"no time left for {action.value}" + (f"; {detail}" if detail else "")
        attempts.append(Attempt(n=n, reason=kind, confidence=conf, action=RecoveryAction.GIVE_UP, detail=note))
        return await self._failed(src, FailureKind.TIMEOUT, last, attempts)

    async def _failed(self, src: SnapshotSource, reason: FailureKind,
                      last: tuple[FailureKind | None, PredicateOutcome | None, Snapshot | None],
                      attempts: list[Attempt]) -> CheckResult:
        return await self._finish(self._failure(reason, last, attempts), src)

    def _failure(self, reason: FailureKind,
                 last: tuple[FailureKind | None, PredicateOutcome | None, Snapshot | None],
                 attempts: list[Attempt]) -> CheckResult:
        last_kind, last_out, last_snap = last
        if reason is FailureKind.SNAPSHOT_EXHAUSTED:
            last_out = None  # the last snapshots were not judged
        result = self._result(False, reason, last_out, last_snap, attempts)
        if reason is FailureKind.TIMEOUT:
            result.last_reason = last_kind
        return result

    async def _scroll(self, src: SnapshotSource, out: PredicateOutcome | None) -> tuple[bool, str]:
        scroll = getattr(src, "scroll_into_view", None)
        if scroll is None:
            return False, "not done: the source cannot scroll"
        if out is None or not out.matches:
            return False, "not done: no match to scroll to"
        target = next((e for e in out.matches if e.visible), out.matches[0])
        try:
            await scroll(target)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            return False, f"scroll failed: {type(exc).__name__}"
        return True, target.label()

    async def _reload(self, src: SnapshotSource) -> tuple[bool, str]:
        reload = getattr(src, "reload", None)
        if reload is None:
            return False, "refused: the source cannot reload"
        try:
            accepted = await reload()
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            return False, f"refused: {type(exc).__name__}: {exc}"[:300]
        return (True, "reloaded") if accepted is not False else (False, "refused by the source")

    async def _ask_vision(self, src: SnapshotSource, reason: FailureKind,
                          last: tuple[FailureKind | None, PredicateOutcome | None, Snapshot | None],
                          attempts: list[Attempt]) -> CheckResult:
        result = self._failure(reason, last, attempts)
        attempts = result.attempts  # the result's own list: the log as it will be shown
        if self.vision is None:
            result.vision = None
            attempts[-1] = attempts[-1].model_copy(update={
                "action": RecoveryAction.VISION, "detail": "not done: this check enabled no vision fallback"})
            return await self._finish(result, src)
        shot = getattr(src, "screenshot", None)
        answer: bool | None = None
        problem = "" if shot is not None else "the source cannot take screenshots"
        proposal = ""
        if shot is not None:
            try:
                image = await shot()
                if self.vision.mode == "propose":
                    answer, proposal = await self._proposal(last[2], image)
                else:
                    answer = await self.vision.provider.ask(self.vision.question, image)
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:  # a failed question is an unsure answer, said in the log
                answer, problem = None, f"{type(exc).__name__}: {exc}"[:300]
        if problem or proposal:
            last_try = attempts[-1]
            attempts[-1] = last_try.model_copy(update={
                "detail": "; ".join(p for p in (last_try.detail, f"vision: {problem or proposal}") if p)})
        result.vision = {True: "yes", False: "no", None: "unsure"}[answer]
        said = "a proposed box on a matching element" if self.vision.mode == "propose" else "yes"
        if answer is True:
            result.passed, result.reason, result.last_reason = True, None, None
            result.actual = f"vision fallback: {said} for {self.vision.question!r}"
        elif answer is False:
            result.actual = f"vision fallback: {'no' if self.vision.mode == 'verify' else proposal} " \
                            f"for {self.vision.question!r}"
        return await self._finish(result, src)

    async def _proposal(self, snap: Snapshot | None, image: bytes) -> tuple[bool | None, str]:
        """Proposal mode: (answer, what happened) — see VisionFallback."""
        assert self.vision is not None
        if snap is None:
            return None, "no snapshot to check the proposal against"
        out = self.predicate.assess(snap)
        if not out.passed:
            # Vision cannot change the assertion: the snapshot itself must satisfy it.
            return False, f"the last snapshot does not satisfy the predicate ({out.reason})"
        if not out.matches:
            return None, "the predicate matched no element a box could point at"
        provider = self.vision.provider
        assert isinstance(provider, ProposingVisionProvider)  # checked when the fallback was made
        boxes = await provider.propose(self.vision.question, image)
        hit = next((e for e in out.matches if any(_under(b, e) for b in boxes)), None)
        if hit is None:
            return False, f"none of {len(boxes)} proposed box(es) lies on a matching element"
        return True, f"{len(boxes)} proposed box(es); one lies on {hit.label()}"

    def _result(self, passed: bool, reason: FailureKind | None, out: PredicateOutcome | None, snap: Snapshot | None,
                attempts: list[Attempt]) -> CheckResult:
        expected = out.expected if out else str(self.predicate)
        actual = out.actual if out else ("no snapshot" if snap is None else "snapshot not judged")
        near: list[Near] = []
        if not passed and snap is not None:
            query = (out.query if out and out.query else None) or next(iter(self.predicate.queries()), None)
            if query is not None:
                near = nearest(snap, query, self.nearest_n)
        return CheckResult(label=self.label, predicate=str(self.predicate), required=self.required,
                           passed=passed, reason=reason, expected=expected, actual=actual,
                           nearest=near, attempts=attempts,
                           confidence=confidence(snap).value if snap is not None else None,
                           url=snap.url if snap is not None else "", snapshot=snap)

    async def _finish(self, result: CheckResult, src: SnapshotSource) -> CheckResult:
        if not result.passed and self.artifacts_dir is not None:
            await self._write_artifacts(result, src)
        if self.on_trace is not None:
            self.on_trace(result.trace_event())
        if not result.passed and self.required:
            raise AssertionFailed(result)
        return result

    async def _write_artifacts(self, result: CheckResult, src: SnapshotSource) -> None:
        assert self.artifacts_dir is not None
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)
        base = _slug(self.label)
        k = 1
        while (self.artifacts_dir / f"{base}-{k}.trace.json").exists():
            k += 1
        stem = f"{base}-{k}"
        if result.snapshot is not None:
            name = f"{stem}.snapshot.json"
            atomic_write(self.artifacts_dir / name,
                         json.dumps(result.snapshot.redacted_json(), indent=1, ensure_ascii=False))
            result.artifacts["snapshot"] = name
        if hasattr(src, "screenshot"):
            try:
                png = await src.screenshot()
            except Exception:
                png = None
            if png:
                name = f"{stem}.png"
                atomic_write(self.artifacts_dir / name, png)
                result.artifacts["screenshot"] = name
        result.artifacts["trace"] = f"{stem}.trace.json"
        # The same redaction as the snapshot artifact, observer payloads and approval
        # evidence: nearest matches, actual values and the URL can carry credentials.
        from ..redaction.redactor import redact

        trace, _ = redact(result.trace_event())
        atomic_write(self.artifacts_dir / f"{stem}.trace.json",
                     json.dumps(trace, indent=1, sort_keys=True, ensure_ascii=False))


def check(predicate: Predicate, label: str, required: bool = False, *,
          source: SnapshotSource | None = None, vision: VisionFallback | None = None,
          artifacts_dir: str | Path | None = None, nearest_n: int = 3, policy: Escalation | None = None,
          on_trace: Callable[[dict[str, Any]], None] | None = None) -> Check:
    """Build a check; run it with `.once()` or `.eventually(...)`."""
    return Check(predicate, label, required, source=source, vision=vision, artifacts_dir=artifacts_dir,
                 nearest_n=nearest_n, policy=policy, on_trace=on_trace)


__all__ = ["REASONS", "AssertionFailed", "Attempt", "Check", "CheckResult", "Element",
           "ProposingVisionProvider", "SnapshotSource", "VisionFallback", "VisionProvider", "check"]
