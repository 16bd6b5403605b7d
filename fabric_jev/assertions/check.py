"""`check(predicate, label, required).once()` and `.eventually(...)`: the assertion funnel.

Every try takes a fresh snapshot. A snapshot whose confidence is below
`min_confidence` is not judged; after `max_retries` such snapshots in a row
the check is `snapshot_exhausted` (and, only if enabled for this check, a
vision provider may answer one narrow yes/no question instead). Failures
carry a reason code, the nearest matches and the attempt log; a failed
`required` check raises `AssertionFailed`.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio

from .._files import atomic_write
from .nearest import Near, nearest
from .predicates import Outcome, Predicate
from .snapshot import QUIET_SETTLED_MS, Element, Snapshot, confidence

REASONS = ("no_snapshot", "no_match", "match_offscreen", "match_occluded", "state_mismatch",
           "snapshot_exhausted", "timeout")
TRACE_TYPE = "fabric_jev.check"


@runtime_checkable
class SnapshotSource(Protocol):
    """What a driver offers: fresh snapshots; optionally scrolling and screenshots."""

    async def snapshot(self) -> Snapshot: ...


@runtime_checkable
class VisionProvider(Protocol):
    async def ask(self, question: str, image: bytes) -> bool | None:
        """Answer one narrow yes/no question about a screenshot; None when unsure."""
        ...


@dataclass(frozen=True)
class VisionFallback:
    """Enabled per check: may turn an otherwise-exhausted check into pass or fail."""

    provider: VisionProvider
    question: str


@dataclass(frozen=True)
class EscalationPolicy:
    """Failure kind → recovery action, bounded and deterministic given the counters."""

    max_scrolls: int = 2

    def decide(self, reason: str, counters: Counter[str], vision: bool) -> str:
        if reason == "match_offscreen":
            return "scroll" if counters["scroll"] < self.max_scrolls else "retry"
        if reason == "snapshot_exhausted":
            return "vision" if vision else "give_up"
        if reason == "timeout":
            return "give_up"
        return "retry"  # no_snapshot, no_match, match_occluded, state_mismatch, low confidence


@dataclass(frozen=True)
class Attempt:
    n: int
    reason: str | None
    confidence: float | None
    action: str
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "reason": self.reason, "confidence": self.confidence,
                "action": self.action, "detail": self.detail}


@dataclass
class CheckResult:
    label: str
    predicate: str
    required: bool
    passed: bool
    reason: str | None
    expected: str
    actual: str
    last_reason: str | None = None
    nearest: list[Near] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    confidence: float | None = None
    url: str = ""
    vision: str | None = None  # "yes" / "no" / "unsure" when the fallback was asked
    artifacts: dict[str, str] = field(default_factory=dict)
    snapshot: Snapshot | None = None

    def message(self) -> str:
        head = f'check "{self.label}" ' + ("passed" if self.passed else f"failed: {self.reason}")
        if self.reason == "timeout" and self.last_reason:
            head += f" (last: {self.last_reason})"
        lines = [head, f"  expected: {self.expected}", f"  actual:   {self.actual}"]
        if self.nearest and not self.passed:
            lines.append("  nearest:")
            lines += [f"    {i}. {n.element.label()} ({n.why}, score {n.score:.2f})"
                      for i, n in enumerate(self.nearest, 1)]
        if self.vision:
            lines.append(f"  vision fallback answered: {self.vision}")
        lines.append("  log:")
        for a in self.attempts:
            conf = "n/a" if a.confidence is None else f"{a.confidence:.2f}"
            lines.append(f"    #{a.n} {a.reason or 'passed'} (confidence {conf}) -> {a.action}"
                         + (f": {a.detail}" if a.detail else ""))
        if self.artifacts:
            lines.append("  artifacts: " + ", ".join(f"{k}={v}" for k, v in sorted(self.artifacts.items())))
        return "\n".join(lines)

    def trace_event(self) -> dict[str, Any]:
        """A stable, JSON-serialisable record (no timestamps), for logs and golden files."""
        return {"type": TRACE_TYPE, "version": 1, "label": self.label, "predicate": self.predicate,
                "required": self.required, "passed": self.passed, "reason": self.reason,
                "lastReason": self.last_reason, "expected": self.expected, "actual": self.actual,
                "nearest": [n.to_json() for n in self.nearest],
                "attempts": [a.to_json() for a in self.attempts], "confidence": self.confidence,
                "url": self.url, "vision": self.vision, "artifacts": dict(sorted(self.artifacts.items()))}


class AssertionFailed(AssertionError):
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
                 policy: EscalationPolicy | None = None,
                 on_trace: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.predicate = predicate
        self.label = label
        self.required = required
        self.source = source
        self.vision = vision
        self.artifacts_dir = Path(artifacts_dir) if artifacts_dir is not None else None
        self.nearest_n = nearest_n
        self.policy = policy or EscalationPolicy()
        self.on_trace = on_trace

    def _source(self, source: SnapshotSource | None) -> SnapshotSource:
        src = source or self.source
        if src is None:
            raise ValueError("check needs a snapshot source (pass one to check() or once/eventually)")
        return src

    async def _take(self, source: SnapshotSource) -> tuple[Snapshot | None, str]:
        try:
            snap = await source.snapshot()
        except Exception as exc:  # the page is gone, navigating, or the driver failed
            return None, f"{type(exc).__name__}: {exc}"[:300]
        return (snap if isinstance(snap, Snapshot) else Snapshot.parse(snap)), ""

    async def once(self, source: SnapshotSource | None = None) -> CheckResult:
        """One fresh snapshot, judged as it is (no retries, no confidence gate)."""
        snap, error = await self._take(self._source(source))
        if snap is None:
            result = self._result(False, "no_snapshot", None, None, [Attempt(1, "no_snapshot", None,
                                                                           "give_up", error)])
        else:
            out = self.predicate.evaluate(snap)
            conf = confidence(snap).value
            result = self._result(out.passed, out.reason, out, snap,
                                  [Attempt(1, out.reason, conf, "done" if out.passed else "give_up")])
        return await self._finish(result, self._source(source))

    async def eventually(
        self, source: SnapshotSource | None = None, *, timeout: float = 5.0, poll: float = 0.1,
        min_confidence: float = 0.6, max_retries: int = 3,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> CheckResult:
        """Retry with fresh snapshots and backoff until it passes, times out or is exhausted."""
        src = self._source(source)
        start = clock()
        attempts: list[Attempt] = []
        counters: Counter[str] = Counter()
        low_streak = 0
        delay = poll
        last: tuple[str | None, Outcome | None, Snapshot | None] = (None, None, None)
        n = 0
        while True:
            n += 1
            snap, error = await self._take(src)
            out: Outcome | None = None
            conf_value: float | None = None
            detail = error
            if snap is None:
                reason: str | None = "no_snapshot"
            else:
                conf = confidence(snap)
                conf_value = conf.value
                if conf.value < min_confidence:
                    low_streak += 1
                    reason = "snapshot_exhausted" if low_streak >= max_retries else "low_confidence"
                    detail = "; ".join(conf.reasons)
                else:
                    low_streak = 0
                    out = self.predicate.evaluate(snap)
                    reason = out.reason
                    if out.passed:
                        attempts.append(Attempt(n, None, conf_value, "done"))
                        return await self._finish(self._result(True, None, out, snap, attempts), src)
            if reason != "low_confidence":
                last = (reason, out, snap)
            elif last[2] is None:
                last = (None, None, snap)
            assert reason is not None
            action = self.policy.decide(reason, counters, self.vision is not None)
            if reason == "snapshot_exhausted":
                attempts.append(Attempt(n, reason, conf_value, action, detail))
                return await self._exhausted(src, snap, attempts, action)
            if action == "scroll" and out is not None and out.matches and hasattr(src, "scroll_into_view"):
                counters["scroll"] += 1
                target = next((e for e in out.matches if e.visible), out.matches[0])
                attempts.append(Attempt(n, reason, conf_value, "scroll", target.label()))
                try:
                    await src.scroll_into_view(target)
                except Exception as exc:
                    attempts[-1] = Attempt(n, reason, conf_value, "scroll",
                                           f"scroll failed: {type(exc).__name__}")
                continue
            if clock() - start + delay > timeout:
                attempts.append(Attempt(n, reason, conf_value, "give_up", detail))
                last_reason, last_out, last_snap = last
                result = self._result(False, "timeout", last_out, last_snap, attempts)
                result.last_reason = last_reason if last_reason != "low_confidence" else None
                return await self._finish(result, src)
            attempts.append(Attempt(n, reason, conf_value, "retry", detail))
            counters["retry"] += 1
            wait = delay
            if reason == "low_confidence" and snap is not None and snap.quiet_ms < QUIET_SETTLED_MS:
                # Give a burst of mutations (a page finishing its load) the time it
                # needs to settle, so only a page that keeps mutating is exhausted.
                wait = max(delay, (QUIET_SETTLED_MS - snap.quiet_ms) / 1000)
            wait = min(wait, max(0.0, timeout - (clock() - start)))
            await sleep(wait)
            delay = min(delay * 1.5, max(poll, timeout / 4))

    async def _exhausted(self, src: SnapshotSource, snap: Snapshot | None, attempts: list[Attempt],
                         action: str) -> CheckResult:
        result = self._result(False, "snapshot_exhausted", None, snap, attempts)
        if action == "vision" and self.vision is not None and hasattr(src, "screenshot"):
            try:
                image = await src.screenshot()
                answer = await self.vision.provider.ask(self.vision.question, image)
            except Exception:
                answer = None
            result.vision = {True: "yes", False: "no", None: "unsure"}[answer]
            if answer is True:
                result.passed, result.reason = True, None
                result.actual = f"vision fallback: yes to {self.vision.question!r}"
            elif answer is False:
                result.actual = f"vision fallback: no to {self.vision.question!r}"
        return await self._finish(result, src)

    def _result(self, passed: bool, reason: str | None, out: Outcome | None, snap: Snapshot | None,
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
        atomic_write(self.artifacts_dir / f"{stem}.trace.json",
                     json.dumps(result.trace_event(), indent=1, sort_keys=True, ensure_ascii=False))


def check(predicate: Predicate, label: str, required: bool = False, **options: Any) -> Check:
    """Build a check; run it with `.once()` or `.eventually(...)`."""
    return Check(predicate, label, required, **options)


__all__ = ["REASONS", "AssertionFailed", "Attempt", "Check", "CheckResult", "Element",
           "EscalationPolicy", "SnapshotSource", "VisionFallback", "VisionProvider", "check"]
