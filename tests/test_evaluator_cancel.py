"""Evaluator cancellation through anyio scopes alone, and the one model-id rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from fabric_jev import ConfigError, FixtureEvaluator, HostConfig
from fabric_jev.contract.evaluation import validate_request
from fabric_jev.contract.model_id import is_model_id
from fabric_jev.errors import AnswerInvalid, RequestInvalid, UpstreamError
from fabric_jev.evaluators import TYPESAFE, AuthStore, CredentialResolver, HttpEvaluator
from fabric_jev.evaluators.local import LocalEvaluator
from tests.upstream import Front, front

pytestmark = pytest.mark.anyio
REQUEST = validate_request({"state": "x", "questions": {"q": {"type": "noul", "instructions": "Is it?"}}})


def http(url: str, tmp: Path) -> HttpEvaluator:
    env = {"TYPESAFE_API_KEY": "sk-cancel"}
    return HttpEvaluator(TYPESAFE, base_urls={"typesafe": url}, environ=env,
                         credentials=CredentialResolver(TYPESAFE, store=AuthStore(tmp / "a.json"), environ=env))


async def test_an_already_cancelled_caller_sends_nothing_over_http(tmp_path: Path) -> None:
    with front(Front(answer=lambda rec: (500, {}, b""))) as f:
        ev = http(f.url, tmp_path)
        with anyio.CancelScope() as scope:
            scope.cancel()
            await ev.evaluate(REQUEST, timeout=5)
            pytest.fail("evaluate returned under a cancelled scope")
        assert scope.cancelled_caught
        await ev.aclose()
    assert f.requests == [] and ev.requests == 0


@pytest.mark.parametrize("make", [lambda: FixtureEvaluator({"answers": {"q": {"noul": 0.5}}}), LocalEvaluator])
async def test_an_already_cancelled_caller_sends_nothing_anywhere(make: Any) -> None:
    ev = make()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await ev.evaluate(REQUEST, timeout=5)
    assert scope.cancelled_caught and ev.calls == 0


async def test_errors_keep_their_type(tmp_path: Path) -> None:
    with front(Front(answer=lambda rec: (500, {}, b""))) as f:
        ev = http(f.url, tmp_path)
        with pytest.raises(UpstreamError, match="HTTP 500"):
            await ev.evaluate(REQUEST, timeout=5)
        await ev.aclose()
    with pytest.raises(AnswerInvalid):  # never wrapped in an ExceptionGroup
        await FixtureEvaluator({"answers": {}}).evaluate(REQUEST, timeout=5)


@pytest.mark.parametrize(("model", "ok"), [
    ("jev-latest", True), ("jev-1.13.0", True), ("typesafe/jev-1.13", True), ("~typesafe/jev-latest", True),
    ("typesafe-ai/jev", True), ("../etc/passwd", False), ("jev..latest", False), ("a/b/c", False),
    ("typesafe/../jev", False), ("/jev", False), ("jev/", False), ("jev latest", False), ("jev:free", False),
    ("jev?x=1", False), ("jev%2f", False), ("", False), ("x" * 129, False), ("~~jev", False),
])
def test_one_model_id_rule_for_requests_and_config(model: str, ok: bool) -> None:
    assert is_model_id(model) is ok
    raw = {"state": "x", "questions": {"q": {"type": "noul", "instructions": "i"}}, "model": model}
    if ok:
        assert validate_request(raw).model == model
        assert HostConfig.parse({"model": model}).model == model
    else:
        with pytest.raises(RequestInvalid, match="model id"):
            validate_request(raw)
        with pytest.raises(ConfigError, match="model id"):
            HostConfig.parse({"model": model})
