"""Verification dictionaries (contract §11)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from fabric_jev import FixtureEvaluator, JevError
from fabric_jev.contract.evaluation import Evaluation, EvaluationUsage
from fabric_jev.evaluators import TYPESAFE, AuthStore, CredentialResolver, HttpEvaluator
from fabric_jev.evaluators.base import EvaluatorStatus
from fabric_jev.verification import (
    DictionaryInvalid,
    MemoryChannels,
    MemoryElement,
    Observation,
    PlanInvalid,
    VerificationFailed,
    compile_verification,
    dictionary_digest,
    parse_dictionary,
    run_verification,
)
from tests.upstream import mock

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parent.parent

DICT: dict[str, Any] = {"id": "draft-review", "version": "1", "checks": [
    {"id": "composer", "description": "The composer is editable and says exactly Review notes",
     "assertion": {"kind": "see", "target": "composer", "options": {"editable": True, "text": "Review notes"}}},
    {"id": "no-error", "description": "Model no longer available stays absent for three seconds",
     "assertion": {"kind": "notSee", "target": "Model no longer available", "timeoutMs": 60}},
    {"id": "run-label", "description": "Visible page text contains Run task",
     "assertion": {"kind": "textContains", "text": "Run task", "timeoutMs": 300}},
    {"id": "draft", "description": "The composer draftText equals Review notes",
     "assertion": {"kind": "observe", "observation": {"id": "composer", "version": "1"},
                   "path": ["draftText"], "predicate": {"kind": "equals", "value": "Review notes"},
                   "timeoutMs": 300}},
]}
INTENT = "Verify the composer, the missing error, the Run task label and the draft text."
ALL = {"coverage": {"noul": 0.97}, **{f"check_{i}": {"noul": 0.95} for i in range(4)}}


def fixture(answers: dict[str, Any] = ALL) -> FixtureEvaluator:
    return FixtureEvaluator({"answers": answers})


def world(draft: str = "Review notes") -> tuple[MemoryChannels, dict[str, Observation]]:
    async def read(_: anyio.Event) -> Any:
        return {"draftText": draft}

    channels = MemoryChannels(elements=[MemoryElement("Review notes", role="textbox", label="composer",
                                                      editable=True)], page_text="Run task", sample_ms=10)
    return channels, {"composer": Observation("1", read)}


async def ready_plan(d: dict[str, Any] = DICT) -> Any:
    result = await compile_verification(INTENT, d, fixture())
    assert result.status == "ready" and result.plan is not None
    return result.plan


# ---------------------------------------------------------------- dictionary and digest


@pytest.mark.parametrize(("mutate", "needle"), [
    (lambda d: d.update(checks=[]), "at least 1"),
    (lambda d: d.update(checks=d["checks"] * 9), "at most 32"),
    (lambda d: d["checks"].append(copy.deepcopy(d["checks"][0])), "unique"),
    (lambda d: d["checks"][3]["assertion"].update(path=["__proto__"]), "unsafe path step"),
    (lambda d: d["checks"][3]["assertion"].update(path=["constructor"]), "unsafe path step"),
    (lambda d: d["checks"][3]["assertion"].update(path=["a"] * 9), "at most 8"),
    (lambda d: d["checks"][3]["assertion"]["predicate"].update(kind="atLeast", value="3"), "finite number"),
    (lambda d: d["checks"][3]["assertion"]["predicate"].update(kind="matches"), "predicate"),
    (lambda d: d["checks"][0]["assertion"].update(target={"nth": 1}), "besides nth"),
    (lambda d: d["checks"][0]["assertion"].update(target={"role": "slider"}), "role"),
    (lambda d: d["checks"][0]["assertion"].update(target={"text": "x", "regex": "x+"}), "regex"),
    (lambda d: d["checks"][2]["assertion"].update(text={"pattern": "Run.*"}), "text"),
    (lambda d: d["checks"][1].update(extra=True), "extra"),
])
def test_dictionary_rules(mutate: Any, needle: str) -> None:
    d = copy.deepcopy(DICT)
    mutate(d)
    with pytest.raises(DictionaryInvalid, match=needle):
        parse_dictionary(d)


@pytest.mark.parametrize("change", [
    lambda d: d.update(id="other"),
    lambda d: d.update(version="2"),
    lambda d: d["checks"][0].update(id="composer-2"),
    lambda d: d["checks"][0].update(description="The composer is editable"),
    lambda d: d["checks"][0]["assertion"].update(target="editor"),
    lambda d: d["checks"][0]["assertion"]["options"].update(editable=False),
    lambda d: d["checks"][0]["assertion"]["options"].update(text="Review"),
    lambda d: d["checks"][1]["assertion"].update(timeoutMs=3001),
    lambda d: d["checks"][2]["assertion"].update(text="Run"),
    lambda d: d["checks"][3]["assertion"]["observation"].update(version="2"),
    lambda d: d["checks"][3]["assertion"]["observation"].update(id="editor"),
    lambda d: d["checks"][3]["assertion"].update(path=["draft", "text"]),
    lambda d: d["checks"][3]["assertion"]["predicate"].update(kind="includes"),
    lambda d: d["checks"][3]["assertion"]["predicate"].update(value="Review"),
])
def test_every_covered_field_changes_the_digest(change: Any) -> None:
    d = copy.deepcopy(DICT)
    change(d)
    assert dictionary_digest(parse_dictionary(d)) != dictionary_digest(parse_dictionary(DICT))


def test_digest_ignores_key_order_and_explicit_defaults() -> None:
    reordered = json.loads(json.dumps(DICT, sort_keys=True))
    reordered["checks"][0] = dict(reversed(list(reordered["checks"][0].items())))
    explicit = copy.deepcopy(DICT)
    explicit["checks"][0]["assertion"]["options"]["timeoutMs"] = 5000
    base = dictionary_digest(parse_dictionary(DICT))
    assert dictionary_digest(parse_dictionary(reordered)) == base
    assert dictionary_digest(parse_dictionary(explicit)) == base
    assert base.startswith("sha256:") and len(base) == 7 + 64


# ---------------------------------------------------------------- compile


async def test_one_request_with_coverage_and_relevance_and_nothing_private() -> None:
    ev = fixture()
    result = await compile_verification(INTENT, DICT, ev)
    assert result.status == "ready" and result.request_count == 1 and ev.calls == 1
    [request] = ev.requests
    assert [q.id for q in request.questions] == ["coverage", "check_0", "check_1", "check_2", "check_3"]
    assert "action" in request.questions[0].instructions.lower()
    assert "not whether" in request.questions[1].instructions
    sent = json.dumps(request.to_wire("jev-latest"))
    # Descriptions leave; targets, expected values and observation bindings do not.
    for private in ('"assertion"', '"target"', '"options"', '"predicate"', '"observation"', '"path"',
                    "timeoutMs", '"kind"'):
        assert private not in sent
    plan = result.plan
    assert plan is not None and plan.to_json()["schemaVersion"] == 1
    assert plan.to_json() == {"schemaVersion": 1, "dictionaryDigest": dictionary_digest(parse_dictionary(DICT)),
                              "intent": INTENT, "checkIds": ["composer", "no-error", "run-label", "draft"],
                              "probabilities": {"coverage": 0.97, "composer": 0.95, "no-error": 0.95,
                                                "run-label": 0.95, "draft": 0.95}}


@pytest.mark.parametrize(("answers", "status", "selected", "needle"), [
    ({**ALL, "coverage": {"noul": 0.9}}, "ready", 4, None),
    ({**ALL, "coverage": {"noul": 0.89}}, "incomplete", None, "coverage 0.89"),
    ({**ALL, "check_1": {"noul": 0.1}, "check_3": {"noul": 0.0}}, "ready", 2, None),
    ({**ALL, "check_2": {"noul": 0.5}}, "incomplete", None, "uncertain for run-label"),
    ({**ALL, "check_2": {"noul": 0.11}}, "incomplete", None, "uncertain"),
    ({**ALL, "check_2": {"noul": 0.89}}, "incomplete", None, "uncertain"),
    ({"coverage": {"noul": 0.99}, **{f"check_{i}": {"noul": 0.02} for i in range(4)}}, "incomplete", None,
     "no check was selected"),
])
async def test_threshold_rule(answers: dict[str, Any], status: str, selected: int | None,
                              needle: str | None) -> None:
    result = await compile_verification(INTENT, DICT, fixture(answers))
    assert result.status == status
    if selected is not None:
        assert result.plan is not None and len(result.plan.check_ids) == selected
    else:
        assert result.plan is None and needle is not None and needle in (result.reason or "")


async def test_invalid_caller_data_raises_before_any_request() -> None:
    ev = fixture()
    with pytest.raises(JevError, match="intent"):
        await compile_verification("  ", DICT, ev)
    with pytest.raises(DictionaryInvalid):
        await compile_verification(INTENT, {"id": "x"}, ev)
    assert ev.calls == 0


async def test_cancellation_gives_incomplete() -> None:
    cancelled = anyio.Event()
    cancelled.set()
    ev = fixture()
    result = await compile_verification(INTENT, DICT, ev, cancel=cancelled)
    assert result.status == "incomplete" and result.request_count == 0 and ev.calls == 0


class Custom:
    """A caller's own evaluator (no validation of its own), scripted per test."""

    def __init__(self, behave: Any) -> None:
        self.behave = behave
        self.started = anyio.Event()
        self.calls = 0

    async def evaluate(self, request: Any, *, timeout: float) -> Any:
        self.calls += 1
        self.started.set()
        return await self.behave(request)

    def status(self) -> EvaluatorStatus:
        return EvaluatorStatus("custom", "custom")

    async def aclose(self) -> None:
        return None


