from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric_jev import AnswerInvalid, ConfigError
from fabric_jev.contract.evaluation import validate_request
from fabric_jev.evaluators import (
    TYPESAFE,
    CassetteEvaluator,
    CredentialResolver,
    HttpEvaluator,
    request_digest,
)
from fabric_jev.evaluators.credentials import AuthStore
from tests.upstream import mock

pytestmark = pytest.mark.anyio
KEY = "sk-cassette-key"


def req(state: str) -> object:
    return validate_request({"state": state, "questions": {
        "q": {"type": "choice", "instructions": "Which?", "criteria": {"a": "A", "b": "B"}}}})


async def test_record_then_replay_offline(tmp_path: Path) -> None:
    path = tmp_path / "tape.json"
    with mock(key=KEY) as upstream:
        inner = HttpEvaluator(TYPESAFE, base_urls={"typesafe": upstream}, environ={},
                              credentials=CredentialResolver(TYPESAFE, store=AuthStore(tmp_path / "a"),
                                                             environ={"TYPESAFE_API_KEY": KEY}))
        recorder = CassetteEvaluator(path, record_from=inner)
        live = await recorder.evaluate(req("one"), timeout=10)  # type: ignore[arg-type]
        again = await recorder.evaluate(req("one"), timeout=10)  # type: ignore[arg-type]
        await recorder.aclose()
    assert recorder.recorded == 1 and recorder.replayed == 1 and again == live
    assert KEY not in path.read_text()
    # The server is gone: replay works offline, a new request does not.
    player = CassetteEvaluator(path)
    assert await player.evaluate(req("one"), timeout=1) == live  # type: ignore[arg-type]
    with pytest.raises(AnswerInvalid, match="no recording for this request"):
        await player.evaluate(req("two"), timeout=1)  # type: ignore[arg-type]


def test_digest_is_canonical() -> None:
    a = validate_request({"state": {"x": 1, "y": 2}, "questions": {"q": {"type": "noul", "instructions": "?"}}})
    b = validate_request({"questions": {"q": {"instructions": "?", "type": "noul"}}, "state": {"y": 2, "x": 1}})
    c = validate_request({"state": {"x": 1, "y": 3}, "questions": {"q": {"type": "noul", "instructions": "?"}}})
    assert request_digest(a, "jev-latest") == request_digest(b, "jev-latest")
    assert request_digest(a, "jev-latest") != request_digest(c, "jev-latest")
    assert request_digest(a, "jev-latest") != request_digest(a, "jev-preview")


async def test_tampered_recording_is_validated_again(tmp_path: Path) -> None:
    path = tmp_path / "tape.json"
    r = req("one")
    digest = request_digest(r, "jev-latest")  # type: ignore[arg-type]
    path.write_text(json.dumps({"version": 1, "entries": {digest: {"evaluation": {
        "answers": {"q": {"type": "choice", "choice": "zzz", "probabilities": {"a": 1, "b": 0},
                          "confidence": 1}}, "usage": {"input_tokens": 1, "output_tokens": 1}}}}}))
    with pytest.raises(AnswerInvalid, match="not one of the options"):
        await CassetteEvaluator(path).evaluate(r, timeout=1)  # type: ignore[arg-type]


def test_missing_or_bad_cassettes_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        CassetteEvaluator(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 2, "entries": {}}')
    with pytest.raises(ConfigError, match="version-1"):
        CassetteEvaluator(bad)
