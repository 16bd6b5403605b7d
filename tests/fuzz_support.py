"""Hypothesis strategies shared by the fuzz tests: JSON values, hostile text, mutations.

The profiles (a bounded, derandomized `suite` one and a `long` one) are registered in
conftest.py.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st

#: The fuzz modules' per-test timeout: the suite's 60 s, none for the long profile
#: (FABRIC_JEV_FUZZ=long), whose thousands of examples a test takes minutes to run.
fuzz_timeout = pytest.mark.timeout(0 if settings().max_examples > 1_000 else 60)

#: Text that has broken parsers before: lone surrogates, escapes, look-alikes, invisible
#: characters, numbers past float and int conversion limits, JSON's non-finite words.
NASTY_TEXT = [
    "\ud800", "a\udfffb", "\\ud800", "\\", '"', "\x00", "\u00ad", "\u200b", "\ufeff", "\uff50", "\u0440",
    "%3D", "%", "%%", "1e400", "-1e400", "NaN", "Infinity", "1" * 5000, "[" * 100, "{" * 100,
    "\r\n", "\u2028", "\U0001F600", "null", "true", "__proto__", "constructor", "$ref",
]

_scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-(10**30), max_value=10**30)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
            | st.sampled_from(NASTY_TEXT))
_keys = st.text(max_size=10) | st.sampled_from(NASTY_TEXT[:16])


def json_values(max_leaves: int = 20) -> st.SearchStrategy[Any]:
    """Finite JSON-shaped Python values (some strings hold lone surrogates)."""
    return st.recursive(_scalars, lambda inner: st.lists(inner, max_size=5)
                        | st.dictionaries(_keys, inner, max_size=5), max_leaves=max_leaves)


def json_texts() -> st.SearchStrategy[str]:
    """Text near JSON: dumped values, cut and spliced, with hostile pieces inserted."""
    dumped = json_values().map(lambda v: json.dumps(v, ensure_ascii=False))

    @st.composite
    def spliced(draw: st.DrawFn) -> str:
        text = draw(dumped)
        for _ in range(draw(st.integers(0, 3))):
            at = draw(st.integers(0, len(text)))
            cut = draw(st.integers(0, 3))
            piece = draw(st.sampled_from(NASTY_TEXT) | st.text(max_size=4))
            text = text[:at] + piece + text[at + cut:]
        return text

    return dumped | spliced() | st.text() | st.sampled_from(NASTY_TEXT)


def mutated(base: Any, *, times: int = 3) -> st.SearchStrategy[Any]:
    """A copy of `base` with 1..times changes: a node replaced, a key removed or added, an item dropped."""

    @st.composite
    def strategy(draw: st.DrawFn) -> Any:
        value = copy.deepcopy(base)
        for _ in range(draw(st.integers(1, times))):
            value = _mutate(draw, value)
        return value

    return strategy()


def _mutate(draw: st.DrawFn, node: Any) -> Any:
    children = list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []
    if children and draw(st.integers(0, 3)):  # mostly go deeper: the interesting rules are inside
        at = draw(st.sampled_from(children))
        node[at] = _mutate(draw, node[at])
        return node
    action = draw(st.sampled_from(["replace", "remove", "add"] if children else ["replace"]))
    if action == "replace":
        return draw(json_values(8))
    if action == "remove":
        del node[draw(st.sampled_from(children))]
        return node
    if isinstance(node, dict):
        node[draw(_keys)] = draw(json_values(4))
    else:
        node.insert(draw(st.integers(0, len(node))), draw(json_values(4)))
    return node


#: A valid jev.evaluate request with one question of each type, which the fuzzers mutate.
REQUEST = {
    "state": {"text": "Please refund the duplicate charge", "items": [1, 2.5, None]},
    "questions": {
        "refund": {"type": "noul", "instructions": "Money back?", "criteria": {"true": "yes", "false": None}},
        "team": {"type": "choice", "instructions": ["Which team?"],
                 "criteria": {"Billing": "Invoices", "Technical": None}},
        "anger": {"type": "score", "instructions": {"ask": "How angry?"}, "criteria": ["Calm", "Cross", "Furious"]},
    },
    "model": "jev-latest",
}