def good(request: Any) -> Evaluation:
    return Evaluation({q.id: {"noul": 0.97} for q in request.questions}, EvaluationUsage(10, 5), "custom")


async def test_an_evaluator_that_ignores_its_timeout_cannot_hold_compile_past_it() -> None:
    async def forever(request: Any) -> Any:
        await anyio.sleep_forever()

    ev = Custom(forever)
    result = await compile_verification(INTENT, DICT, ev, timeout=0.2)  # type: ignore[arg-type]
    assert result.status == "incomplete" and result.plan is None and ev.calls == 1
    assert result.reason == "the evaluator failed: no answer within 0.2 s" and result.request_count == 1


async def test_an_evaluator_that_ignores_the_cancel_event_is_cancelled_by_compile() -> None:
    async def forever(request: Any) -> Any:
        await anyio.sleep_forever()

    ev, cancel = Custom(forever), anyio.Event()
    out: list[Any] = []
    async with anyio.create_task_group() as tg:
        async def run() -> None:
            out.append(await compile_verification(INTENT, DICT, ev, timeout=30, cancel=cancel))  # type: ignore[arg-type]

        tg.start_soon(run)
        await ev.started.wait()
        cancel.set()
    [result] = out
    assert result.status == "incomplete" and result.reason == "the evaluator failed: cancelled"


