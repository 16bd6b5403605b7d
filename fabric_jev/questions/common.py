"""The pure pieces the kinds share: a JSON value as text, the labels a route offers, softmax and
the two confidences. The local evaluator, the readout and the prompt re-export them by their old
names."""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Sequence

LETTERS = tuple(string.ascii_uppercase)
NOUL_LABELS = ("Yes", "No")
_AUX = re.compile(r"^(does|do|did|is|are|was|were|has|have|had|can|could|will|would|should|"
                  r"may|might|must)\s+", re.IGNORECASE)


def render(value: object) -> str:
    """Text for a state, an instruction or a description (strings stay as they are)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(render(v) for v in value)
    if isinstance(value, dict):
        return "\n".join(f"{k}: {render(v)}" for k, v in value.items())
    return json.dumps(value)


def declarative(question: str) -> str:
    """'Does the text ask for a refund?' → 'the text ask for a refund'."""
    text = question.strip().rstrip("?").strip()
    return _AUX.sub("", text, count=1) or text


def described(name: str, description: object) -> str:
    """An option as a prompt lists it: its key, and its description after a colon."""
    text = render(description).strip()
    return f"{name}: {text}" if text else name


def listing(labels: Sequence[str]) -> str:
    """'A, B or C'."""
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " or " + labels[-1]


def score_labels(levels: int) -> tuple[str, ...]:
    return tuple(str(i) for i in range(levels))


def softmax(xs: list[float], temperature: float) -> list[float]:
    m = max(xs)
    es = [math.exp((x - m) / temperature) for x in xs]
    total = sum(es)
    return [e / total for e in es]


def choice_confidence(probs: list[float]) -> float:
    n = len(probs)
    return 1.0 if n <= 1 else max(0.0, (max(probs) - 1 / n) / (1 - 1 / n))


def score_confidence(probs: list[float]) -> float:
    """1 − (spread around the mode ÷ the spread of a uniform distribution)."""
    n = len(probs)
    if n <= 1:
        return 1.0
    mode = max(range(n), key=lambda i: probs[i])
    spread = sum(p * abs(i - mode) for i, p in enumerate(probs))
    uniform = sum(abs(i - (n - 1) / 2) for i in range(n)) / n
    return max(0.0, min(1.0, 1 - spread / uniform))
