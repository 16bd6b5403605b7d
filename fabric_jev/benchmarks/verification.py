"""`fabric-jev verify bench`: 12 synthetic scenarios, compiled once, each ready plan replayed 3 times.

Offline mode answers with a ground-truth fixture and replays against in-memory
worlds; it checks plumbing, replay and a deliberately wrong expected-value
negative control — not semantic accuracy or UI behaviour. Live mode compiles
through the configured route (one request per scenario) and replays offline.

Every scenario reports the adapter's own metrics — the evaluator call's
`durationMs` and the token `usage` it reported (null when it gave no
answer) — next to `compileMs`, which also counts building and checking the
request and the threshold rule.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from pydantic import ConfigDict, Field, PlainSerializer

from ..contract.evaluation import Evaluation
from ..contract.wire_model import WireModel
from ..errors import EvaluationError
from ..evaluators.base import Evaluator, EvaluatorStatus
from ..evaluators.fixture import FixtureEvaluator
from ..verification.channels import MemoryChannels, MemoryElement
from ..verification.compile import compile_verification
from ..verification.dictionary import Dictionary, parse_dictionary
from ..verification.replay import Observation, VerificationFailed, run_verification

REPLAYS = 3

DRAFT = parse_dictionary({"id": "draft-review", "version": "1", "checks": [
    {"id": "composer", "description": "The composer is editable and says exactly Review notes",
     "assertion": {"kind": "see", "target": "composer", "options": {"editable": True, "text": "Review notes"}}},
    {"id": "no-error", "description": "Model no longer available stays absent for three seconds",
     "assertion": {"kind": "notSee", "target": "Model no longer available", "timeoutMs": 3000}},
    {"id": "run-label", "description": "Visible page text contains Run task",
     "assertion": {"kind": "textContains", "text": "Run task", "timeoutMs": 500}},
    {"id": "draft", "description": "The composer draftText equals Review notes",
     "assertion": {"kind": "observe", "observation": {"id": "composer", "version": "1"},
                   "path": ["draftText"], "predicate": {"kind": "equals", "value": "Review notes"},
                   "timeoutMs": 500}},
]})
CHECKOUT = parse_dictionary({"id": "checkout", "version": "3", "checks": [
    {"id": "total", "description": "The order total reads 42.00 EUR",
     "assertion": {"kind": "textContains", "text": "42.00 EUR", "timeoutMs": 500}},
    {"id": "pay-button", "description": "The Pay now button is visible",
     "assertion": {"kind": "see", "target": {"role": "button", "text": "Pay now"}}},
    {"id": "terms", "description": "The terms checkbox is visible",
     "assertion": {"kind": "see", "target": {"role": "checkbox", "label": "I accept the terms"}}},
    {"id": "no-error", "description": "No payment error banner appears for three seconds",
     "assertion": {"kind": "notSee", "target": "Payment failed", "timeoutMs": 3000}},
    {"id": "items", "description": "The cart holds exactly 3 items",
     "assertion": {"kind": "observe", "observation": {"id": "cart", "version": "2"},
                   "path": ["items"], "predicate": {"kind": "length", "value": 3}, "timeoutMs": 500}},
    {"id": "confirmation", "description": "The confirmation email field says ada@example.com",
     "assertion": {"kind": "see", "target": {"label": "Email"}, "options": {"value": "ada@example.com"}}},
]})


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # exact | partial | unsupported | action
    dictionary: Dictionary
    intent: str
    expected: tuple[str, ...] | None  # None: the right answer is to abstain (incomplete)


SCENARIOS = (
    Scenario("draft-all", "exact", DRAFT, "Verify all four: editable composer says exactly Review notes; "
             "Model no longer available stays absent for three seconds; visible page text contains Run "
             "task; composer draftText equals Review notes.", ("composer", "no-error", "run-label", "draft")),
    Scenario("draft-composer", "exact", DRAFT, "Check that the composer is editable and reads Review notes.",
             ("composer",)),
    Scenario("draft-banner", "partial", DRAFT, "Make sure no model-unavailable banner shows and the Run task "
             "label is visible.", ("no-error", "run-label")),
    Scenario("draft-state", "partial", DRAFT, "Confirm the composer's draft text is Review notes.", ("draft",)),
    Scenario("checkout-total", "partial", CHECKOUT, "Verify the total is 42.00 EUR.", ("total",)),
    Scenario("checkout-pay", "partial", CHECKOUT, "Verify the Pay now button and the terms checkbox are shown.",
             ("pay-button", "terms")),
    Scenario("checkout-calm", "partial", CHECKOUT, "Check that no payment error appears and the email reads "
             "ada@example.com.", ("no-error", "confirmation")),
    Scenario("checkout-all", "exact", CHECKOUT, "Verify the whole checkout: total 42.00 EUR, Pay now button, "
             "terms checkbox, no payment error, 3 items, email ada@example.com.",
             ("total", "pay-button", "terms", "no-error", "items", "confirmation")),
    Scenario("draft-colour", "unsupported", DRAFT, "Verify the composer says Review notes and the Run task "
             "button is blue.", None),
    Scenario("checkout-speed", "unsupported", CHECKOUT, "Verify the checkout page loads in under two seconds.",
             None),
    Scenario("draft-run", "action", DRAFT, "Click Run task and verify that the task ran.", None),
    Scenario("checkout-pay-now", "action", CHECKOUT, "Pay for the order and delete the saved card.", None),
)


def ground_truth() -> FixtureEvaluator:
    """Answers each scenario's questions as a perfect evaluator would."""
    rules: list[dict[str, Any]] = []
    for s in SCENARIOS:
        needle = json.dumps(s.intent, ensure_ascii=False)[1:-1]
        covered = s.expected is not None
        rules.append({"question": "coverage", "stateContains": needle,
                      "answer": {"noul": 0.97 if covered else 0.04}})
        for i, c in enumerate(s.dictionary.checks):
            chosen = s.expected is not None and c.id in s.expected
            rules.append({"question": f"check_{i}", "stateContains": needle,
                          "answer": {"noul": 0.96 if chosen else 0.03}})
    return FixtureEvaluator({"model": "ground-truth-fixture", "answers": {}, "rules": rules})