async def test_a_late_answer_from_an_evaluator_that_swallows_cancellation_is_not_used() -> None:
    async def stubborn(request: Any) -> Any:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            return good(request)  # swallowed: a perfect answer, after the deadline

    result = await compile_verification(INTENT, DICT, Custom(stubborn), timeout=0.2)  # type: ignore[arg-type]
    assert result.status == "incomplete" and result.plan is None
    assert "no answer within 0.2 s" in (result.reason or "")


async def test_the_callers_own_cancellation_is_re_raised() -> None:
    async def forever(request: Any) -> Any:
        await anyio.sleep_forever()

    ev = Custom(forever)
    with anyio.CancelScope() as outer:
        async with anyio.create_task_group() as tg:
            async def stop() -> None:
                await ev.started.wait()
                outer.cancel()

            tg.start_soon(stop)
            await compile_verification(INTENT, DICT, ev, timeout=30)  # type: ignore[arg-type]
            pytest.fail("compile returned although its caller was cancelled")
    assert outer.cancelled_caught


def _answers(noul: Any = 0.97, drop: str | None = None, extra: bool = False) -> Any:
    def make(request: Any) -> Evaluation:
        answers = {q.id: {"noul": noul} for q in request.questions if q.id != drop}
        if extra:
            answers["check_99"] = {"noul": 0.5}
        return Evaluation(answers, EvaluationUsage(1, 1), "custom")
    return make


