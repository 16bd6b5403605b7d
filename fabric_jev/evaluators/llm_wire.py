"""Request bodies and response readers of the two wires: OpenAI Chat Completions and Anthropic Messages. Pure.

Only the fields a judgment needs are sent or read. A response is read
defensively: any field of the wrong type is one `AnswerInvalid` that names
it (never the body), and nothing but the model's id, the token counts and the
labels' numbers leaves it.

Chat Completions (`openai`, `ollama`): a logprobs request asks for one token
with ``logprobs`` and ``top_logprobs``; a sample asks for a JSON object
``{"label": …}`` whose label the ``response_format`` JSON schema limits to
the question's labels (llama.cpp, vLLM, Ollama and OpenAI all enforce it).
Messages (`anthropic`): a sample is a forced call of one tool, ``answer``,
whose ``label`` is an enum of every label the request uses; the state block
carries ``cache_control`` so that the questions after the first read it
from Anthropic's prompt cache.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..contract.values import is_finite_number
from ..errors import AnswerInvalid
from .bounded_body import ACCEPT_ENCODING
from .readout import TOP_LOGPROBS

#: Output tokens a sample may use: a JSON object or a tool call naming one label.
SAMPLE_MAX_TOKENS = 32
ANTHROPIC_VERSION = "2023-06-01"
#: Fields of a request body the route sets itself; `evaluator.extraBody` may not touch them.
OWN_FIELDS = frozenset({"model", "messages", "system", "max_tokens", "max_completion_tokens", "logprobs",
                        "top_logprobs", "n", "stream", "response_format", "tools", "tool_choice",
                        "temperature"})
_TOOL_NAME = "answer"


@dataclass(frozen=True, slots=True)
class Completion:
    """What one completion (a response of either wire) says: the model's id as the server named it,
    tokens, and the first token's candidates (a logprobs request) or the label a sample named."""

    model: str
    input_tokens: int
    output_tokens: int
    #: (token text, log-probability) of the first output token's top candidates; None: the server gave none.
    candidates: tuple[tuple[str, float], ...] | None = None
    #: The label a sample named (None when it named nothing readable).
    pick: str | None = None


# ------------------------------------------------------------------ Chat Completions

