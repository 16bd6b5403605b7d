"""Vision providers for the fallback: OpenAI-compatible, Anthropic and Gemini, behind one interface.

Used only by checks that enable it (`check(..., vision=VisionFallback(provider,
question))`). Each provider asks one narrow yes/no question per call — no
retries: a check is the place that decides whether to try again. The
screenshot goes inline as base64 PNG in the provider's own wire format:

- `OpenAIVision`: `POST {base}/chat/completions`, an `image_url` part with a
  data URL; `Authorization: Bearer KEY`.
- `AnthropicVision`: `POST {base}/v1/messages` (the Messages API), an `image`
  block with a base64 source; `x-api-key: KEY` and `anthropic-version`.
- `GeminiVision`: `POST {base}/v1beta/models/{model}:generateContent`, an
  `inlineData` part; `x-goog-api-key: KEY` (never the `?key=` query form).

The answer must be exactly YES or NO (case and a final full stop aside);
anything else is "unsure". `propose(question, image)` asks instead where the
thing the question is about is: the reply must be JSON `{"boxes": [[x, y,
width, height], ...]}` in screenshot pixels (at most 8), which a check in
proposal mode accepts only where its snapshot has a matching element. Base URL, model and key come from the arguments or
the environment (`FABRIC_JEV_VISION_BASE_URL`, `FABRIC_JEV_VISION_MODEL`,
`FABRIC_JEV_VISION_API_KEY`, then the provider's own key variable); the base
URL must be https, or plain http to loopback only, like the evaluator
routes'. `vision_provider(name)` builds one by name, and `FABRIC_JEV_VISION_PROVIDER`
names the default. The key goes into a request header and nowhere else: never
into the URL, the body, an error, a log or the provider's repr.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import anyio

from .._json import JSONInputError, loads_bounded
from ..errors import AnswerInvalid, ConfigError, JevError

if TYPE_CHECKING:
    import httpx

DEFAULT_BASE_URL = "https://api.openai.com/v1"
ENV_PROVIDER = "FABRIC_JEV_VISION_PROVIDER"
ENV_BASE_URL = "FABRIC_JEV_VISION_BASE_URL"
ENV_MODEL = "FABRIC_JEV_VISION_MODEL"
ENV_KEY = "FABRIC_JEV_VISION_API_KEY"
MAX_IMAGE_BYTES = 8 * 1024 * 1024
MAX_REPLY_BYTES = 256 * 1024
SYSTEM = ("You check one fact about a screenshot of a web page. Reply with exactly one word: "
          "YES if the statement in the question is true of the screenshot, NO otherwise.")
PROPOSE_SYSTEM = ("You locate elements in a screenshot of a web page. Reply with JSON only, no prose: "
                  '{"boxes": [[x, y, width, height], ...]} in pixels of the screenshot (x, y: the top '
                  "left corner), one box per element the question is about, at most 8; "
                  '{"boxes": []} if there is none.')
MAX_BOXES = 8
_ANSWER = re.compile(r"\s*(YES|NO)\.?\s*", re.IGNORECASE)
_FENCED = re.compile(r"\s*```(?:json)?\s*(.*?)\s*```\s*", re.DOTALL)

#: A proposed box: (x, y, width, height) in screenshot pixels.
Box = tuple[float, float, float, float]


class VisionError(JevError):
    """The vision endpoint could not be asked or did not answer in the expected shape."""


def parse_answer(text: Any) -> bool | None:
    """YES -> True, NO -> False, anything else -> None (unsure)."""
    if not isinstance(text, str):
        return None
    m = _ANSWER.fullmatch(text)
    return None if m is None else m.group(1).upper() == "YES"


def _prompt(question: str) -> str:
    return f"{question}\nAnswer YES or NO."


def _propose_prompt(question: str) -> str:
    return f"{question}\nReply with the JSON boxes only."


def parse_boxes(text: Any) -> list[Box]:
    """`{"boxes": [[x, y, w, h], ...]}` (a ```json fence allowed) -> boxes; VisionError otherwise."""
    import json
    import math

    if not isinstance(text, str):
        raise VisionError("the vision provider's proposal is not text")
    fenced = _FENCED.fullmatch(text)
    try:
        data = json.loads(fenced.group(1) if fenced else text)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes
        raise VisionError("the vision provider's proposal is not JSON") from None
    boxes = data.get("boxes") if isinstance(data, dict) else None
    if not isinstance(boxes, list) or len(boxes) > MAX_BOXES:
        raise VisionError(f"the vision provider's proposal is not a list of at most {MAX_BOXES} boxes")
    out: list[Box] = []
    for box in boxes:
        if (not isinstance(box, list) or len(box) != 4
                or not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in box)
                or box[2] <= 0 or box[3] <= 0):
            raise VisionError("the vision provider proposed a box that is not [x, y, width, height]")
        out.append((float(box[0]), float(box[1]), float(box[2]), float(box[3])))
    return out


class _HttpVision:
    """One provider's wire format around the shared rules (see the module doc)."""

    name: ClassVar[str]
    default_base_url: ClassVar[str]
    #: The provider's own key variables, read after FABRIC_JEV_VISION_API_KEY.
    key_env: ClassVar[tuple[str, ...]]

    def __init__(self, *, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 timeout: float = 30.0, environ: Mapping[str, str] | None = None,
                 client: httpx.AsyncClient | None = None) -> None:
        from ..evaluators.routes import check_base_url

        env = os.environ if environ is None else environ
        self.base_url = check_base_url(base_url or env.get(ENV_BASE_URL) or self.default_base_url)
        chosen = model or env.get(ENV_MODEL)
        if not chosen:
            raise ConfigError(f"the {self.name} vision provider needs a model (argument or {ENV_MODEL})")
        self.model = chosen
        key = api_key or next((env[k].strip() for k in (ENV_KEY, *self.key_env) if env.get(k, "").strip()), "")
        if not key:
            raise ConfigError(f"the {self.name} vision provider needs an API key (argument, {ENV_KEY} or "
                              f"{' or '.join(self.key_env)})")
        self._key = key
        self.timeout = timeout
        self._client = client
        self._own_client = client is None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r})"

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient(follow_redirects=False, timeout=None, trust_env=False)
        return self._client

    def url(self) -> str:
        raise NotImplementedError

    def auth_headers(self, key: str) -> dict[str, str]:
        raise NotImplementedError

    def request_body(self, question: str, image: bytes) -> dict[str, Any]:
        """The request for one yes/no question (no key in it)."""
        return self.body(SYSTEM, _prompt(question), image, self.answer_tokens)

    def propose_body(self, question: str, image: bytes) -> dict[str, Any]:
        """The request for one proposal (no key in it)."""
        return self.body(PROPOSE_SYSTEM, _propose_prompt(question), image, self.proposal_tokens)

    #: Output caps: a yes/no answer is one word; a proposal is up to 8 boxes of JSON.
    answer_tokens: ClassVar[int | None] = None
    proposal_tokens: ClassVar[int | None] = None

    def body(self, system: str, text: str, image: bytes, max_tokens: int | None) -> dict[str, Any]:
        raise NotImplementedError

    def reply_text(self, data: Any) -> Any:
        """The model's text from a parsed reply; KeyError/IndexError/TypeError when absent."""
        raise NotImplementedError

    async def ask(self, question: str, image: bytes) -> bool | None:
        """One request; YES/NO as True/False, any other reply None; failures raise VisionError."""
        return parse_answer(await self._send(self.request_body(question, image), image))

    async def propose(self, question: str, image: bytes) -> list[Box]:
        """One request; the boxes the model proposes (see parse_boxes); failures raise VisionError."""
        return parse_boxes(await self._send(self.propose_body(question, image), image))

    async def _send(self, body: dict[str, Any], image: bytes) -> Any:
        """POST one request; the reply's text (the provider's wire format) or VisionError."""
        import httpx

        if len(image) > MAX_IMAGE_BYTES:
            raise VisionError(f"screenshot too large for the vision provider ({len(image)} bytes)")
        from ..evaluators.bounded_body import ACCEPT_ENCODING, read_capped

        headers = {**self.auth_headers(self._key), "Content-Type": "application/json",
                   "Accept-Encoding": ACCEPT_ENCODING}
        try:
            with anyio.fail_after(self.timeout):
                # Streamed and cut off past the limit, decompressed by layers within it: a reply is
                # never held whole before it is judged.
                async with self._http().stream("POST", self.url(), json=body, headers=headers) as reply:
                    if reply.status_code != 200:
                        raise VisionError(f"the vision provider answered HTTP {reply.status_code}")
                    raw = await read_capped(reply, MAX_REPLY_BYTES, "the vision provider's reply")
        except AnswerInvalid as exc:
            raise VisionError(str(exc)) from None
        except TimeoutError:
            raise VisionError(f"the vision provider did not answer within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise VisionError(f"the vision provider could not be reached ({type(exc).__name__})") from None
        try:
            data = loads_bounded(raw, what="vision reply", max_bytes=MAX_REPLY_BYTES)
            return self.reply_text(data)
        except (JSONInputError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise VisionError(f"the vision provider's reply has no answer ({type(exc).__name__})") from None

    async def aclose(self) -> None:
        if self._own_client and self._client is not None:
            await self._client.aclose()
            self._client = None


def _joined(texts: list[Any]) -> Any:
    """The text of a reply made of blocks; none at all is a reply without an answer."""
    if not texts:
        raise KeyError("text")
    return "".join(texts) if all(isinstance(t, str) for t in texts) else None


def _b64(image: bytes) -> str:
    return base64.b64encode(image).decode("ascii")


class OpenAIVision(_HttpVision):
    """`VisionProvider` over any OpenAI-compatible `POST {base_url}/chat/completions`."""

    name = "openai"
    default_base_url = DEFAULT_BASE_URL
    key_env = ("OPENAI_API_KEY",)

    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    answer_tokens = 3
    proposal_tokens = 300

    def body(self, system: str, text: str, image: bytes, max_tokens: int | None) -> dict[str, Any]:
        return {
            "model": self.model, "temperature": 0, "max_tokens": max_tokens,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": [
                    {"type": "text", "text": text},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + _b64(image)}},
                ]},
            ],
        }

    def reply_text(self, data: Any) -> Any:
        return data["choices"][0]["message"]["content"]


class AnthropicVision(_HttpVision):
    """`VisionProvider` over Anthropic's Messages API (`POST {base_url}/v1/messages`)."""

    name = "anthropic"
    default_base_url = "https://api.anthropic.com"
    key_env = ("ANTHROPIC_API_KEY",)
    #: The Messages API version this wire format follows.
    api_version = "2023-06-01"

    def url(self) -> str:
        return f"{self.base_url}/v1/messages"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-api-key": key, "anthropic-version": self.api_version}

    answer_tokens = 5
    proposal_tokens = 300

    def body(self, system: str, text: str, image: bytes, max_tokens: int | None) -> dict[str, Any]:
        # The image block goes before the text, as the Messages API advises for images.
        return {
            "model": self.model, "max_tokens": max_tokens, "temperature": 0, "system": system,
            "messages": [{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _b64(image)}},
                {"type": "text", "text": text},
            ]}],
        }

    def reply_text(self, data: Any) -> Any:
        texts = [b["text"] for b in data["content"] if b["type"] == "text"]
        return _joined(texts)


class GeminiVision(_HttpVision):
    """`VisionProvider` over the Gemini API's `generateContent` with inline image data."""

    name = "gemini"
    default_base_url = "https://generativelanguage.googleapis.com"
    key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

    def url(self) -> str:
        from urllib.parse import quote

        return f"{self.base_url}/v1beta/models/{quote(self.model, safe='-._')}:generateContent"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-goog-api-key": key}

    def body(self, system: str, text: str, image: bytes, max_tokens: int | None) -> dict[str, Any]:
        # No output-token cap: on thinking models it would also cap the thinking, and
        # the reply could end before the answer. The answer is still parsed strictly.
        return {
            "systemInstruction": {"parts": [{"text": system}]},
            "contents": [{"role": "user", "parts": [
                {"inlineData": {"mimeType": "image/png", "data": _b64(image)}},
                {"text": text},
            ]}],
            "generationConfig": {"temperature": 0},
        }

    def reply_text(self, data: Any) -> Any:
        parts = data["candidates"][0]["content"]["parts"]
        # Thought summaries, when a model sends them, are not the answer.
        return _joined([p["text"] for p in parts if "text" in p and not p.get("thought")])


#: The vision providers by the name `vision_provider` and FABRIC_JEV_VISION_PROVIDER take.
VISION_PROVIDERS: dict[str, type[_HttpVision]] = {
    "openai": OpenAIVision, "anthropic": AnthropicVision, "gemini": GeminiVision}


def vision_provider(name: str | None = None, *, environ: Mapping[str, str] | None = None,
                    base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                    timeout: float = 30.0, client: httpx.AsyncClient | None = None) -> _HttpVision:
    """A provider by name (`openai`, `anthropic`, `gemini`; default FABRIC_JEV_VISION_PROVIDER,
    else `openai`), configured from `options` and the environment."""
    env = os.environ if environ is None else environ
    chosen = name or env.get(ENV_PROVIDER) or "openai"
    cls = VISION_PROVIDERS.get(chosen)
    if cls is None:
        raise ConfigError(f"unknown vision provider {chosen!r}; expected {', '.join(VISION_PROVIDERS)}")
    return cls(environ=env, base_url=base_url, model=model, api_key=api_key, timeout=timeout, client=client)


__all__ = ["VISION_PROVIDERS", "AnthropicVision", "Box", "GeminiVision", "OpenAIVision", "VisionError",
           "parse_answer", "parse_boxes", "vision_provider"]
