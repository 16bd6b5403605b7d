"""A vision provider that ships: any OpenAI-compatible chat-completions endpoint.

Used only by checks that enable it (`check(..., vision=VisionFallback(provider,
question))`). One request per question — no retries: a check is the place that
decides whether to try again. The screenshot goes as a PNG data URL with one
narrow yes/no question; the answer must be exactly YES or NO (case and a final
full stop aside), anything else is "unsure". Base URL, model and key come from
the arguments or the environment (`FABRIC_JEV_VISION_BASE_URL`,
`FABRIC_JEV_VISION_MODEL`, `FABRIC_JEV_VISION_API_KEY`); the base URL must be
https, or plain http to loopback only, like the evaluator routes'. The key goes
into the Authorization header and nowhere else: never into an error, a log or
the provider's repr.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from .._json import JSONInputError, loads_bounded
from ..errors import ConfigError, JevError

if TYPE_CHECKING:
    import httpx

DEFAULT_BASE_URL = "https://api.openai.com/v1"
ENV_BASE_URL = "FABRIC_JEV_VISION_BASE_URL"
ENV_MODEL = "FABRIC_JEV_VISION_MODEL"
ENV_KEY = "FABRIC_JEV_VISION_API_KEY"
MAX_IMAGE_BYTES = 8 * 1024 * 1024
MAX_REPLY_BYTES = 256 * 1024
SYSTEM = ("You check one fact about a screenshot of a web page. Reply with exactly one word: "
          "YES if the statement in the question is true of the screenshot, NO otherwise.")
_ANSWER = re.compile(r"\s*(YES|NO)\.?\s*", re.IGNORECASE)


class VisionError(JevError):
    """The vision endpoint could not be asked or did not answer in the expected shape."""


def parse_answer(text: Any) -> bool | None:
    """YES -> True, NO -> False, anything else -> None (unsure)."""
    if not isinstance(text, str):
        return None
    m = _ANSWER.fullmatch(text)
    return None if m is None else m.group(1).upper() == "YES"


class OpenAIVision:
    """`VisionProvider` over `POST {base_url}/chat/completions` (see the module doc)."""

    def __init__(self, *, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 timeout: float = 30.0, environ: Mapping[str, str] | None = None,
                 client: httpx.AsyncClient | None = None) -> None:
        from ..evaluators.routes import check_base_url

        env = os.environ if environ is None else environ
        self.base_url = check_base_url(base_url or env.get(ENV_BASE_URL) or DEFAULT_BASE_URL)
        chosen = model or env.get(ENV_MODEL)
        if not chosen:
            raise ConfigError(f"the vision provider needs a model (argument or {ENV_MODEL})")
        self.model = chosen
        key = api_key or env.get(ENV_KEY)
        if not key:
            raise ConfigError(f"the vision provider needs an API key (argument or {ENV_KEY})")
        self._key = key
        self.timeout = timeout
        self._client = client
        self._own_client = client is None

    def __repr__(self) -> str:
        return f"OpenAIVision(base_url={self.base_url!r}, model={self.model!r})"

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient(follow_redirects=False, timeout=None, trust_env=False)
        return self._client

    def request_body(self, question: str, image: bytes) -> dict[str, Any]:
        """The chat-completions request for one question (no key in it)."""
        data_url = "data:image/png;base64," + base64.b64encode(image).decode("ascii")
        return {
            "model": self.model, "temperature": 0, "max_tokens": 3,
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": [
                    {"type": "text", "text": f"{question}\nAnswer YES or NO."},
                    {"type": "image_url", "image_url": {"url": data_url}},
                ]},
            ],
        }

    async def ask(self, question: str, image: bytes) -> bool | None:
        """One request; YES/NO as True/False, any other reply None; failures raise VisionError."""
        import httpx

        if len(image) > MAX_IMAGE_BYTES:
            raise VisionError(f"screenshot too large for the vision provider ({len(image)} bytes)")
        headers = {"Authorization": f"Bearer {self._key}", "Content-Type": "application/json"}
        try:
            with anyio.fail_after(self.timeout):
                reply = await self._http().post(f"{self.base_url}/chat/completions",
                                                json=self.request_body(question, image), headers=headers)
        except TimeoutError:
            raise VisionError(f"the vision provider did not answer within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise VisionError(f"the vision provider could not be reached ({type(exc).__name__})") from None
        if reply.status_code != 200:
            raise VisionError(f"the vision provider answered HTTP {reply.status_code}")
        try:
            data = loads_bounded(reply.content, what="vision reply", max_bytes=MAX_REPLY_BYTES)
            content = data["choices"][0]["message"]["content"]
        except (JSONInputError, KeyError, IndexError, TypeError) as exc:
            raise VisionError(f"the vision provider's reply has no answer ({type(exc).__name__})") from None
        return parse_answer(content)

    async def aclose(self) -> None:
        if self._own_client and self._client is not None:
            await self._client.aclose()
            self._client = None


__all__ = ["OpenAIVision", "VisionError", "parse_answer"]
