"""A canary key must appear in no envelope, log, error, request body or guest value."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from fabric_jev import HostConfig, JevHost, RunState
from fabric_jev.evaluators import TYPESAFE, AuthStore, CredentialResolver, HttpEvaluator
from tests.conftest import program
from tests.upstream import Front, front, mock

pytestmark = pytest.mark.anyio
CANARY = "sk-canary-7f3a9c1e55d04b2b"

GUEST = """
const found = [];
const probe = (label, value) => {
  try { if (JSON.stringify(value ?? null).includes('sk-canary')) found.push(label); } catch (e) {}
};
probe('globals', Object.getOwnPropertyNames(globalThis).map(k => { try { return String(globalThis[k]); } catch (e) { return ''; } }));
let answer = null, message = null;
try {
  answer = await jev.evaluate({state: 'refund please', questions: {q: {type: 'noul', instructions: 'Refund?'}}});
} catch (e) { message = e.message; probe('error', {m: e.message, s: String(e.stack)}); }
probe('answer', answer);
console.log('answer', answer, message);
await program.emit({answer, message});
return {found, ok: answer !== null, message};
"""


async def run_with(evaluator: HttpEvaluator) -> tuple[str, dict[str, object]]:
    async with JevHost(HostConfig(), evaluator=evaluator) as host:
        env = await host.run(program(GUEST, requires=["jev.evaluate"]), None)
        status = json.dumps(host.status().to_json())
    text = json.dumps(env.to_json()) + status
    return text, env.to_json()


def route(url: str, tmp: Path, key: str = CANARY) -> HttpEvaluator:
    environ = {"TYPESAFE_API_KEY": key}
    return HttpEvaluator(TYPESAFE, base_urls={"typesafe": url}, environ=environ,
                         credentials=CredentialResolver(TYPESAFE, store=AuthStore(tmp / "a.json"),
                                                        environ=environ))


async def test_canary_never_leaves_the_host(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with mock(key=CANARY) as upstream, front(Front(upstream=upstream)) as f:
        text, env = await run_with(route(f.url, tmp_path))
    assert env["state"] == RunState.COMPLETED.value
    assert env["result"]["ok"] is True and env["result"]["found"] == []  # type: ignore[index]
    assert CANARY not in text
    [rec] = f.requests
    assert rec.headers["authorization"] == f"Bearer {CANARY}"  # only where it belongs
    assert CANARY.encode() not in rec.body
    assert CANARY not in caplog.text


async def test_canary_absent_from_failures(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with mock(key="sk-other-key") as upstream:  # the server refuses the canary: 401
        text, env = await run_with(route(upstream, tmp_path))
    assert env["result"]["message"].startswith("Jev upstream returned HTTP 401 (line ")  # type: ignore[index]
    assert CANARY not in text and CANARY not in caplog.text
