"""The auto-approval classifier (contract §9)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from fabric_jev import ConfigError, FixtureEvaluator
from fabric_jev.approval import (
    QUESTIONS,
    ApprovalRequest,
    ApprovalSettings,
    ProposedAction,
    build_evidence,
    classify,
    parse_model_key,
)
from fabric_jev.approval.classifier import _bounded_timeout
from fabric_jev.evaluators import TYPESAFE, AuthStore, CredentialResolver, HttpEvaluator
from fabric_jev.evaluators.base import EvaluatorStatus
from fabric_jev.testing import ScriptedEvaluator
from tests.upstream import Front, front, mock

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parent.parent
ACTION = ProposedAction(ref="shell.run", risk="execute", description="Run the test suite",
                        arguments={"cmd": "pytest -q"})
REQUEST = ApprovalRequest(user_text="Please run the tests", action=ACTION,
                          conversation=[{"role": "user", "text": "Please run the tests"}])


def fixture(safe: float, secrets: float = 0.0, destructive: float = 0.0, owned: float = 0.3) -> FixtureEvaluator:
    return FixtureEvaluator({"model": "fixture", "usage": {"input_tokens": 50, "output_tokens": 4},
                             "answers": {"safe": {"noul": safe}, "secrets": {"noul": secrets},
                                         "destructive": {"noul": destructive},
                                         "sessionOwned": {"noul": owned}}})


@pytest.mark.parametrize(("safe", "secrets", "destructive", "threshold", "verdict"), [
    (0.50, 0.0, 0.0, 0.50, "allow"),
    (0.49, 0.0, 0.0, 0.50, "ask"),
    (0.51, 0.0, 0.0, 0.50, "allow"),
    (0.50, 0.0, 0.0, 0.51, "ask"),
    (0.50, 0.0, 0.0, 0.49, "allow"),
    (0.99, 0.49, 0.0, 0.50, "allow"),
    (0.99, 0.50, 0.0, 0.50, "ask"),
    (0.99, 0.51, 0.0, 0.50, "ask"),
    (0.99, 0.0, 0.49, 0.50, "allow"),
    (0.99, 0.0, 0.50, 0.50, "ask"),
    (0.99, 0.0, 0.51, 0.50, "ask"),
    (0.0, 0.0, 0.0, 0.0, "allow"),
    (0.99, 0.0, 0.0, 1.0, "ask"),
])
async def test_truth_table(safe: float, secrets: float, destructive: float, threshold: float,
                           verdict: str) -> None:
    decision = await classify(REQUEST, evaluator=fixture(safe, secrets, destructive), threshold=threshold)
    assert decision.decision == verdict
    assert decision.probabilities == {"safe": safe, "secrets": secrets, "destructive": destructive,
                                      "sessionOwned": 0.3}
    for name, value in (("safe", safe), ("secrets", secrets), ("destructive", destructive)):
        assert f"{name} {value:.2f}" in decision.reason
    assert "session-owned 0.30" in decision.reason
    assert decision.usage == {"input_tokens": 50, "output_tokens": 4} and decision.model == "fixture"


async def test_session_owned_is_recorded_not_used() -> None:
    low = await classify(REQUEST, evaluator=fixture(0.9, owned=0.0))
    high = await classify(REQUEST, evaluator=fixture(0.9, owned=1.0))
    assert low.decision == high.decision == "allow"


async def test_one_request_with_four_nouls_with_full_instructions() -> None:
    ev = fixture(0.9)
    await classify(REQUEST, evaluator=ev)
    [request] = ev.requests
    assert [(q.id, q.type) for q in request.questions] == [
        ("safe", "noul"), ("secrets", "noul"), ("destructive", "noul"), ("sessionOwned", "noul")]
    assert all(len(q.instructions) > 80 for q in request.questions)


async def test_headless_callers_deny_what_would_be_asked() -> None:
    assert (await classify(REQUEST, evaluator=fixture(0.1), headless=True)).decision == "deny"
    assert (await classify(REQUEST, evaluator=fixture(0.9), headless=True)).decision == "allow"


@pytest.mark.parametrize(("policy", "verdict"), [("deny", "deny"), ("ask", "ask"), ("allow", "allow")])
async def test_non_auto_policies_never_call_the_classifier(policy: str, verdict: str) -> None:
    ev = fixture(0.9)
    decision = await classify(REQUEST, evaluator=ev, policy=policy)  # type: ignore[arg-type]
    assert decision.decision == verdict and ev.calls == 0


@pytest.mark.parametrize("text", [None, "", "   "])
async def test_missing_user_text_asks_before_any_credential_or_network_use(
        text: str | None, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('x'); print('k')"]
    with front(Front(answer=lambda rec: (500, {}, b""))) as f:
        ev = HttpEvaluator(TYPESAFE, base_urls={"typesafe": f.url}, environ={},
                           credentials=CredentialResolver(TYPESAFE, store=AuthStore(tmp_path / "a.json"),
                                                          command=command, environ={}))
        decision = await classify(ApprovalRequest(user_text=text, action=ACTION), evaluator=ev)
        await ev.aclose()
    assert decision.decision == "ask" and "no current user text" in decision.reason
    assert not marker.exists() and f.requests == []


def route_evaluator(url: str, tmp: Path, key: str = "sk-approve") -> HttpEvaluator:
    env = {"TYPESAFE_API_KEY": key}
    return HttpEvaluator(TYPESAFE, base_urls={"typesafe": url}, environ=env,
                         credentials=CredentialResolver(TYPESAFE, store=AuthStore(tmp / "a.json"), environ=env))


async def test_real_server_answer_is_used(tmp_path: Path) -> None:
    with mock(key="sk-approve") as url:
        ev = route_evaluator(url, tmp_path)
        decision = await classify(REQUEST, evaluator=ev)
        await ev.aclose()
    assert decision.decision in ("allow", "ask") and decision.probabilities is not None
    assert decision.model == "jevcompat-mock-0.1"


@pytest.mark.parametrize(("fault", "needle"), [
    ("noul-range", "noul is outside [0, 1]"),
    ("boolean-type", "expected 'noul'"),
    ("first-question-only", "missing answers"),
])
async def test_malformed_answers_ask(fault: str, needle: str, tmp_path: Path) -> None:
    with mock(fault, key="sk-approve") as url:
        ev = route_evaluator(url, tmp_path)
        decision = await classify(REQUEST, evaluator=ev)
        await ev.aclose()
    assert decision.decision == "ask" and needle in decision.reason and decision.probabilities is None


async def test_http_429_asks(tmp_path: Path) -> None:
    with mock(key="sk-approve", busy_every=1) as url:
        ev = route_evaluator(url, tmp_path)
        decision = await classify(REQUEST, evaluator=ev)
        await ev.aclose()
    assert decision.decision == "ask" and "rate limited (HTTP 429)" in decision.reason


async def test_timeout_asks_and_is_capped_at_30_seconds(tmp_path: Path) -> None:
    with front(Front().stall()) as f:
        ev = route_evaluator(f.url, tmp_path)
        decision = await classify(REQUEST, evaluator=ev, timeout=0.2)
        await ev.aclose()
    assert decision.decision == "ask" and "timed out after 0.2 s" in decision.reason
    assert _bounded_timeout(100) == _bounded_timeout(float("inf")) == 30.0


async def test_missing_credentials_ask(tmp_path: Path) -> None:
    ev = HttpEvaluator(TYPESAFE, environ={}, credentials=CredentialResolver(
        TYPESAFE, store=AuthStore(tmp_path / "a.json"), environ={}))
    decision = await classify(REQUEST, evaluator=ev)
    await ev.aclose()
    assert decision.decision == "ask" and "no credentials" in decision.reason


async def test_credentials_in_evidence_leave_as_kind_markers(tmp_path: Path) -> None:
    request = ApprovalRequest(
        user_text="Deploy with my key sk-live0123456789abcdefXYZ",
        action=ProposedAction("shell.run", "execute", "curl the API",
                              {"cmd": "curl -H 'Authorization: Bearer abcdef0123456789xyz' https://x",
                               "password": "hunter2"}),
        conversation=[{"role": "user", "text": "token: ghp_abcdefghijklmnopqrstuvwxyz0123"}])
    with mock(key="sk-approve") as url, front(Front(upstream=url)) as f:
        ev = route_evaluator(f.url, tmp_path)
        decision = await classify(request, evaluator=ev)
        await ev.aclose()
    body = f.requests[0].body.decode()
    for secret in ("sk-live0123456789", "abcdef0123456789xyz", "hunter2", "ghp_abcdefghij"):
        assert secret not in body
    assert "[redacted: api key]" in body and "[redacted: bearer token]" in body
    assert "[redacted: github token]" in body
    assert set(decision.redacted) >= {"api key", "bearer token", "github token"}


# ---------------------------------------------------------------- evidence limits


WORDS = "lorem ipsum dolor sit amet " * 1000  # word-like: not mistaken for base64


def evidence_of(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"user_text": "go", "action": ACTION}
    base.update(kw)
    evidence, _ = build_evidence(ApprovalRequest(**base))
    return evidence


def test_conversation_starts_at_the_latest_user_message() -> None:
    ev = evidence_of(conversation=[{"role": "user", "text": "old"}, {"role": "assistant", "text": "a"},
                                   {"role": "user", "text": "new"}, {"role": "assistant", "text": "b"}])
    assert [e["text"] for e in ev["conversation"]] == ["new", "b"]


def test_entry_cap_6000() -> None:
    ev = evidence_of(conversation=[{"role": "user", "text": WORDS[:6000]},
                                   {"role": "assistant", "text": WORDS[:6001]}])
    assert len(ev["conversation"][0]["text"]) == 6000
    assert len(ev["conversation"][1]["text"]) == 6001  # 6,000 and an ellipsis
    assert ev["truncation"]["conversationEntryTruncated"] is True


def test_conversation_cap_24000_keeps_the_tail() -> None:
    entries = [{"role": "user", "text": "u" * 10}] + [
        {"role": "assistant", "text": f"{i}" + WORDS[:5999]} for i in range(5)]
    ev = evidence_of(conversation=entries)
    assert [e["text"][0] for e in ev["conversation"]] == ["1", "2", "3", "4"]
    assert ev["truncation"]["conversationTruncated"] is True
    assert evidence_of(conversation=entries[:4])["truncation"]["conversationTruncated"] is False


def test_session_actions_newest_40() -> None:
    actions = [{"ref": "fs.write", "arguments": {"n": i}} for i in range(45)]
    ev = evidence_of(session_actions=actions)
    assert [a["arguments"]["n"] for a in ev["sessionActions"]] == list(range(5, 45))
    assert ev["truncation"]["sessionActionsTruncated"] is True
    assert evidence_of(session_actions=actions[:40])["truncation"]["sessionActionsTruncated"] is False


def test_session_argument_strings_1500() -> None:
    ev = evidence_of(session_actions=[{"ref": "fs.write", "arguments": {"text": WORDS[:1501]}}])
    assert len(ev["sessionActions"][0]["arguments"]["text"]) == 1501  # 1,500 and an ellipsis
    assert ev["truncation"]["sessionArgumentTruncated"] is True


def test_session_actions_12000_chars_keep_the_newest() -> None:
    actions = [{"ref": "fs.write", "arguments": {"i": i, "t": WORDS[:1400]}} for i in range(10)]
    ev = evidence_of(session_actions=actions)
    kept = [a["arguments"]["i"] for a in ev["sessionActions"]]
    assert kept == list(range(10 - len(kept), 10)) and len(kept) < 10
    assert ev["truncation"]["sessionActionsTruncated"] is True


def test_action_arguments_16000() -> None:
    big = ProposedAction("fs.write", "write", "write a file", {"text": WORDS[:20000]})
    ev = evidence_of(action=big)
    assert len(ev["proposedAction"]["argumentsJson"]) == 16001
    assert ev["truncation"]["actionArgumentsTruncated"] is True
    assert evidence_of()["truncation"]["actionArgumentsTruncated"] is False


# ---------------------------------------------------------------- settings and keys


@pytest.mark.parametrize(("key", "route", "model", "normalised"), [
    ("pi-fabric/typesafe/jev-latest", "typesafe", "jev-latest", "pi-fabric/typesafe/jev-latest"),
    ("pi-fabric/typesafe/jev-1.13", "typesafe", "jev-1.13", "pi-fabric/typesafe/jev-1.13"),
    ("pi-fabric/typesafe/jev-1.13.0", "typesafe", "jev-1.13.0", "pi-fabric/typesafe/jev-1.13.0"),
    ("pi-fabric/typesafe/jev-preview", "typesafe", "jev-preview", "pi-fabric/typesafe/jev-preview"),
    ("pi-fabric/openrouter/jev-latest", "openrouter", "jev-latest", "pi-fabric/openrouter/jev-latest"),
    ("pi-fabric/openrouter/jev-1.13", "openrouter", "jev-1.13", "pi-fabric/openrouter/jev-1.13"),
    ("pi-fabric/vercel-ai-gateway/jev-latest", "vercel-ai-gateway", "jev-latest",
     "pi-fabric/vercel-ai-gateway/jev-latest"),
    ("jev/jev-latest", "typesafe", "jev-latest", "pi-fabric/typesafe/jev-latest"),
    ("jev/typesafe/jev-1.13", "openrouter", "jev-1.13", "pi-fabric/openrouter/jev-1.13"),
    ("jev/typesafe-ai/jev", "vercel-ai-gateway", "jev-latest", "pi-fabric/vercel-ai-gateway/jev-latest"),
])
def test_model_keys(key: str, route: str, model: str, normalised: str) -> None:
    parsed = parse_model_key(key)
    assert (parsed.route.name, parsed.model, parsed.key) == (route, model, normalised)


@pytest.mark.parametrize("key", ["pi-fabric/openrouter/jev-preview", "jev/gpt-4", "typesafe/jev", ""])
def test_unknown_model_keys(key: str) -> None:
    with pytest.raises(ConfigError):
        parse_model_key(key)


@pytest.mark.parametrize("threshold", [float("nan"), float("inf"), -0.01, 1.01, "0.5", True])
def test_threshold_must_be_finite_in_0_1(threshold: Any) -> None:
    with pytest.raises(ConfigError, match="threshold"):
        ApprovalSettings.make("pi-fabric/typesafe/jev-latest", threshold)


def test_settings_persist(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    ApprovalSettings.make("jev/jev-preview", 0.7).save(path)
    loaded = ApprovalSettings.load(path)
    assert loaded == ApprovalSettings("pi-fabric/typesafe/jev-preview", 0.7)


# ---------------------------------------------------------------- CLI


def cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabric_jev.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, "FABRIC_JEV_HOME": str(home)})


def test_cli_approve_exit_codes(tmp_path: Path) -> None:
    action = tmp_path / "action.json"
    action.write_text(json.dumps({"ref": "shell.run", "risk": "execute", "description": "tests",
                                  "arguments": {"cmd": "pytest"}}))
    allow = tmp_path / "allow.json"
    allow.write_text(json.dumps({"answers": {q: {"noul": 0.9 if q == "safe" else 0.1} for q in QUESTIONS}}))
    done = cli("approve", "--action", str(action), "--user-text", "run the tests",
               "--evaluator", f"fixture:{allow}", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["decision"] == "allow"
    done = cli("approve", "--action", str(action), "--evaluator", f"fixture:{allow}", home=tmp_path)
    assert done.returncode == 1 and json.loads(done.stdout)["decision"] == "ask"
    done = cli("approve", "--action", str(action), "--user-text", "x", "--policy", "deny", home=tmp_path)
    assert done.returncode == 1 and json.loads(done.stdout)["decision"] == "deny"
    bad = tmp_path / "bad.json"
    bad.write_text("[1]")
    assert cli("approve", "--action", str(bad), "--user-text", "x", home=tmp_path).returncode == 2
    assert cli("approve", "--action", str(tmp_path / "none.json"), "--user-text", "x",
               home=tmp_path).returncode == 2


def test_cli_settings_approvals(tmp_path: Path) -> None:
    done = cli("settings", "approvals", "--model", "jev/jev-1.13", "--threshold", "0.8", home=tmp_path)
    assert done.returncode == 0, done.stderr
    saved = json.loads((tmp_path / "settings.json").read_text())
    assert saved == {"approvals": {"model": "pi-fabric/typesafe/jev-1.13", "threshold": 0.8}}
    assert cli("settings", "approvals", "--threshold", "1.5", home=tmp_path).returncode == 2
    assert json.loads(cli("settings", "approvals", home=tmp_path).stdout)["approvals"]["threshold"] == 0.8


# ---------------------------------------------------------------- the classifier always decides (issue 10 item 8)

class IgnoresItsTimeout:
    """An evaluator that never answers and never looks at its timeout."""

    calls = 0

    async def evaluate(self, request: Any, *, timeout: float) -> Any:
        self.calls += 1
        await anyio.sleep_forever()

    def status(self) -> EvaluatorStatus:
        return EvaluatorStatus("test", "test")

    async def aclose(self) -> None:
        return None


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": value}
    return value


def _cyclic() -> Any:
    value: dict[str, Any] = {"cmd": "rm"}
    value["self"] = value
    return value


MALFORMED = {
    "actions nested over 32": ApprovalRequest(user_text="go", action=ACTION, session_actions=[_deep(40)]),
    "NaN argument": ApprovalRequest(user_text="go", action=ProposedAction("a.b", "execute", "d", {"n": float("nan")})),
    "NaN in session actions": ApprovalRequest(user_text="go", action=ACTION, session_actions=[{"n": float("inf")}]),
    "non-dict conversation entry": ApprovalRequest(user_text="go", action=ACTION, conversation=["hello"]),  # type: ignore[list-item]
    "non-string entry text": ApprovalRequest(user_text="go", action=ACTION, conversation=[{"role": "user", "text": 7}]),  # type: ignore[dict-item]
    "non-string user text": ApprovalRequest(user_text=12345, action=ACTION),  # type: ignore[arg-type]
    "list as user text": ApprovalRequest(user_text=["go"], action=ACTION),  # type: ignore[arg-type]
    "cyclic arguments": ApprovalRequest(user_text="go", action=ProposedAction("a.b", "execute", "d", _cyclic())),
    "cyclic session action": ApprovalRequest(user_text="go", action=ACTION, session_actions=[_cyclic()]),
    "conversation not a list": ApprovalRequest(user_text="go", action=ACTION, conversation={"a": 1}),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("name", list(MALFORMED))
async def test_malformed_evidence_asks_and_never_raises(name: str) -> None:
    ev = fixture(0.99)
    decision = await classify(MALFORMED[name], evaluator=ev)
    assert decision.decision == "ask"
    assert (await classify(MALFORMED[name], evaluator=ev, headless=True)).decision == "deny"


@pytest.mark.parametrize("threshold", [float("nan"), float("inf"), -0.1, 1.5, "0.5", None, True])
async def test_a_bad_threshold_asks(threshold: Any) -> None:
    decision = await classify(REQUEST, evaluator=fixture(0.99), threshold=threshold)
    assert decision.decision == "ask" and "threshold" in decision.reason


async def test_an_evaluator_that_ignores_its_timeout_is_bounded_by_the_classifier() -> None:
    ev = IgnoresItsTimeout()
    decision = await classify(REQUEST, evaluator=ev, timeout=0.05)  # type: ignore[arg-type]
    assert decision.decision == "ask" and "did not answer within 0.05 s" in decision.reason and ev.calls == 1


@pytest.mark.parametrize("exc", [RecursionError("deep"), RuntimeError("bug"), KeyError("answers"),
                                 ExceptionGroup("g", [ValueError("v")])])
async def test_any_evaluator_error_asks(exc: BaseException) -> None:
    decision = await classify(REQUEST, evaluator=ScriptedEvaluator(exc))
    assert decision.decision == "ask" and "the classifier failed" in decision.reason


async def test_deep_json_from_the_upstream_asks(tmp_path: Path) -> None:
    body = b'{"answers":' + b'[' * 100_000 + b']' * 100_000 + b'}'
    with front(Front(answer=lambda rec: (200, {"Content-Type": "application/json"}, body))) as f:
        ev = route_evaluator(f.url, tmp_path)
        decision = await classify(REQUEST, evaluator=ev)
        await ev.aclose()
    assert decision.decision == "ask" and decision.probabilities is None


async def test_cancelling_the_caller_is_not_turned_into_a_verdict() -> None:
    with anyio.move_on_after(0.05) as scope:
        await classify(REQUEST, evaluator=IgnoresItsTimeout(), timeout=30)  # type: ignore[arg-type]
        pytest.fail("classify returned under a cancelled caller")
    assert scope.cancelled_caught


# ---------------------------------------------------------------- one threshold (issue 13 item 4)

def test_threshold_precedence_config_then_settings_then_default(tmp_path: Path) -> None:
    from fabric_jev import HostConfig
    from fabric_jev.approval.settings import with_user_threshold

    settings = tmp_path / "settings.json"
    assert with_user_threshold(HostConfig(), settings).auto_approval_threshold == 0.5
    ApprovalSettings.make("pi-fabric/typesafe/jev-latest", 0.8).save(settings)
    assert with_user_threshold(HostConfig(), settings).auto_approval_threshold == 0.8
    assert with_user_threshold(HostConfig.parse({"autoApprovalThreshold": 0.3}), settings) \
        .auto_approval_threshold == 0.3


def test_cli_approve_takes_threshold_timeout_and_size_from_the_config(tmp_path: Path) -> None:
    action = tmp_path / "action.json"
    action.write_text(json.dumps({"ref": "shell.run", "risk": "execute", "arguments": {"cmd": "pytest"}}))
    safe_07 = tmp_path / "fixture.json"
    safe_07.write_text(json.dumps({"answers": {q: {"noul": 0.7 if q == "safe" else 0.1} for q in QUESTIONS}}))
    assert cli("settings", "approvals", "--threshold", "0.9", home=tmp_path).returncode == 0

    def approve(*extra: str) -> dict[str, Any]:
        done = cli("approve", "--action", str(action), "--user-text", "run the tests", "--evaluator",
                   f"fixture:{safe_07}", *extra, home=tmp_path)
        assert done.returncode in (0, 1), done.stderr
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    assert approve()["decision"] == "ask"  # settings.json: 0.7 < 0.9
    low = tmp_path / "low.json"
    low.write_text(json.dumps({"autoApprovalThreshold": 0.6}))
    assert approve("--config", str(low))["decision"] == "allow"  # the config's 0.6 wins
    small = tmp_path / "small.json"
    small.write_text(json.dumps({"maxRequestBytes": 1024, "autoApprovalThreshold": 0.6}))
    decided = approve("--config", str(small))
    assert decided["decision"] == "ask" and "exceeds 1024 bytes" in decided["reason"]


async def test_classify_honours_the_callers_timeout_with_a_stalled_upstream(tmp_path: Path) -> None:
    with front(Front().stall()) as f:
        ev = route_evaluator(f.url, tmp_path)
        decision = await classify(REQUEST, evaluator=ev, timeout=0.1)
        f.release.set()
        await ev.aclose()
    assert decision.decision == "ask" and "timed out after 0.1 s" in decision.reason


async def test_an_evaluator_error_quoting_a_secret_is_redacted_in_the_reason() -> None:
    from fabric_jev.errors import UpstreamError

    decision = await classify(REQUEST, evaluator=ScriptedEvaluator(
        UpstreamError("upstream said: token ghp_abcdefghijklmnopqrstuvwxyz0123 is revoked")))
    assert decision.decision == "ask" and "the classifier failed" in decision.reason
    assert "ghp_abcdefghijklmnopqrstuvwxyz0123" not in decision.reason and "redacted" in decision.reason


# ---------------------------------------------------------------- name/value pairs under auto (issue 33)
PAIR_PROGRAM = """
return await tools.call({ref: 'deploy.write', args: {
  env: [{name: 'DB_PASSWORD', value: 'pairSecret-1'}, {name: 'DB_USER', value: 'app'}],
  headers: [{key: 'Authorization', value: 'Token pairSecret-2'}],
  pairs: [['API_TOKEN', 'pairSecret-3']],
  ssm: {Name: '/prod/db/password', Value: 'pairSecret-4'},
  cmd: 'mongo -u admin -p pairSecret-5 && echo pairSecret-6 | sudo -S true'}});
"""


async def test_under_auto_a_password_given_as_a_name_value_pair_never_reaches_the_classifiers_evaluator(
        tmp_path: Path) -> None:
    from fabric_jev import CapabilityRegistry, HostConfig, JevHost
    from tests.conftest import program

    registry = CapabilityRegistry()

    async def write(args: Any, ctx: Any) -> Any:
        return "written"

    registry.register("deploy.write", write, "write")
    config = HostConfig(approvals={"write": "auto"})
    with mock(key="sk-approve") as url, front(Front(upstream=url)) as f:
        ev = route_evaluator(f.url, tmp_path)
        async with JevHost(config, capabilities=registry, evaluator=ev) as host:
            env = await host.run(program(PAIR_PROGRAM, requires=["deploy.write"]), None, intent="deploy")
        await ev.aclose()
    assert env.approvals[0].probability is not None  # the classifier answered
    assert f.requests, "the classifier's evaluator was never called"
    bodies = "".join(r.body.decode() for r in f.requests)
    for n in range(1, 7):
        assert f"pairSecret-{n}" not in bodies
    assert "[redacted: DB_PASSWORD value]" in bodies and '"DB_USER\\",\\"value\\":\\"app' in bodies.replace(" ", "")