@pytest.mark.parametrize(("answer", "needle"), [
    (lambda r: None, "it returned NoneType, not an Evaluation"),
    (lambda r: {"answers": {"coverage": {"noul": 0.99}}}, "it returned dict, not an Evaluation"),
    (lambda r: "YES", "it returned str, not an Evaluation"),
    (_answers(drop="coverage"), "missing answers for ['coverage']"),
    (_answers(drop="check_2"), "missing answers for ['check_2']"),
    (_answers(extra=True), "nobody asked for"),
    (_answers(noul=1.5), "noul is outside"),
    (_answers(noul=float("nan")), "noul"),
    (_answers(noul="0.97"), "noul"),
    (_answers(noul=True), "noul"),
    (_answers(noul=None), "noul"),
    (lambda r: Evaluation(None, EvaluationUsage(), ""), "no answers object"),  # type: ignore[arg-type]
    (lambda r: Evaluation({q.id: 0.97 for q in r.questions}), "is not an object"),  # type: ignore[misc]
    (lambda r: Evaluation({q.id: {"choice": "yes"} for q in r.questions}), "noul"),
    (lambda r: Evaluation(good(r).answers, EvaluationUsage(-1, 0), "m"), "usage.input_tokens"),
    (lambda r: Evaluation(good(r).answers, "lots", "m"), "has no usage"),  # type: ignore[arg-type]
    (lambda r: Evaluation(good(r).answers, EvaluationUsage(), 42), "model"),  # type: ignore[arg-type]
])
async def test_any_malformed_result_is_incomplete_never_an_exception_or_a_pass(answer: Any, needle: str) -> None:
    async def behave(request: Any) -> Any:
        return answer(request)

    result = await compile_verification(INTENT, DICT, Custom(behave))  # type: ignore[arg-type]
    assert result.status == "incomplete" and result.plan is None
    assert result.reason is not None and result.reason.startswith("the evaluator failed: ")
    assert needle in result.reason


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyError("answers"), ValueError("bad"),
                                   ConnectionResetError("peer")])
async def test_any_exception_from_the_evaluator_is_incomplete(error: Exception) -> None:
    async def behave(request: Any) -> Any:
        raise error

    result = await compile_verification(INTENT, DICT, Custom(behave))  # type: ignore[arg-type]
    assert result.status == "incomplete" and result.plan is None
    assert result.reason == f"the evaluator failed: {type(error).__name__}: {error}"


async def test_a_custom_evaluators_well_formed_answer_compiles() -> None:
    async def behave(request: Any) -> Any:
        return good(request)

    result = await compile_verification(INTENT, DICT, Custom(behave))  # type: ignore[arg-type]
    assert result.status == "ready" and result.usage == {"input_tokens": 10, "output_tokens": 5}


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), "5", True])
async def test_a_bad_compile_timeout_raises_before_any_request(timeout: Any) -> None:
    ev = fixture()
    with pytest.raises(JevError, match="timeout"):
        await compile_verification(INTENT, DICT, ev, timeout=timeout)
    assert ev.calls == 0


def route(url: str, tmp: Path) -> HttpEvaluator:
    env = {"TYPESAFE_API_KEY": "sk-verify"}
    return HttpEvaluator(TYPESAFE, base_urls={"typesafe": url}, environ=env,
                         credentials=CredentialResolver(TYPESAFE, store=AuthStore(tmp / "a.json"), environ=env))


@pytest.mark.parametrize(("faults", "busy", "needle"), [
    (("noul-range",), 0, "noul is outside"),
    (("first-question-only",), 0, "missing answers"),
    (("boolean-type",), 0, "expected 'noul'"),
    (("extra-answer",), 0, "nobody asked for"),
    (("xssi-200",), 0, "not valid JSON"),
    ((), 1, "HTTP 429"),
])
async def test_evaluator_faults_from_a_real_server_are_incomplete(faults: tuple[str, ...], busy: int,
                                                                  needle: str, tmp_path: Path) -> None:
    with mock(*faults, key="sk-verify", busy_every=busy) as url:
        ev = route(url, tmp_path)
        result = await compile_verification(INTENT, DICT, ev)
        await ev.aclose()
    assert result.status == "incomplete" and result.plan is None and needle in (result.reason or "")


async def test_a_real_server_answer_compiles_or_abstains_never_passes_silently(tmp_path: Path) -> None:
    with mock(key="sk-verify") as url:
        ev = route(url, tmp_path)
        result = await compile_verification(INTENT, DICT, ev)
        await ev.aclose()
    # The mock's hashed answers are not near 0.9 or 0.1 for every check: it abstains.
    assert result.status in ("ready", "incomplete") and result.request_count == 1
    if result.status == "incomplete":
        assert result.plan is None and result.reason


# ---------------------------------------------------------------- run


async def test_replay_passes_in_dictionary_order_with_zero_model_calls() -> None:
    ev = fixture()
    plan = (await compile_verification(INTENT, DICT, ev)).plan
    calls = ev.calls
    channels, observations = world()
    for _ in range(3):
        result = await run_verification(plan.to_json(), DICT, observations, channels)  # type: ignore[union-attr]
        assert result.status == "passed" and result.check_ids == ("composer", "no-error", "run-label", "draft")
    assert ev.calls == calls
    assert channels.steps[:4] == [f"verify {c['id']}: {c['description']}" for c in DICT["checks"]]