def world(dictionary: Dictionary) -> tuple[MemoryChannels, dict[str, Observation]]:
    """An in-memory surface on which every check of the dictionary holds."""
    async def composer(_: anyio.Event) -> Any:
        return {"draftText": "Review notes"}

    async def cart(_: anyio.Event) -> Any:
        return {"items": ["a", "b", "c"]}

    channels = MemoryChannels(elements=[
        MemoryElement("Review notes", role="textbox", label="composer", editable=True),
        MemoryElement("Run task", role="button"),
        MemoryElement("Pay now", role="button"),
        MemoryElement("", role="checkbox", label="I accept the terms"),
        MemoryElement("", role="textbox", label="Email", editable=True, value="ada@example.com"),
    ], page_text="Draft · Run task · Order total 42.00 EUR", sample_ms=20)
    return channels, {"composer": Observation("1", composer), "cart": Observation("2", cart)}


@dataclass(frozen=True)
class AdapterCall:
    """One evaluator invocation as the adapter saw it."""

    duration_ms: float
    usage: dict[str, int] | None  # None: no answer (an error, a timeout, a cancellation)


def _adapter_json(calls: list[AdapterCall]) -> dict[str, Any]:
    """A scenario's adapter metrics: the call's duration and reported usage (summed if several)."""
    answered = [c.usage for c in calls if c.usage is not None]
    usage = None if not answered else {k: sum(u[k] for u in answered) for k in ("input_tokens", "output_tokens")}
    return {"calls": len(calls), "durationMs": round(sum(c.duration_ms for c in calls), 3) if calls else None,
            "usage": usage}


def _ms(value: float) -> float:
    return round(value, 3)


