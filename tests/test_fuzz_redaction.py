"""Fuzzing redaction: a secret planted anywhere in a random JSON value never comes out.

The secret is one of the credential shapes the rules know, with a random body,
planted as a whole string, inside text between separators, as an object key,
under a secret-named key, split across list items, or respelled (fullwidth,
percent-, hex- or base64-encoded). Whatever the rest of the value holds,
`redact` returns a value without the secret's body, or refuses the value with
its documented ValueError (cyclic, nested deeper than 64 levels).
"""

from __future__ import annotations

import base64
import json
import string
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from fabric_jev.contract.redaction import MAX_DEPTH, redact, redact_text
from tests.fuzz_support import NASTY_TEXT, fuzz_timeout, json_values

pytestmark = fuzz_timeout

_ALNUM = string.ascii_letters + string.digits


def _body(size: int, alphabet: str = _ALNUM) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=size, max_size=size)


@st.composite
def _secrets(draw: st.DrawFn) -> tuple[str, str]:
    """(the secret as written, the part of it that must never come out)."""
    kind = draw(st.sampled_from(["github", "aws", "openai", "bearer", "password", "url", "pem", "jwt",
                                 "slack", "docker", "assignment"]))
    if kind == "github":
        body = draw(_body(36))
        return "ghp_" + body, body
    if kind == "aws":
        body = draw(_body(16, string.ascii_uppercase + string.digits))
        return "AKIA" + body, body
    if kind == "openai":
        body = draw(_body(32))
        return "sk-proj-" + body, body
    if kind == "bearer":
        body = draw(_body(24))
        return "Authorization: Bearer " + body, body
    if kind == "password":
        body = draw(_body(12))
        return f"password={body}", body
    if kind == "url":
        body = draw(_body(10))
        return f"postgres://admin:{body}@db.example.com/app", body
    if kind == "pem":
        body = draw(_body(48))
        return f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----", body
    if kind == "jwt":
        body = draw(_body(30, _ALNUM + "_-"))
        return f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.{body}", body
    if kind == "slack":
        body = draw(_body(20))
        return "xoxb-1234567890-" + body, body
    if kind == "docker":
        body = draw(_body(14))
        return f"echo {body} | docker login -u me --password-stdin", body
    name = draw(st.sampled_from(["api_key", "client_secret", "DB_PASS", "secret_hex", "private_key_id"]))
    body = draw(_body(16, "0123456789abcdef"))
    return f'"{name}": "{body}"', body


_SEPARATORS = st.sampled_from([" ", "\n", "\t", ", ", "; ", " (", ") ", ": ", " | ", "\r\n"])
_FILLER = st.text(alphabet=string.ascii_letters + " .,:;-_/()[]{}'\"=\n", max_size=20) | st.sampled_from(
    [t for t in NASTY_TEXT if len(t) < 50])


def _respelled(draw: st.DrawFn, secret: str) -> str:
    how = draw(st.sampled_from(["plain", "plain", "plain", "fullwidth", "percent", "hex", "base64"]))
    if how == "fullwidth":
        return secret.translate({c: c + 0xFEE0 for c in range(0x21, 0x7F)})
    if how == "percent":
        return "".join(f"%{b:02X}" if chr(b) in "=:@/" else chr(b) for b in secret.encode())
    if how == "hex":
        return secret.encode().hex()
    if how == "base64":
        return base64.b64encode(secret.encode()).decode()
    return secret


@st.composite
def _planted(draw: st.DrawFn) -> tuple[Any, str]:
    """A random JSON value with a secret planted somewhere in it; and the secret's body."""
    secret, body = draw(_secrets())
    written = _respelled(draw, secret)
    where = draw(st.sampled_from(["whole", "text", "key", "named", "split"]))
    leaf: Any
    if where == "whole":
        leaf = written
    elif where == "text":
        leaf = draw(_FILLER) + draw(_SEPARATORS) + written + draw(_SEPARATORS) + draw(_FILLER)
    elif where == "key":
        leaf = {written: draw(json_values(3))}
    elif where == "named":
        leaf = {draw(st.sampled_from(["password", "apiKey", "X-Auth-Token", "client_secret", "ｐａｓｓｗｏｒｄ",
                                      "pass\u00adword", "db_pass", "ssn"])): written}
    else:
        cut = sorted(draw(st.lists(st.integers(1, len(secret) - 1), min_size=1, max_size=2, unique=True)))
        leaf = [secret[i:j] for i, j in zip([0, *cut], [*cut, len(secret)], strict=True)]
        body_parts = [p for p in leaf if len(p) >= 12 and p in body]
        body = max(body_parts, key=len) if body_parts else body
    value = draw(json_values(12))
    return _plant(draw, value, leaf), body


def _plant(draw: st.DrawFn, value: Any, leaf: Any) -> Any:
    """Put `leaf` somewhere in `value`: under a new key, into a list, or in place of a scalar."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        value[key] = _plant(draw, value[key], leaf)
        return value
    if isinstance(value, list) and value and draw(st.booleans()):
        i = draw(st.integers(0, len(value) - 1))
        value[i] = _plant(draw, value[i], leaf)
        return value
    if isinstance(value, dict):
        value[draw(st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=6))] = leaf
        return value
    if isinstance(value, list):
        value.insert(draw(st.integers(0, len(value))), leaf)
        return value
    return [value, leaf] if draw(st.booleans()) else leaf


@given(_planted())
@example(({"lines": ["sk-proj-", "abcdefghijklmnopqrstuvwx", "yz"]}, "abcdefghijklmnopqrstuvwx"))
@example(({"\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44": "hunter2hunter2"}, "hunter2hunter2"))
@example(({"ghp_abcdefghijklmnopqrstuvwxyz0123456789": 1}, "abcdefghijklmnopqrstuvwxyz0123456789"))
def test_a_planted_secret_never_comes_out(planted: tuple[Any, str]) -> None:
    value, body = planted
    try:
        out, kinds = redact(value)
    except ValueError as exc:
        assert "cyclic" in str(exc) or f"deeper than {MAX_DEPTH}" in str(exc)
        return
    text = json.dumps(out, ensure_ascii=False)
    assert body not in text, (body, text)
    assert kinds


@given(json_values(30))
@example({"\ud800": ["\udc00", "Bearer abcdefgh\ud800ijkl"]})
def test_redaction_takes_any_json_value(value: Any) -> None:
    try:
        out, _ = redact(value)
    except ValueError as exc:
        assert "cyclic" in str(exc) or "deeper" in str(exc)
        return
    json.dumps(out, ensure_ascii=False)  # still a JSON value


@given(st.text(max_size=200) | st.sampled_from(NASTY_TEXT))
@example("\ud800")  # RE2 reads UTF-8: a lone surrogate raised UnicodeEncodeError
@example("password=\udfffhunter2 and a\ud800b")
def test_text_without_a_secret_shape_is_returned_as_it_came_or_redacted_never_broken(text: str) -> None:
    out, kinds = redact_text(text)
    printable = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    assert isinstance(out, str) and (out == printable or kinds)
    out.encode("utf-8")
    assert redact_text(out)[0] == out  # markers are never redacted again: a second pass changes nothing