@pytest.mark.parametrize(("tamper", "needle"), [
    (lambda p, d, o: p.update(dictionaryDigest="sha256:" + "0" * 64), "digest mismatch"),
    (lambda p, d, o: d["checks"][2]["assertion"].update(text="Run"), "digest mismatch"),
    (lambda p, d, o: p.update(checkIds=["composer", "ghost"]), "does not have"),
    (lambda p, d, o: p.update(schemaVersion=2), "schemaVersion"),
    (lambda p, d, o: p.pop("probabilities"), "a plan is"),
    (lambda p, d, o: p.update(checkIds=["composer", "composer"]), "unique"),
    (lambda p, d, o: o.pop("composer"), "not bound"),
    (lambda p, d, o: o.update(composer=Observation("2", o["composer"].read)), "version '1', bound version is '2'"),
])
async def test_invalid_plans_and_bindings_raise_before_the_first_check(tamper: Any, needle: str) -> None:
    plan = (await ready_plan()).to_json()
    d = copy.deepcopy(DICT)
    channels, observations = world()
    tamper(plan, d, observations)
    with pytest.raises(PlanInvalid, match=needle):
        await run_verification(plan, d, observations, channels)
    assert channels.steps == []


async def test_a_mismatch_raises_with_check_expected_and_actual() -> None:
    plan = await ready_plan()
    channels, observations = world(draft="Review")
    with pytest.raises(VerificationFailed) as err:
        await run_verification(plan, DICT, observations, channels)
    assert err.value.check_id == "draft"
    assert "composer['draftText'] equals 'Review notes'" in err.value.expected
    assert "'Review'" not in err.value.actual or "reads" in err.value.actual


async def test_a_stalled_reader_fails_at_its_deadline() -> None:
    plan = await ready_plan()
    channels, _ = world()

    async def stalled(token: anyio.Event) -> Any:
        await anyio.sleep_forever()

    # The reader never returns, so only the deadline (and the 1 s a read at it may take) can end the run.
    with pytest.raises(VerificationFailed, match="stalled past the 300 ms deadline and its 1 s grace"):
        await run_verification(plan, DICT, {"composer": Observation("1", stalled)}, channels)


async def test_an_uncooperative_reader_answering_late_never_passes() -> None:
    plan = await ready_plan()
    channels, _ = world()
    tokens: list[anyio.Event] = []

    async def late(token: anyio.Event) -> Any:
        tokens.append(token)
        with anyio.CancelScope(shield=True):  # ignores cancellation, like an uncooperative transport
            await anyio.sleep(1.5)  # past the 300 ms deadline and the 1 s a read may take after it
        return {"draftText": "Review notes"}

    with pytest.raises(VerificationFailed, match="answered after the 300 ms deadline and its 1 s grace"):
        await run_verification(plan, DICT, {"composer": Observation("1", late)}, channels)
    assert tokens and tokens[0].is_set()  # the reader was told its answer is no longer wanted


async def test_a_reader_exception_is_terminal() -> None:
    plan = await ready_plan()
    channels, _ = world()
    reads = 0

    async def broken(token: anyio.Event) -> Any:
        nonlocal reads
        reads += 1
        raise ConnectionError("socket closed")

    with pytest.raises(VerificationFailed, match="the reader raised ConnectionError"):
        await run_verification(plan, DICT, {"composer": Observation("1", broken)}, channels)
    assert reads == 1


async def test_not_see_and_text_failures() -> None:
    plan = await ready_plan()
    channels, observations = world()
    channels.elements.append(MemoryElement("Model no longer available"))
    with pytest.raises(VerificationFailed) as err:
        await run_verification(plan, DICT, observations, channels)
    assert err.value.check_id == "no-error"
    # A failing textContains reads until its deadline; 300 ms can pass before the first read
    # completes on a busy machine (the read is then "late", never a pass), so 2 s here.
    patient = copy.deepcopy(DICT)
    patient["checks"][2]["assertion"]["timeoutMs"] = 2000
    plan = await ready_plan(patient)
    channels, observations = world()
    channels.page_text = "nothing here"
    with pytest.raises(VerificationFailed) as err:
        await run_verification(plan, patient, observations, channels)
    assert err.value.check_id == "run-label" and "'nothing here'" in err.value.actual


