"""The routes to a language model you already run: `openai:MODEL`, `ollama:MODEL`, `anthropic:MODEL`.

A spec is split at its first colon: the route, then the model name, which may
itself hold colons and slashes (``ollama:qwen3:8b``,
``openai:meta-llama/Llama-3.1-8B-Instruct``). The model name only ever goes
into a request body and into the answer's provenance, never into a URL or a
file name; its rule is `LLM_MODEL_RULE`.

Base URLs mean what the official SDKs' ``base_url`` means: the OpenAI wire
appends ``/chat/completions`` (``http://127.0.0.1:11434/v1`` for Ollama), the
Anthropic wire ``/v1/messages``. They come from the config's
``evaluator.baseUrls.<route>``, then ``FABRIC_JEV_<ROUTE>_BASE_URL``, then the
route's default; `routes.check_base_url` holds them to https anywhere and
plain http only to loopback.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from ..errors import ConfigError
from .routes import _is_loopback, check_base_url

Wire = Literal["chat", "messages"]

LLM_MODEL_MAX_CHARS = 128
_LLM_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}")
LLM_MODEL_RULE = ("1-128 characters: a letter or digit, then letters, digits and . _ - : / @ + "
                  "(no spaces, no '..')")


@dataclass(frozen=True, slots=True)
class LlmRoute:
    """One way to reach a language model: its wire, default base URL and key sources."""

    name: str
    wire: Wire
    default_base: str
    #: The auth store entry (`fabric-jev login NAME`) and the variables a key may come from, in order.
    store_key: str
    env_keys: tuple[str, ...]
    #: False: never sends a key (Ollama's own server has none).
    takes_key: bool = True
    #: What the model-name example in messages shows.
    example: str = ""

    @property
    def base_url_env(self) -> str:
        return f"FABRIC_JEV_{self.name.upper()}_BASE_URL"

    @property
    def path(self) -> str:
        return "/chat/completions" if self.wire == "chat" else "/v1/messages"


OPENAI = LlmRoute("openai", "chat", "https://api.openai.com/v1", "openai", ("OPENAI_API_KEY",),
                  example="gpt-4.1-mini")
OLLAMA = LlmRoute("ollama", "chat", "http://127.0.0.1:11434/v1", "ollama", (), takes_key=False,
                  example="qwen3:8b")
ANTHROPIC = LlmRoute("anthropic", "messages", "https://api.anthropic.com", "anthropic", ("ANTHROPIC_API_KEY",),
                     example="claude-haiku-4-5")
LLM_ROUTES: dict[str, LlmRoute] = {r.name: r for r in (OPENAI, OLLAMA, ANTHROPIC)}


def is_llm_model(name: object) -> bool:
    return (isinstance(name, str) and len(name) <= LLM_MODEL_MAX_CHARS and _LLM_MODEL.fullmatch(name) is not None
            and ".." not in name)


def parse_llm_spec(spec: str) -> tuple[LlmRoute, str]:
    """``ROUTE:MODEL`` → the route and the model name (split at the first colon), or a ConfigError."""
    kind, _, model = spec.partition(":")
    route = LLM_ROUTES.get(kind)
    if route is None:
        raise ConfigError(f"unknown model route {kind!r}; expected openai, ollama or anthropic")
    if not model:
        raise ConfigError(f"the {route.name} route needs a model: {route.name}:MODEL "
                          f"(for example {route.name}:{route.example})")
    if not is_llm_model(model):
        raise ConfigError(f"model name {model[:140]!r} for the {route.name} route must be {LLM_MODEL_RULE}")
    return route, model


def base_url(route: LlmRoute, overrides: Mapping[str, object] | None = None,
             environ: Mapping[str, str] | None = None) -> str:
    """The base URL in force: the config's, the environment's, else the route's default (checked)."""
    environ = os.environ if environ is None else environ
    configured = (overrides or {}).get(route.name)
    if configured is not None and not isinstance(configured, str):
        raise ConfigError(f"evaluator.baseUrls.{route.name} must be a URL string")
    base = configured or environ.get(route.base_url_env, "").strip() or route.default_base
    return check_base_url(base)


def endpoint(route: LlmRoute, base: str) -> str:
    return base + route.path


def is_loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname
    return host is not None and _is_loopback(host)


def key_needed(route: LlmRoute, base: str) -> bool:
    """Whether a request can only be made with a key: a remote server of a route that takes one.
    A loopback server gets the key when there is one, and is asked without it otherwise."""
    return route.takes_key and not is_loopback_url(base)


__all__ = ["ANTHROPIC", "LLM_MODEL_RULE", "LLM_ROUTES", "OLLAMA", "OPENAI", "LlmRoute", "base_url", "endpoint",
           "is_llm_model", "is_loopback_url", "key_needed", "parse_llm_spec"]
