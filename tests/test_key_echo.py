"""An upstream answer carrying the key it was sent with, in any reversible form, is refused."""

from __future__ import annotations

import base64
import codecs
import json
from typing import Any

import pytest

from fabric_jev.redaction.key_echo import carries_key

KEY = "sk-or-v1-" + "5f0c8e2a9b7d4163a0e8c1f2d3b4a5968778695a4b3c2d1e0f9e8d7c6b5a4938"
B64 = base64.b64encode(KEY.encode()).decode()

FORMS = {
    "as written": KEY, "inside text": f"jev-latest ({KEY})", "reversed": KEY[::-1], "upper": KEY.upper(),
    "spaced": " ".join(KEY), "dotted": ".".join(KEY.upper()[::-1]), "first half": KEY[:40],
    "second half": KEY[40:], "a middle piece": KEY[30:44], "base64": B64, "base64 in text": f"id:{B64}",
    "base64 reversed": B64[::-1], "base64url of reversed": base64.urlsafe_b64encode(KEY[::-1].encode()).decode(),
    "base64 shifted": base64.b64encode(b"xy" + KEY.encode()).decode(), "hex": KEY.encode().hex(),
    "hex upper, odd start": "f" + KEY.encode().hex().upper(), "percent": "".join(f"%{b:02x}" for b in KEY.encode()),
    "html entities": "".join(f"&#{ord(c)};" for c in KEY), "rot13": codecs.encode(KEY, "rot13"),
    "fullwidth": KEY.translate({c: c + 0xFEE0 for c in range(0x21, 0x7F)}), "zero-width": "\u200b".join(KEY),
    "soft hyphens": "\u00ad".join(KEY[20:40]), "hex of base64": B64.encode().hex(),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_reversible_form_of_the_key_is_found(form: str) -> None:
    assert carries_key({"model": FORMS[form]}, KEY)


@pytest.mark.parametrize("where", ["key", "nested", "split"])
def test_the_key_is_found_wherever_it_is(where: str) -> None:
    value: Any = {"answers": {KEY[::-1]: 1}} if where == "key" else \
        {"a": [{"b": ["x", FORMS["base64"]]}]} if where == "nested" else {"model": KEY[:9], "id": KEY[9:]}
    assert carries_key(value, KEY)


def test_an_ordinary_answer_is_not_refused() -> None:
    answer = {"answers": {"q": {"noul": 0.75}, "team": {"choice": "Billing", "probabilities": {"Billing": 1}}},
              "usage": {"input_tokens": 10, "output_tokens": 2}, "model": "jev-latest", "provider": "TypeSafe",
              "id": "gen-1712345678-abcdefghijklmnopqrstuvwx",
              "note": base64.b64encode(b"The sk-or-v1- prefix names OpenRouter keys.").decode()}
    assert not carries_key(answer, KEY)


@pytest.mark.parametrize("key", ["sk-cal", "sk-cli-7"])
def test_a_short_key_is_only_looked_for_as_written(key: str) -> None:
    # Its pieces would be ordinary words ("lacks" is "sk-cal" backwards).
    assert not carries_key({"answers": {"lacks": "SK-CAL", "ok": " ".join(key)}}, key)
    assert carries_key({"model": f"x{key}y"}, key)


def test_a_large_answer_full_of_encodable_runs_is_read_whole() -> None:
    # Many short base64 runs, a long hex run, fullwidth letters: every run is decoded (at
    # each alignment, together), and a key hidden at the very end is still found.
    answer: dict[str, Any] = {"s": ["abcdefghijklmnopqrstu"] * 20_000, "h": "ab12" * 50_000,
                              "u": "\uff41" * 100_000}
    assert len(json.dumps(answer)) > 1_000_000 and not carries_key(answer, KEY)
    answer["s"].append("x" + base64.b64encode(KEY[::-1].encode()).decode())
    assert carries_key(answer, KEY)