# ---------------------------------------------------------------- benchmark and CLI


def test_offline_benchmark_exits_0() -> None:
    done = subprocess.run([sys.executable, "-m", "fabric_jev.cli", "verify", "bench", "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr + done.stdout[-2000:]
    report = json.loads(done.stdout)
    s = report["summary"]
    assert s["scenarios"] == 12 and s["correct"] == 8 and s["expected_abstention"] == 4
    assert s["negativeControl"] == "failed as it should" and s["replayFailures"] == 0
    assert all(r["modelCalls"] == 1 and r["requestCount"] == 1 for r in report["scenarios"])
    assert all(len(r["replayMs"]) == 3 for r in report["scenarios"] if r["status"] == "ready")
    assert s["replayMs"]["samples"] == 24 and s["compileMs"]["samples"] == 12
    # The adapter's own metrics per scenario: its call's duration and the usage it reported
    # (the ground-truth fixture reports none, so zeros — not invented token counts).
    assert s["adapter"] == "fixture" and s["adapterMs"]["samples"] == 12
    for r in report["scenarios"]:
        a = r["adapter"]
        assert a["calls"] == 1 and 0 < a["durationMs"] <= r["compileMs"]
        assert a["usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert s["usage"] == {"input_tokens": 0, "output_tokens": 0}


def test_live_benchmark_reports_adapter_duration_and_usage_from_a_real_server(tmp_path: Path) -> None:
    with mock(key="sk-bench-live") as url:
        done = subprocess.run(
            [sys.executable, "-m", "fabric_jev.cli", "verify", "bench", "--live", "--evaluator", "typesafe",
             "--json"], capture_output=True, text=True, timeout=120, cwd=ROOT,
            env={**os.environ, "TYPESAFE_API_KEY": "sk-bench-live", "FABRIC_JEV_TYPESAFE_BASE_URL": url,
                 "FABRIC_JEV_HOME": str(tmp_path)})
    # The mock's hashed answers are no semantic judge: scenarios abstain or select wrongly.
    assert done.returncode in (1, 2), done.stderr + done.stdout[-2000:]
    report = json.loads(done.stdout)
    s = report["summary"]
    assert s["mode"] == "live (typesafe)" and s["adapter"] == "typesafe" and s["unavailable"] == 0
    assert s["adapterMs"]["samples"] == 12
    total = {"input_tokens": 0, "output_tokens": 0}
    for r in report["scenarios"]:
        a = r["adapter"]
        assert a["calls"] == 1 and a["durationMs"] > 0
        # The usage the server reported for this scenario's one request.
        assert set(a["usage"]) == {"input_tokens", "output_tokens"} and a["usage"]["input_tokens"] > 0
        total = {k: total[k] + a["usage"][k] for k in total}
    assert s["usage"] == total
    assert "sk-bench-live" not in done.stdout + done.stderr


async def test_benchmark_adapter_metrics_for_a_failing_adapter_have_no_usage() -> None:
    from fabric_jev.benchmarks.verification import run_bench

    async def down(request: Any) -> Any:
        raise ConnectionRefusedError("no route to the service")

    report, code = await run_bench(Custom(down), mode="live (custom)")  # type: ignore[arg-type]
    assert code == 2 and report["summary"]["unavailable"] == 12 and report["summary"]["adapter"] == "custom"
    for r in report["scenarios"]:
        assert r["adapter"]["calls"] == 1 and r["adapter"]["durationMs"] >= 0 and r["adapter"]["usage"] is None
    assert report["summary"]["usage"] == {"input_tokens": 0, "output_tokens": 0}


def test_live_benchmark_without_a_route_exits_2() -> None:
    done = subprocess.run([sys.executable, "-m", "fabric_jev.cli", "verify", "bench", "--live"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "needs a configured route" in done.stderr


def test_cli_compile(tmp_path: Path) -> None:
    (tmp_path / "d.json").write_text(json.dumps(DICT))
    (tmp_path / "f.json").write_text(json.dumps({"answers": ALL}))
    done = subprocess.run([sys.executable, "-m", "fabric_jev.cli", "verify", "compile", str(tmp_path / "d.json"),
                           "--intent", INTENT, "--evaluator", f"fixture:{tmp_path / 'f.json'}"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plan"]["checkIds"] == ["composer", "no-error", "run-label", "draft"]
