"""The HTTP route client against a real Jev-compatible server on loopback."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from fabric_jev import AnswerInvalid, ConfigError, RequestInvalid, UpstreamError
from fabric_jev.contract.evaluation import validate_request
from fabric_jev.evaluators import OPENROUTER, TYPESAFE, VERCEL, AuthStore, CredentialResolver, HttpEvaluator
from fabric_jev.evaluators.routes import Route
from tests.upstream import Front, Recorded, front, mock

pytestmark = pytest.mark.anyio
KEY = "sk-test-route-key-0001"
ROUTE_MODELS = {"~typesafe/jev-latest": "jev-latest", "typesafe/jev-1.13": "jev-latest",
                "typesafe-ai/jev": "jev-latest"}

REQUEST = validate_request({
    "state": {"text": "Please refund the duplicate charge, this is urgent."},
    "questions": {
        "refund": {"type": "noul", "instructions": "Does the customer ask for money back?"},
        "team": {"type": "choice", "instructions": "Which team?",
                 "criteria": {"Billing": "Invoices", "Technical": "Bugs", "Sales": None}},
        "anger": {"type": "score", "instructions": "How angry?",
                  "criteria": ["Calm", "Frustrated", "Very angry"]},
    },
})


def evaluator(route: Route, base: str, *, model: str = "jev-latest", key: str | None = KEY,
              tmp: Path | None = None) -> HttpEvaluator:
    environ = {route.env_keys[0]: key} if key else {}
    store = AuthStore((tmp or Path("/nonexistent")) / "auth.json")
    return HttpEvaluator(route, model=model, base_urls={route.name: base}, environ=environ,
                         credentials=CredentialResolver(route, store=store, environ=environ))


def to_mock(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "model": ROUTE_MODELS.get(body["model"], body["model"])}


@pytest.mark.parametrize(("route", "path", "model"), [
    (TYPESAFE, "/v1/systemone", "jev-latest"),
    (OPENROUTER, "/api/alpha/decisions", "~typesafe/jev-latest"),
    (VERCEL, "/typesafe/v1/systemone", "typesafe-ai/jev"),
])
async def test_route_request_shape_headers_and_alias(route: Route, path: str, model: str) -> None:
    with mock(key=KEY) as upstream, front(Front(upstream=upstream, rewrite=to_mock)) as f:
        ev = evaluator(route, f.url)
        result = await ev.evaluate(REQUEST, timeout=10)
        await ev.aclose()
    [rec] = f.requests
    assert rec.path == path
    assert rec.headers["authorization"] == f"Bearer {KEY}"
    assert rec.headers["content-type"] == "application/json"
    body = json.loads(rec.body)
    assert set(body) == {"state", "questions", "model"} and body["model"] == model
    assert body["questions"]["team"]["criteria"]["Sales"] is None
    assert set(result.answers) == {"refund", "team", "anger"}
    assert result.answers["anger"]["legend"] == {"0": "Calm", "1": "Frustrated", "2": "Very angry"}
    assert result.model == "jevcompat-mock-0.1" and result.usage.input_tokens > 0


async def test_typesafe_route_directly_against_the_mock() -> None:
    with mock(key=KEY) as upstream:
        ev = evaluator(TYPESAFE, upstream)
        result = await ev.evaluate(REQUEST, timeout=10)
        await ev.aclose()
    assert 0 <= result.answers["refund"]["noul"] <= 1


def test_models_are_mapped_or_refused_per_route() -> None:
    assert OPENROUTER.model_id("jev-latest") == "~typesafe/jev-latest"
    assert OPENROUTER.model_id("jev-1.13") == "typesafe/jev-1.13"
    assert VERCEL.model_id("jev-latest") == "typesafe-ai/jev"
    assert TYPESAFE.model_id("jev-preview") == "jev-preview"
    with pytest.raises(RequestInvalid, match="not served on the openrouter route"):
        OPENROUTER.model_id("jev-preview")
    with pytest.raises(RequestInvalid, match="not served on the typesafe route"):
        TYPESAFE.model_id("typesafe-ai/jev")


@pytest.mark.parametrize(("fault", "needle"), [
    ("first-question-only", "missing answers"),
    ("extra-answer", "nobody asked for"),
    ("boolean-type", "has type 'boolean', expected 'noul'"),
    ("noul-range", "noul is outside [0, 1]"),
    ("choice-sum", "probabilities sum to"),
    ("score-sum", "probabilities sum to 0.800"),
    ("choice-key-case", "choice is not one of the options"),
    ("score-keys-1-based", "exactly the keys"),
    ("choice-no-confidence", "confidence is not a finite number"),
    ("confidence-over", "confidence is outside [0, 1]"),
    ("float-usage", "usage.input_tokens is not a non-negative integer"),
    ("no-usage", "has no usage"),
    ("nan", "contains NaN, which JSON does not allow"),
    ("xssi-200", "is not valid JSON"),
])
async def test_invalid_answers_reject_the_whole_evaluation(fault: str, needle: str) -> None:
    with mock(fault, key=KEY) as upstream:
        ev = evaluator(TYPESAFE, upstream)
        with pytest.raises(AnswerInvalid) as err:
            await ev.evaluate(REQUEST, timeout=10)
        await ev.aclose()
    assert needle in str(err.value)


async def test_a_choice_outside_the_options_is_rejected() -> None:
    request = validate_request({"state": "café", "questions": {
        "drink": {"type": "choice", "instructions": "Which?", "criteria": {"café": None, "thé": None}}}})
    with mock("nfd-keys", key=KEY) as upstream:
        ev = evaluator(TYPESAFE, upstream)
        with pytest.raises(AnswerInvalid, match="choice is not one of the options"):
            await ev.evaluate(request, timeout=10)
        await ev.aclose()


async def test_a_score_out_of_range_is_rejected() -> None:
    def tamper(body: dict[str, Any]) -> dict[str, Any]:
        body["answers"]["anger"]["score"] = 2.5
        return body

    with mock(key=KEY) as upstream, front(Front(upstream=upstream, tamper=tamper)) as f:
        ev = evaluator(TYPESAFE, f.url)
        with pytest.raises(AnswerInvalid, match=r"score is not a finite number in \[0, 2\]"):
            await ev.evaluate(REQUEST, timeout=10)
        await ev.aclose()


async def test_oversized_body_is_cut_at_1_mib() -> None:
    def huge(rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "application/json"}, b'{"x_pad": "' + b"a" * (1 << 21) + b'"}'

    with front(Front(answer=huge)) as f:
        ev = evaluator(TYPESAFE, f.url)
        with pytest.raises(AnswerInvalid, match="exceeds 1 MiB"):
            await ev.evaluate(REQUEST, timeout=10)
        await ev.aclose()


@pytest.mark.parametrize(("body", "needle"), [
    (b'{"answers": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nests deeper than 32 levels"),
    (b'{"answers": {}, "model": "\xff"}', "is not UTF-8"),
    (b"\xef\xbb\xbf{}", "byte order mark"),
    (b"", "is empty"),
])
async def test_hostile_answer_bytes_are_one_clear_refusal(body: bytes, needle: str) -> None:
    def answer(rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "application/json"}, body

    with front(Front(answer=answer)) as f:
        ev = evaluator(TYPESAFE, f.url)
        with pytest.raises(AnswerInvalid) as err:
            await ev.evaluate(REQUEST, timeout=10)
        await ev.aclose()
    assert needle in str(err.value) and "\n" not in str(err.value)


HIDDEN_KEYS = {
    "reversed": KEY[::-1], "base64": base64.b64encode(KEY.encode()).decode(), "upper": KEY.upper(),
    "spaced": " ".join(KEY), "first half": KEY[: len(KEY) // 2 + 2], "second half": KEY[len(KEY) // 2 - 2:],
    "hex": KEY.encode().hex(), "reversed base64": base64.b64encode(KEY.encode()).decode()[::-1],
    "base64 of reversed": base64.urlsafe_b64encode(KEY[::-1].encode()).decode(),
    "percent": "".join(f"%{b:02X}" for b in KEY.encode()), "fullwidth": KEY.translate(
        {c: c + 0xFEE0 for c in range(0x21, 0x7F)}), "zero-width": "\u200b".join(KEY),
}


@pytest.mark.parametrize("form", sorted(HIDDEN_KEYS))
async def test_an_answer_hiding_the_key_in_model_is_refused(form: str) -> None:
    # A hostile upstream once got these past the plain substring test: they reached the
    # `evaluate` output and the guest.
    def hide(body: dict[str, Any]) -> dict[str, Any]:
        body["model"] = HIDDEN_KEYS[form][:128]
        return body

    with mock(key=KEY) as upstream, front(Front(upstream=upstream, tamper=hide)) as f:
        ev = evaluator(TYPESAFE, f.url)
        with pytest.raises(AnswerInvalid, match="contains the credential it was sent with") as err:
            await ev.evaluate(REQUEST, timeout=10)
        await ev.aclose()
    assert KEY not in str(err.value) and HIDDEN_KEYS[form] not in str(err.value)


@pytest.mark.parametrize("where", ["model", "answer", "extra"])
async def test_an_answer_echoing_the_key_is_refused(where: str) -> None:
    def echo(body: dict[str, Any]) -> dict[str, Any]:
        if where == "model":
            body["model"] = f"jev-latest for {KEY}"
        elif where == "answer":
            body["answers"]["refund"]["x_note"] = KEY
        else:
            body["x_debug"] = {"headers": [f"Bearer {KEY}"]}
        return body

    with mock(key=KEY) as upstream, front(Front(upstream=upstream, tamper=echo)) as f:
        ev = evaluator(TYPESAFE, f.url)
        with pytest.raises(AnswerInvalid, match="contains the credential it was sent with") as err:
            await ev.evaluate(REQUEST, timeout=10)
        await ev.aclose()
    assert KEY not in str(err.value)


@pytest.mark.parametrize("echo", [False, True])
async def test_a_large_answer_is_parsed_and_searched_for_the_key_off_the_event_loop(
        echo: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # Near the 1 MiB cap the key search takes 0.1-0.3 s: on the event loop it stalled every other run.
    import threading

    from fabric_jev.redaction import key_echo

    searched_on: list[bool] = []
    search = key_echo.carries_key

    def spy(value: Any, secret: str) -> bool:
        searched_on.append(threading.current_thread() is threading.main_thread())
        return search(value, secret)

    monkeypatch.setattr(key_echo, "carries_key", spy)

    def pad(body: dict[str, Any]) -> dict[str, Any]:
        body["x_debug"] = ["x" * 1000] * 600 + ([KEY[::-1]] if echo else [])
        return body

    with mock(key=KEY) as upstream, front(Front(upstream=upstream, tamper=pad)) as f:
        ev = evaluator(TYPESAFE, f.url)
        try:
            if echo:
                with pytest.raises(AnswerInvalid, match="contains the credential it was sent with"):
                    await ev.evaluate(REQUEST, timeout=30)
            else:
                result = await ev.evaluate(REQUEST, timeout=30)
                assert set(result.answers) == {"refund", "team", "anger"}
            direct = evaluator(TYPESAFE, upstream)
            small = await direct.evaluate(REQUEST, timeout=30)
            await direct.aclose()
            assert set(small.answers) == {"refund", "team", "anger"}
        finally:
            await ev.aclose()
    assert searched_on == [False, True]  # the large body in a worker thread, a small one inline


async def test_redirects_are_refused() -> None:
    def redirect(rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        return 302, {"Location": "http://127.0.0.1:9/elsewhere"}, b""

    with front(Front(answer=redirect)) as f:
        ev = evaluator(TYPESAFE, f.url)
        with pytest.raises(UpstreamError, match="redirects are refused") as err:
            await ev.evaluate(REQUEST, timeout=10)
        await ev.aclose()
    assert err.value.status == 302 and len(f.requests) == 1


@pytest.mark.parametrize("status", [429, 529])
async def test_rate_limits_say_back_off(status: int) -> None:
    def busy(rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        return status, {"Content-Type": "application/json"}, b'{"detail": "slow down SECRET-BODY"}'

    with front(Front(answer=busy)) as f:
        ev = evaluator(TYPESAFE, f.url)
        with pytest.raises(UpstreamError) as err:
            await ev.evaluate(REQUEST, timeout=10)
        await ev.aclose()
    assert str(err.value) == (f"Jev upstream rate limited (HTTP {status}); back off before retrying")
    assert len(f.requests) == 1  # no retries


async def test_mock_rate_limit_mode_gives_429() -> None:
    with mock(key=KEY, busy_every=1) as upstream:
        ev = evaluator(TYPESAFE, upstream)
        with pytest.raises(UpstreamError, match="HTTP 429"):
            await ev.evaluate(REQUEST, timeout=10)
        await ev.aclose()


async def test_error_bodies_and_headers_never_reach_messages() -> None:
    def fail(rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        return 500, {"X-Debug": "SECRET-HEADER"}, b"Traceback: SECRET-BODY"

    with front(Front(answer=fail)) as f:
        ev = evaluator(TYPESAFE, f.url)
        with pytest.raises(UpstreamError) as err:
            await ev.evaluate(REQUEST, timeout=10)
        await ev.aclose()
    assert str(err.value) == "Jev upstream returned HTTP 500"


async def test_wrong_key_reports_the_status_only() -> None:
    with mock(key=KEY) as upstream:
        ev = evaluator(TYPESAFE, upstream, key="sk-wrong-key")
        with pytest.raises(UpstreamError) as err:
            await ev.evaluate(REQUEST, timeout=10)
        await ev.aclose()
    assert str(err.value) == "Jev upstream returned HTTP 401"


async def test_timeout_bounds_the_whole_call() -> None:
    with front(Front().stall()) as f:
        ev = evaluator(TYPESAFE, f.url)
        with pytest.raises(UpstreamError, match=r"timed out after 0\.2 s"):
            await ev.evaluate(REQUEST, timeout=0.2)
        # The stalled upstream is still holding the one request: the call ended on its own deadline.
        assert len(f.requests) == 1 and not f.release.is_set()
        await ev.aclose()


async def test_cancellation_mid_request() -> None:
    with front(Front().stall()) as f:
        ev = evaluator(TYPESAFE, f.url)
        answered = []
        async with anyio.create_task_group() as tg:
            async def later() -> None:
                # The request is on the wire before cancelling: the cancel must abort it, not pre-empt it.
                assert await anyio.to_thread.run_sync(f.arrived.wait, 10)
                tg.cancel_scope.cancel()

            tg.start_soon(later)
            answered.append(await ev.evaluate(REQUEST, timeout=10))
        assert answered == [] and tg.cancel_scope.cancelled_caught and len(f.requests) == 1
        # anyio cancellation of the caller is re-raised, never swallowed.
        with anyio.move_on_after(0.05) as scope:
            await ev.evaluate(REQUEST, timeout=10)
        assert scope.cancelled_caught
        await ev.aclose()


async def test_connection_refused_is_an_upstream_error() -> None:
    ev = evaluator(TYPESAFE, "http://127.0.0.1:9")
    with pytest.raises(UpstreamError, match="unreachable"):
        await ev.evaluate(REQUEST, timeout=5)
    await ev.aclose()


@pytest.mark.parametrize(("base", "needle"), [
    ("http://example.com", "only to loopback"),
    ("http://10.0.0.1:8000", "only to loopback"),
    ("https://user:pw@example.com", "credentials"),
    ("ftp://127.0.0.1", r"http\(s\) URL"),
    ("https://example.com/x?y=1", "query"),
])
def test_base_url_rules(base: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        HttpEvaluator(TYPESAFE, base_urls={"typesafe": base}, environ={})


def test_base_url_from_the_environment() -> None:
    ev = HttpEvaluator(OPENROUTER, environ={"FABRIC_JEV_OPENROUTER_BASE_URL": "http://[::1]:8000/"})
    assert ev.url == "http://[::1]:8000/api/alpha/decisions"
    default = HttpEvaluator(VERCEL, environ={})
    assert default.url == "https://ai-gateway.vercel.sh/typesafe/v1/systemone"