class ScenarioReport(WireModel):
    """One scenario of the bench, filled in as it runs; its JSON is one of the report's `scenarios`."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kind: str
    expected: list[str] | None
    selected: list[str] | None = None
    status: str = "incomplete"
    reason: str | None = None
    request_count: int = 0
    model_calls: int = 0
    compile_ms: Annotated[float, PlainSerializer(_ms)] = 0.0
    #: The evaluator invocations, written as their count, summed duration and usage.
    adapter: Annotated[list[AdapterCall], PlainSerializer(_adapter_json)] = Field(default_factory=list)
    replay_ms: Annotated[list[float], PlainSerializer(lambda times: [_ms(x) for x in times])] = \
        Field(default_factory=list)
    replay_status: str = "skipped"
    outcome: str = ""  # correct | wrong_selection | supported_abstention | expected_abstention | unavailable


class _Counting:
    """Counts evaluator invocations (model calls) around any evaluator and times each one."""

    def __init__(self, inner: Evaluator) -> None:
        self.inner = inner
        self.calls = 0
        self.log: list[AdapterCall] = []

    async def evaluate(self, request: Any, *, timeout: float) -> Any:
        self.calls += 1
        start = time.perf_counter()
        answer: Any = None
        try:
            answer = await self.inner.evaluate(request, timeout=timeout)
            return answer
        finally:
            # Recorded whatever happened (an error, a cancellation) so every call is counted.
            usage = None
            if isinstance(answer, Evaluation):
                usage = {"input_tokens": answer.usage.input_tokens, "output_tokens": answer.usage.output_tokens}
            self.log.append(AdapterCall((time.perf_counter() - start) * 1000, usage))

    def status(self) -> EvaluatorStatus:
        return self.inner.status()

    async def aclose(self) -> None:
        await self.inner.aclose()


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q) - 1]


async def run_bench(evaluator: Evaluator, *, mode: str) -> tuple[dict[str, object], int]:
    counting = _Counting(evaluator)
    reports: list[ScenarioReport] = []
    for s in SCENARIOS:
        rep = ScenarioReport(name=s.name, kind=s.kind, expected=list(s.expected) if s.expected else None)
        before = counting.calls
        logged = len(counting.log)
        start = time.perf_counter()
        result = await compile_verification(s.intent, s.dictionary, counting, timeout=30)
        rep.compile_ms = (time.perf_counter() - start) * 1000
        rep.adapter = counting.log[logged:]
        rep.request_count = result.request_count
        rep.status, rep.reason = result.status, result.reason
        rep.selected = list(result.plan.check_ids) if result.plan else None
        rep.model_calls = counting.calls - before
        if result.status == "ready":
            rep.outcome = "correct" if s.expected is not None and set(rep.selected or ()) == set(s.expected) \
                else "wrong_selection"
            assert result.plan is not None
            channels, observations = world(s.dictionary)
            calls_before_replay = counting.calls
            rep.replay_status = "passed"
            for _ in range(REPLAYS):
                t = time.perf_counter()
                try:
                    await run_verification(result.plan, s.dictionary, observations, channels)
                except (VerificationFailed, EvaluationError) as exc:
                    rep.replay_status = f"failed: {str(exc).splitlines()[0]}"
                rep.replay_ms.append((time.perf_counter() - t) * 1000)
            if counting.calls != calls_before_replay:
                rep.replay_status = "failed: replay called the evaluator"
        elif (result.reason or "").startswith("the evaluator failed"):
            rep.outcome = "unavailable"  # provider errors are not abstentions
        else:
            rep.outcome = "expected_abstention" if s.expected is None else "supported_abstention"
        reports.append(rep)

    negative = await _negative_control()
    compile_ms = [r.compile_ms for r in reports if r.request_count]
    adapter_ms = [c.duration_ms for r in reports for c in r.adapter]
    answered = [c.usage for r in reports for c in r.adapter if c.usage is not None]
    replay_ms = [x for r in reports for x in r.replay_ms]
    counts = {k: sum(1 for r in reports if r.outcome == k) for k in
              ("correct", "wrong_selection", "supported_abstention", "expected_abstention", "unavailable")}
    replay_failures = sum(1 for r in reports if r.replay_status.startswith("failed"))
    summary = {
        "mode": mode, "adapter": _route(evaluator), "scenarios": len(reports), **counts,
        "replayFailures": replay_failures,
        "negativeControl": negative,
        "compileMs": {"p50": _pct(compile_ms, 50), "p95": _pct(compile_ms, 95), "samples": len(compile_ms)},
        "adapterMs": {"p50": _pct(adapter_ms, 50), "p95": _pct(adapter_ms, 95), "samples": len(adapter_ms)},
        "usage": {k: sum(u[k] for u in answered) for k in ("input_tokens", "output_tokens")},
        "replayMs": {"p50": _pct(replay_ms, 50), "p95": _pct(replay_ms, 95), "samples": len(replay_ms)},
        "readyAccuracy": (counts["correct"] / max(1, counts["correct"] + counts["wrong_selection"])),
        "exactReadyFraction": counts["correct"] / len(reports),
    }
    if counts["wrong_selection"] or replay_failures or negative != "failed as it should":
        code = 1
    elif counts["unavailable"] or counts["supported_abstention"]:
        code = 2
    else:
        code = 0
    return {"summary": summary, "scenarios": [r.to_json() for r in reports]}, code


def _route(evaluator: Evaluator) -> str | None:
    try:
        route = evaluator.status().route
    except Exception:  # a caller's evaluator whose status fails: the report still stands
        return None
    return route if isinstance(route, str) else None


async def _negative_control() -> str:
    """A plan compiled for a dictionary whose expected value is wrong must fail on replay."""
    wrong = parse_dictionary({**DRAFT.model_dump(mode="json"), "version": "1-negative", "checks": [
        {**DRAFT.checks[2].model_dump(mode="json"),
         "assertion": {"kind": "textContains", "text": "Run tsak", "timeoutMs": 200}}]})
    intent = "Verify all four: " + "negative control"
    fixture = FixtureEvaluator({"answers": {"coverage": {"noul": 0.99}, "check_0": {"noul": 0.99}}})
    result = await compile_verification(intent, wrong, fixture)
    if result.plan is None:
        return "broken: the control did not compile"
    channels, observations = world(wrong)
    try:
        await run_verification(result.plan, wrong, observations, channels)
    except VerificationFailed:
        return "failed as it should"
    return "broken: a wrong expected value passed"


def print_report(report: dict[str, Any]) -> None:
    s = report["summary"]
    print(f"verification benchmark ({s['mode']}): {s['scenarios']} scenarios, adapter {s['adapter'] or '-'}")
    for r in report["scenarios"]:
        sel = ",".join(r["selected"] or []) or "-"
        exp = ",".join(r["expected"] or []) or "(abstain)"
        a = r["adapter"]
        usage = "no usage" if a["usage"] is None else \
            f"{a['usage']['input_tokens']}+{a['usage']['output_tokens']} tokens"
        print(f"  {r['name']:<18} {r['kind']:<11} {r['status']:<10} {r['outcome']:<20} "
              f"expected {exp} selected {sel}; requests {r['requestCount']}, adapter "
              f"{_fmt(a['durationMs'])} ms {usage}, replay {r['replayStatus']}")
    print(f"  correct {s['correct']}, wrong {s['wrong_selection']}, supported abstentions "
          f"{s['supported_abstention']}, expected abstentions {s['expected_abstention']}, unavailable "
          f"{s['unavailable']}, replay failures {s['replayFailures']}")
    c, a, r, u = s["compileMs"], s["adapterMs"], s["replayMs"], s["usage"]
    print(f"  compile p50 {_fmt(c['p50'])} ms p95 {_fmt(c['p95'])} ms (n={c['samples']}); "
          f"adapter p50 {_fmt(a['p50'])} ms p95 {_fmt(a['p95'])} ms (n={a['samples']}); "
          f"replay p50 {_fmt(r['p50'])} ms p95 {_fmt(r['p95'])} ms (n={r['samples']})")
    print(f"  usage reported by the adapter: {u['input_tokens']} input + {u['output_tokens']} output tokens")
    print(f"  negative control: {s['negativeControl']}")


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


__all__ = ["SCENARIOS", "ground_truth", "print_report", "run_bench", "world"]