def chat_logprobs_body(model: str, system: str, user: str, extra: Mapping[str, object]) -> dict[str, object]:
    return {**extra, "model": model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": 1, "logprobs": True, "top_logprobs": TOP_LOGPROBS, "n": 1, "stream": False}


def chat_sample_body(model: str, system: str, user: str, labels: Sequence[str],
                     extra: Mapping[str, object]) -> dict[str, object]:
    schema = {"type": "object", "properties": {"label": {"type": "string", "enum": list(labels)}},
              "required": ["label"], "additionalProperties": False}
    return {**extra, "model": model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": SAMPLE_MAX_TOKENS, "temperature": 1.0, "n": 1, "stream": False,
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": _TOOL_NAME, "strict": True, "schema": schema}}}


def _number(value: object) -> float | None:
    """A JSON number as a float, NaN and infinities kept for the readout to refuse (an int past the
    float range reads as an infinity, as JavaScript reads it); None for anything else, a bool too."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if is_finite_number(value) or isinstance(value, float):
        return float(value)
    return math.inf if value > 0 else -math.inf  # an int: copysign would overflow converting it


def _get(value: Any, key: str, where: str) -> Any:
    if not isinstance(value, dict):
        raise AnswerInvalid(f"{where} is not an object")
    return value.get(key)


def _tokens(usage: Any, *names: str) -> int:
    if not isinstance(usage, dict):
        return 0
    total = 0
    for name in names:
        count = usage.get(name)
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            total += count
    return total


def _model(body: dict[str, Any], requested: str) -> str:
    model = body.get("model")
    if model is None or model == "":
        return requested  # some servers leave it out
    if not isinstance(model, str) or len(model) > 128 or not model.isprintable():
        raise AnswerInvalid("the server's model id is not a printable string of at most 128 characters")
    return model


def read_chat(body: object, requested: str, *, logprobs: bool) -> Completion:
    """A Chat Completions response: the first choice's first token's candidates, or its JSON label."""
    if not isinstance(body, dict):
        raise AnswerInvalid("the server's response is not a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise AnswerInvalid("the server's response has no choices")
    choice = choices[0]
    usage = body.get("usage")
    model = _model(body, requested)
    tokens_in, tokens_out = _tokens(usage, "prompt_tokens"), _tokens(usage, "completion_tokens")
    if logprobs:
        return Completion(model, tokens_in, tokens_out, candidates=_candidates(_get(choice, "logprobs", "choices[0]")))
    message = _get(choice, "message", "choices[0]")
    content = _get(message, "content", "choices[0].message") if message is not None else None
    return Completion(model, tokens_in, tokens_out, pick=_label_of(content))


def _candidates(logprobs: Any) -> tuple[tuple[str, float], ...] | None:
    """The first token's top candidates (with the token itself), or None when there are none."""
    if logprobs is None:
        return None
    content = _get(logprobs, "content", "choices[0].logprobs")
    if content is None or (isinstance(content, list) and not content):
        return None
    if not isinstance(content, list):
        raise AnswerInvalid("choices[0].logprobs.content is not a list")
    first = content[0]
    top = _get(first, "top_logprobs", "choices[0].logprobs.content[0]")
    if top is not None and not isinstance(top, list):
        raise AnswerInvalid("choices[0].logprobs.content[0].top_logprobs is not a list")
    if not top:
        return None  # only the chosen token: no distribution to read
    out: list[tuple[str, float]] = []
    for i, entry in enumerate([*top, first]):
        token, logprob = _get(entry, "token", "a logprobs entry"), _number(_get(entry, "logprob", "a logprobs entry"))
        if not isinstance(token, str) or logprob is None:
            raise AnswerInvalid(f"logprobs entry {i} is not a token with a numeric log-probability")
        out.append((token, logprob))
    # Whether the numbers are a distribution (finite, ≤ 0, a mass of at most 1) is the readout's to
    # judge: what it refuses is read from samples instead (readout auto). The chosen token is last:
    # counted only when the top list left its text out, however the server rounded its number. Two
    # tokens of the top list that read the same (a byte-level spelling of "A", say) are both kept,
    # and merge by log-sum-exp.
    if out[-1][0] in {token for token, _ in out[:-1]}:
        out.pop()
    return tuple(out)


def _label_of(content: Any) -> str | None:
    """The label a sample's text names: {"label": X} as JSON, or a bare label."""
    if not isinstance(content, str):
        return None
    text = content.strip()
    if text.startswith("```"):  # a model that fences its JSON
        text = text.strip("`").removeprefix("json").strip()
    try:
        parsed = json.loads(text) if len(text) <= 1024 else None
    except ValueError:
        parsed = text if 0 < len(text) <= 16 else None
    if isinstance(parsed, dict):
        parsed = parsed.get("label")
    return parsed if isinstance(parsed, str) else None


# ------------------------------------------------------------------ Messages (Anthropic)

def messages_body(model: str, system: str, state: str, question: str, labels: Sequence[str],
                  extra: Mapping[str, object]) -> dict[str, object]:
    tool = {"name": _TOOL_NAME, "description": "Give your answer: exactly one of the labels the question lists.",
            "input_schema": {"type": "object", "properties": {"label": {"type": "string", "enum": list(labels)}},
                             "required": ["label"]}}
    # No temperature: the Messages API samples at its default, and newer models take no other.
    return {**extra, "model": model, "max_tokens": SAMPLE_MAX_TOKENS * 2,
            "system": [{"type": "text", "text": system}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": state, "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": question}]}],
            "tools": [tool], "tool_choice": {"type": "tool", "name": _TOOL_NAME}}


def read_messages(body: object, requested: str) -> Completion:
    """A Messages response: the label its `answer` tool call names."""
    if not isinstance(body, dict):
        raise AnswerInvalid("the server's response is not a JSON object")
    content = body.get("content")
    if not isinstance(content, list):
        raise AnswerInvalid("the server's response has no content list")
    usage = body.get("usage")
    pick = None
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") == _TOOL_NAME:
            label = _get(block.get("input"), "label", "the answer tool's input") \
                if isinstance(block.get("input"), dict) else None
            pick = label if isinstance(label, str) else None
            break
    # Input tokens: the uncached ones, and those written to or read from the prompt cache.
    tokens_in = _tokens(usage, "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return Completion(_model(body, requested), tokens_in, _tokens(usage, "output_tokens"), pick=pick)


def anthropic_headers(key: str | None) -> dict[str, str]:
    headers = {"anthropic-version": ANTHROPIC_VERSION, "content-type": "application/json",
               "accept": "application/json", "accept-encoding": ACCEPT_ENCODING}
    if key:
        headers["x-api-key"] = key
    return headers


def chat_headers(key: str | None) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": "application/json", "accept-encoding": ACCEPT_ENCODING}
    if key:
        headers["authorization"] = f"Bearer {key}"
    return headers


__all__ = ["OWN_FIELDS", "Completion", "anthropic_headers", "chat_headers", "chat_logprobs_body", "chat_sample_body",
           "messages_body", "read_chat", "read_messages"]
