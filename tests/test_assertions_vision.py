"""The OpenAI-compatible vision provider against a loopback server written here, which checks
the request shape and answers YES, NO, garbage and errors; one request per question."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from fabric_jev import ConfigError
from fabric_jev.assertions import (
    OpenAIVision,
    RecoveryAction,
    Snapshot,
    VisionError,
    VisionFallback,
    check,
    exists,
)
from tests.upstream import serving

pytestmark = pytest.mark.anyio
KEY = "sk-vision-test-0123456789abcdef"
PNG = b"\x89PNG\r\n\x1a\nfake-image-bytes"


@dataclass
class Endpoint:
    """What the server answers next, and every request it saw (checked for shape)."""

    base: str = ""
    status: int = 200
    content: Any = "YES"
    raw: bytes | None = None
    seen: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    state = Endpoint()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.seen.append(body)
            if self.path != "/v1/chat/completions":
                state.problems.append(f"path {self.path}")
            if self.headers.get("Authorization") != f"Bearer {KEY}":
                state.problems.append("authorization")
            messages = body.get("messages", [])
            user = messages[-1]["content"] if messages else []
            image = next((part for part in user if part.get("type") == "image_url"), None)
            url = image["image_url"]["url"] if image else ""
            if not url.startswith("data:image/png;base64,") or base64.b64decode(url.split(",", 1)[1]) != PNG:
                state.problems.append("image")
            if body.get("model") != "vision-model" or messages[0]["role"] != "system":
                state.problems.append("model or system message")
            if KEY in json.dumps(body):
                state.problems.append("key in body")
            raw = state.raw if state.raw is not None else json.dumps(
                {"choices": [{"message": {"role": "assistant", "content": state.content}}]}).encode()
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with serving(server) as port:
        state.base = f"http://127.0.0.1:{port}/v1"
        yield state


def provider(endpoint: Endpoint, **kw: Any) -> OpenAIVision:
    return OpenAIVision(base_url=endpoint.base, model="vision-model", api_key=KEY, **kw)


@pytest.mark.parametrize(("content", "answer"), [
    ("YES", True), ("NO", False), ("yes.", True), (" No \n", False),
    ("Yes, the button is visible.", None), ("MAYBE", None), ("", None), (None, None), (7, None),
])
async def test_answers_are_parsed_strictly(endpoint: Endpoint, content: Any, answer: bool | None) -> None:
    endpoint.content = content
    vision = provider(endpoint)
    try:
        assert await vision.ask("Is a Save button visible?", PNG) is answer
    finally:
        await vision.aclose()
    assert endpoint.problems == [] and len(endpoint.seen) == 1
    text = endpoint.seen[0]["messages"][1]["content"][0]["text"]
    assert text.startswith("Is a Save button visible?") and "YES or NO" in text


@pytest.mark.parametrize(("status", "raw", "message"), [
    (500, None, "answered HTTP 500"), (429, None, "answered HTTP 429"),
    (200, b"not json", "reply has no answer"), (200, b'{"choices": []}', "reply has no answer"),
    (200, b'{"choices": [{"message": {}}]}', "reply has no answer"),
])
async def test_errors_raise_once_without_retry_and_without_the_key(
        endpoint: Endpoint, status: int, raw: bytes | None, message: str,
        caplog: pytest.LogCaptureFixture) -> None:
    endpoint.status, endpoint.raw = status, raw
    vision = provider(endpoint)
    caplog.set_level(logging.DEBUG)
    try:
        with pytest.raises(VisionError, match=message) as err:
            await vision.ask("Is it there?", PNG)
    finally:
        await vision.aclose()
    assert len(endpoint.seen) == 1  # no retries
    assert KEY not in str(err.value) and KEY not in repr(vision) and KEY not in caplog.text


async def test_an_unreachable_endpoint_is_a_vision_error() -> None:
    vision = OpenAIVision(base_url="http://127.0.0.1:9/v1", model="m", api_key=KEY, timeout=5)
    try:
        with pytest.raises(VisionError, match="could not be reached"):
            await vision.ask("?", PNG)
    finally:
        await vision.aclose()


def test_configuration_from_the_environment_and_url_rules() -> None:
    env = {"FABRIC_JEV_VISION_BASE_URL": "http://localhost:8080/v1", "FABRIC_JEV_VISION_MODEL": "m",
           "FABRIC_JEV_VISION_API_KEY": KEY}
    vision = OpenAIVision(environ=env)
    assert (vision.base_url, vision.model) == ("http://localhost:8080/v1", "m")
    assert OpenAIVision(environ={**env, "FABRIC_JEV_VISION_BASE_URL": ""}).base_url == "https://api.openai.com/v1"
    with pytest.raises(ConfigError, match="plain http is allowed only to loopback"):
        OpenAIVision(environ={**env, "FABRIC_JEV_VISION_BASE_URL": "http://example.com/v1"})
    with pytest.raises(ConfigError, match="needs an API key"):
        OpenAIVision(environ={**env, "FABRIC_JEV_VISION_API_KEY": ""})
    with pytest.raises(ConfigError, match="needs a model"):
        OpenAIVision(environ={**env, "FABRIC_JEV_VISION_MODEL": ""})


class Busy:
    """A page that never settles (every snapshot has low confidence) and can take screenshots."""

    async def snapshot(self) -> Snapshot:
        return Snapshot.parse({"url": "http://127.0.0.1/", "quiet_ms": 5, "observed_ms": 5000,
                               "node_count": 50, "elements": [{"role": "button", "name": "Save"}]})

    async def screenshot(self) -> bytes:
        return PNG


@pytest.mark.parametrize(("content", "passed", "said"), [("YES", True, "yes"), ("NO", False, "no")])
async def test_used_by_a_check_only_when_enabled(endpoint: Endpoint, content: str, passed: bool,
                                                 said: str) -> None:
    endpoint.content = content
    vision = provider(endpoint)
    try:
        c = check(exists("name=Save"), "busy page", vision=VisionFallback(vision, "Is a Save button visible?"))
        result = await c.eventually(Busy(), timeout=30, max_retries=1)
        assert result.passed is passed and result.vision == said
        assert result.attempts[-1].action is RecoveryAction.VISION
        without = await check(exists("name=Save"), "busy page").eventually(Busy(), timeout=30, max_retries=1)
        assert without.vision is None and without.reason == "snapshot_exhausted"
    finally:
        await vision.aclose()
    assert len(endpoint.seen) == 1 and endpoint.problems == []


async def test_a_failing_provider_leaves_the_check_unsure_and_says_why(endpoint: Endpoint) -> None:
    endpoint.status = 503
    vision = provider(endpoint)
    try:
        c = check(exists("name=Save"), "busy page", vision=VisionFallback(vision, "Is Save visible?"))
        result = await c.eventually(Busy(), timeout=30, max_retries=1)
    finally:
        await vision.aclose()
    assert not result.passed and result.vision == "unsure"
    assert "vision: VisionError: the vision provider answered HTTP 503" in result.attempts[-1].detail
    assert KEY not in result.message()
