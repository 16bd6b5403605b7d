"""The vision providers (OpenAI-compatible, Anthropic Messages, Gemini generateContent) against a
loopback server written here that speaks each wire format: it checks every request's shape and
where its key travels, and answers YES, NO, garbage and errors; one request per question."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

from fabric_jev import ConfigError
from fabric_jev.assertions import (
    AnthropicVision,
    CheckResult,
    GeminiVision,
    OpenAIVision,
    RecoveryAction,
    Snapshot,
    VisionError,
    VisionFallback,
    check,
    exists,
    vision_provider,
)
from fabric_jev.assertions.vision import parse_boxes
from tests.upstream import serving

pytestmark = pytest.mark.anyio
KEY = "sk-vision-test-0123456789abcdef"
PNG = b"\x89PNG\r\n\x1a\nfake-image-bytes"
PROVIDERS = ("openai", "anthropic", "gemini")


@dataclass
class Endpoint:
    """What the server answers next, and every request it saw (checked for shape)."""

    port: int = 0
    status: int = 200
    content: Any = "YES"
    raw: bytes | None = None
    #: Send a body that never ends (64 KiB at a time, until the client hangs up).
    endless: bool = False
    #: Headers sent with `raw` (a Content-Encoding, say).
    headers: dict[str, str] = field(default_factory=dict)
    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def base(self, provider: str) -> str:
        root = f"http://127.0.0.1:{self.port}"
        return root + "/v1" if provider == "openai" else root


def _openai(headers: Any, body: dict[str, Any], problems: list[str]) -> bytes | None:
    if headers.get("Authorization") != f"Bearer {KEY}":
        problems.append("authorization")
    messages = body.get("messages", [])
    if body.get("model") != "vision-model" or messages[0]["role"] != "system":
        problems.append("model or system message")
    user = messages[-1]["content"]
    image = next((part for part in user if part.get("type") == "image_url"), None)
    url = image["image_url"]["url"] if image else ""
    if not url.startswith("data:image/png;base64,") or base64.b64decode(url.split(",", 1)[1]) != PNG:
        problems.append("image")
    text = next(part["text"] for part in user if part.get("type") == "text")
    return text.encode()


def _anthropic(headers: Any, body: dict[str, Any], problems: list[str]) -> bytes | None:
    if headers.get("x-api-key") != KEY or headers.get("anthropic-version") != "2023-06-01":
        problems.append("authorization")
    if headers.get("Authorization") is not None:
        problems.append("bearer header")
    if body.get("model") != "vision-model" or not isinstance(body.get("system"), str) \
            or not isinstance(body.get("max_tokens"), int):
        problems.append("model, system or max_tokens")
    [message] = body["messages"]
    image, text = message["content"]
    source = image.get("source", {})
    if (message["role"], image["type"], source.get("type"), source.get("media_type")) != (
            "user", "image", "base64", "image/png") or base64.b64decode(source["data"]) != PNG:
        problems.append("image")
    return str(text["text"]).encode() if text.get("type") == "text" else None


def _gemini(headers: Any, body: dict[str, Any], problems: list[str]) -> bytes | None:
    if headers.get("x-goog-api-key") != KEY or headers.get("Authorization") is not None:
        problems.append("authorization")
    if "parts" not in body.get("systemInstruction", {}):
        problems.append("system instruction")
    [content] = body["contents"]
    image, text = content["parts"]
    inline = image.get("inlineData", {})
    if inline.get("mimeType") != "image/png" or base64.b64decode(inline.get("data", "")) != PNG:
        problems.append("image")
    return str(text["text"]).encode()


def _reply(provider: str, content: Any) -> dict[str, Any]:
    if provider == "openai":
        return {"choices": [{"message": {"role": "assistant", "content": content}}]}
    if provider == "anthropic":
        return {"id": "msg_01", "type": "message", "role": "assistant", "model": "vision-model",
                "content": [{"type": "text", "text": content}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 1500, "output_tokens": 1}}
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": content}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 1300, "candidatesTokenCount": 1}}


ROUTES = {"/v1/chat/completions": ("openai", _openai), "/v1/messages": ("anthropic", _anthropic),
          "/v1beta/models/vision-model:generateContent": ("gemini", _gemini)}


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    state = Endpoint()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw_body = self.rfile.read(int(self.headers["Content-Length"]))
            body = json.loads(raw_body)
            parts = urlsplit(self.path)
            route = ROUTES.get(parts.path)
            if route is None:
                state.problems.append(f"path {self.path}")
                provider = "openai"
            else:
                provider, check_request = route
                state.seen.append((provider, body))
                prompt = check_request(self.headers, body, state.problems)
                if prompt is None or not (b"Answer YES or NO." in prompt
                                          or b"Reply with the JSON boxes only." in prompt):
                    state.problems.append("question")
            # The key travels in its header only: never in the body or the URL.
            if KEY.encode() in raw_body or KEY in self.path or parts.query:
                state.problems.append("key or query outside the header")
            if state.endless:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                try:
                    self.wfile.write(b'{"choices": [{"message": {"content": "')
                    while True:
                        self.wfile.write(b"Y" * 65536)
                except OSError:  # the client hung up
                    return
            raw = state.raw if state.raw is not None else json.dumps(_reply(provider, state.content)).encode()
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            for name, value in state.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with serving(server) as port:
        state.port = port
        yield state


def provider(endpoint: Endpoint, name: str = "openai", **kw: Any) -> Any:
    return vision_provider(name, base_url=endpoint.base(name), model="vision-model", api_key=KEY, environ={},
                           **kw)


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize(("content", "answer"), [
    ("YES", True), ("NO", False), ("yes.", True), (" No \n", False),
    ("Yes, the button is visible.", None), ("MAYBE", None), ("", None), (None, None), (7, None),
])
async def test_answers_are_parsed_strictly(endpoint: Endpoint, name: str, content: Any,
                                           answer: bool | None) -> None:
    endpoint.content = content
    vision = provider(endpoint, name)
    try:
        assert await vision.ask("Is a Save button visible?", PNG) is answer
    finally:
        await vision.aclose()
    assert endpoint.problems == [] and [p for p, _ in endpoint.seen] == [name]


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize(("status", "raw", "message"), [
    (500, None, "answered HTTP 500"), (429, None, "answered HTTP 429"), (401, None, "answered HTTP 401"),
    (200, b"not json", "reply has no answer"), (200, b"{}", "reply has no answer"),
    (200, b'{"choices": [], "content": [], "candidates": []}', "reply has no answer"),
    (200, b'{"choices": [{"message": {}}], "content": [{}], "candidates": [{"content": {}}]}',
     "reply has no answer"),
])
async def test_errors_raise_once_without_retry_and_without_the_key(
        endpoint: Endpoint, name: str, status: int, raw: bytes | None, message: str,
        caplog: pytest.LogCaptureFixture) -> None:
    endpoint.status, endpoint.raw = status, raw
    vision = provider(endpoint, name)
    caplog.set_level(logging.DEBUG)
    try:
        with pytest.raises(VisionError, match=message) as err:
            await vision.ask("Is it there?", PNG)
    finally:
        await vision.aclose()
    assert len(endpoint.seen) == 1 and endpoint.problems == []  # no retries
    assert KEY not in str(err.value) and KEY not in repr(vision) and KEY not in caplog.text


@pytest.mark.parametrize("name", PROVIDERS)
async def test_a_reply_that_never_ends_is_cut_off_at_its_limit(endpoint: Endpoint, name: str) -> None:
    endpoint.endless = True
    # The timeout is far away: the reply is refused by its size, not read until time runs out.
    vision = provider(endpoint, name, timeout=50)
    try:
        with pytest.raises(VisionError, match="reply exceeds 256 KiB") as err:
            await vision.ask("Is it there?", PNG)
    finally:
        await vision.aclose()
    assert KEY not in str(err.value)


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize("coding", ["gzip", "deflate"])
async def test_a_compressed_reply_is_read_as_a_plain_one(endpoint: Endpoint, name: str, coding: str) -> None:
    import gzip
    import zlib

    plain = json.dumps(_reply(name, "YES")).encode()
    endpoint.raw = gzip.compress(plain) if coding == "gzip" else zlib.compress(plain)
    endpoint.headers = {"Content-Encoding": coding}
    vision = provider(endpoint, name)
    try:
        assert await vision.ask("Is it there?", PNG) is True
    finally:
        await vision.aclose()
    assert endpoint.problems == []


async def test_an_anthropic_reply_without_a_text_block_has_no_answer(endpoint: Endpoint) -> None:
    endpoint.raw = json.dumps({"type": "message", "content": [{"type": "tool_use", "id": "t", "name": "x",
                                                                "input": {}}]}).encode()
    vision = provider(endpoint, "anthropic")
    try:
        with pytest.raises(VisionError, match="reply has no answer"):
            await vision.ask("Is it there?", PNG)
    finally:
        await vision.aclose()


async def test_a_gemini_thought_part_is_not_the_answer(endpoint: Endpoint) -> None:
    endpoint.raw = json.dumps({"candidates": [{"content": {"parts": [
        {"text": "NO, let me look again", "thought": True}, {"text": "YES"}]}}]}).encode()
    vision = provider(endpoint, "gemini")
    try:
        assert await vision.ask("Is it there?", PNG) is True
    finally:
        await vision.aclose()


@pytest.mark.parametrize("name", PROVIDERS)
async def test_an_unreachable_endpoint_is_a_vision_error(name: str) -> None:
    vision = vision_provider(name, base_url="http://127.0.0.1:9/v1", model="m", api_key=KEY, timeout=5,
                             environ={})
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


@pytest.mark.parametrize(("name", "cls", "base", "own_key"), [
    ("openai", OpenAIVision, "https://api.openai.com/v1", "OPENAI_API_KEY"),
    ("anthropic", AnthropicVision, "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
    ("gemini", GeminiVision, "https://generativelanguage.googleapis.com", "GEMINI_API_KEY"),
    ("gemini", GeminiVision, "https://generativelanguage.googleapis.com", "GOOGLE_API_KEY"),
])
def test_each_provider_by_name_with_its_own_key_variable(name: str, cls: type, base: str, own_key: str) -> None:
    env = {"FABRIC_JEV_VISION_PROVIDER": name, "FABRIC_JEV_VISION_MODEL": "m", own_key: " k-own "}
    vision = vision_provider(environ=env)
    assert type(vision) is cls and vision.base_url == base and vision._key == "k-own"
    # FABRIC_JEV_VISION_API_KEY is read first.
    assert vision_provider(environ={**env, "FABRIC_JEV_VISION_API_KEY": KEY})._key == KEY
    with pytest.raises(ConfigError, match=f"needs an API key .*{own_key}"):
        vision_provider(environ={**env, own_key: "  "})


def test_an_unknown_provider_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown vision provider 'glm'; expected openai, anthropic, gemini"):
        vision_provider("glm", environ={})


class Busy:
    """A page that never settles (every snapshot has low confidence) and can take screenshots."""

    async def snapshot(self) -> Snapshot:
        return Snapshot.parse({"url": "http://127.0.0.1/", "quiet_ms": 5, "observed_ms": 5000,
                               "node_count": 50, "elements": [{"role": "button", "name": "Save"}]})

    async def screenshot(self) -> bytes:
        return PNG


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize(("content", "passed", "said"), [("YES", True, "yes"), ("NO", False, "no")])
async def test_used_by_a_check_only_when_enabled(endpoint: Endpoint, name: str, content: str, passed: bool,
                                                 said: str) -> None:
    endpoint.content = content
    vision = provider(endpoint, name)
    try:
        c = check(exists("name=Save"), "busy page", vision=VisionFallback(vision, "Is a Save button visible?"))
        result = await c.eventually(Busy(), timeout=30, max_retries=1)
        assert result.passed is passed and result.vision == said
        assert result.attempts[-1].action is RecoveryAction.VISION
        without = await check(exists("name=Save"), "busy page").eventually(Busy(), timeout=30, max_retries=1)
        assert without.vision is None and without.reason == "snapshot_exhausted"
    finally:
        await vision.aclose()
    assert [p for p, _ in endpoint.seen] == [name] and endpoint.problems == []


@pytest.mark.parametrize("name", PROVIDERS)
async def test_a_failing_provider_leaves_the_check_unsure_and_says_why(endpoint: Endpoint, name: str) -> None:
    endpoint.status = 503
    vision = provider(endpoint, name)
    try:
        c = check(exists("name=Save"), "busy page", vision=VisionFallback(vision, "Is Save visible?"))
        result = await c.eventually(Busy(), timeout=30, max_retries=1)
    finally:
        await vision.aclose()
    assert not result.passed and result.vision == "unsure"
    assert "vision: VisionError: the vision provider answered HTTP 503" in result.attempts[-1].detail
    assert KEY not in result.message()


# ---------------------------------------------------------------- proposal mode


class BusyAt(Busy):
    """A busy page (never confident) whose snapshot has a visible Save button at (100, 50, 80x30)."""

    async def snapshot(self) -> Snapshot:
        box = {"x": 100, "y": 50, "width": 80, "height": 30}
        return Snapshot.parse({"url": "http://127.0.0.1/", "quiet_ms": 5, "observed_ms": 5000, "node_count": 50,
                               "elements": [{"role": "button", "name": "Save", "visible": True,
                                             "in_viewport": True, "bbox": box, "viewport_bbox": box}]})


async def proposing(endpoint: Endpoint, name: str, content: str, predicate: Any = None) -> CheckResult:
    endpoint.content = content
    vision = provider(endpoint, name)
    try:
        fallback = VisionFallback(vision, "Where is the Save button?", mode="propose")
        c = check(predicate or exists("name=Save"), "busy page", vision=fallback)
        return await c.eventually(BusyAt(), timeout=30, max_retries=1)
    finally:
        await vision.aclose()


@pytest.mark.parametrize("name", PROVIDERS)
async def test_a_proposed_box_on_the_matching_element_passes(endpoint: Endpoint, name: str) -> None:
    result = await proposing(endpoint, name, '```json\n{"boxes": [[400, 300, 20, 20], [110, 55, 60, 20]]}\n```')
    assert result.passed and result.vision == "yes", result.message()
    assert "one lies on button \"Save\"" in result.attempts[-1].detail
    assert [p for p, _ in endpoint.seen] == [name] and endpoint.problems == []
    [(_, body)] = endpoint.seen
    assert "at most 8" in json.dumps(body)  # the proposal prompt, not the yes/no one


@pytest.mark.parametrize("name", PROVIDERS)
async def test_a_proposed_box_elsewhere_fails(endpoint: Endpoint, name: str) -> None:
    result = await proposing(endpoint, name, '{"boxes": [[400, 300, 20, 20]]}')
    assert not result.passed and result.vision == "no"
    assert "none of 1 proposed box(es) lies on a matching element" in result.attempts[-1].detail


async def test_a_proposal_cannot_change_the_assertion(endpoint: Endpoint) -> None:
    # The snapshot has no Delete button: no box can make the check pass, and nothing is asked.
    result = await proposing(endpoint, "openai", '{"boxes": [[110, 55, 60, 20]]}', exists("name=Delete"))
    assert not result.passed and result.vision == "no" and endpoint.seen == []
    assert "the last snapshot does not satisfy the predicate (no_match)" in result.attempts[-1].detail


@pytest.mark.parametrize("name", PROVIDERS)
async def test_a_malformed_proposal_is_unsure(endpoint: Endpoint, name: str) -> None:
    result = await proposing(endpoint, name, "The Save button is at the top left.")
    assert not result.passed and result.vision == "unsure"
    assert "VisionError: the vision provider's proposal is not JSON" in result.attempts[-1].detail


@pytest.mark.parametrize(("text", "boxes"), [
    ('{"boxes": []}', []), ('{"boxes": [[1, 2, 3, 4]]}', [(1.0, 2.0, 3.0, 4.0)]),
    ('```\n{"boxes": [[0.5, 0, 1, 1]]}\n```', [(0.5, 0.0, 1.0, 1.0)]),
])
def test_boxes_are_parsed(text: str, boxes: list[Any]) -> None:
    assert parse_boxes(text) == boxes


@pytest.mark.parametrize(("text", "needle"), [
    ("[]", "not a list"), ('{"boxes": 3}', "not a list"), ('{"boxes": ' + json.dumps([[0, 0, 1, 1]] * 9) + "}",
                                                          "at most 8"),
    ('{"boxes": [[0, 0, 0, 1]]}', "proposed a box that is not"), ('{"boxes": [[0, 0, 1]]}', "proposed a box that is not"),
    ('{"boxes": [[true, 0, 1, 1]]}', "proposed a box that is not"), ('{"boxes": [["1", 0, 1, 1]]}', "proposed a box that is not"),
    ('{"boxes": [[1e400, 0, 1, 1]]}', "proposed a box that is not"), ("nope", "not JSON"),
    ("[" * 100_000, "not JSON"), ('{"boxes": ' + "[" * 5_000 + "]" * 5_000 + "}", "not JSON"),
])
def test_malformed_boxes_are_refused(text: str, needle: str) -> None:
    with pytest.raises(VisionError, match=needle):
        parse_boxes(text)


def test_proposal_mode_needs_a_provider_that_proposes() -> None:
    class YesOnly:
        async def ask(self, question: str, image: bytes) -> bool | None:
            return True

    with pytest.raises(ValueError, match="needs a provider with propose"):
        VisionFallback(YesOnly(), "?", mode="propose")
    with pytest.raises(ValueError, match="verify or propose"):
        VisionFallback(YesOnly(), "?", mode="guess")  # type: ignore[arg-type]
