"""When an LLM route retries a request, and how long it waits first. Pure.

A 429 or a 5xx is retried, at most `retries` times (2 by default), after the
wait the server asked for (``retry-after-ms``, which OpenAI sends, then
``Retry-After`` in seconds or as an HTTP date), else after an exponential
backoff (0.5 s, 1 s, 2 s, … at most 8 s). No retry is made when the wait would
end past the evaluation's deadline (`requestTimeoutMs`), nor when the server
asks for more than a minute: the error then says so at once. The System One
routes never retry (contract §5).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

DEFAULT_RETRIES = 2
MAX_RETRIES = 10
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
#: A server that asks for a longer wait is not waited for.
MAX_RETRY_AFTER_S = 60.0


def retryable(status: int) -> bool:
    return status == 429 or 500 <= status <= 599


def asked_wait(headers: Mapping[str, str], now: float) -> float | None:
    """The wait a response asks for, in seconds (`now`: the current Unix time, for an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value / 1000
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    if raw.isdigit():
        return float(raw)
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


def retry_delay(status: int, headers: Mapping[str, str], attempt: int, retries: int, remaining: float,
                now: float) -> float | None:
    """How long to wait before retry number `attempt + 1`, or None to give up now.

    `attempt` counts the retries made so far; `remaining` is the time left before the deadline.
    """
    if not retryable(status) or attempt >= retries:
        return None
    asked = asked_wait(headers, now)
    if asked is not None and asked > MAX_RETRY_AFTER_S:
        return None
    delay = asked if asked is not None else min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** attempt)
    if delay >= remaining:
        return None
    return delay


__all__ = ["DEFAULT_RETRIES", "MAX_RETRIES", "asked_wait", "retry_delay", "retryable"]
