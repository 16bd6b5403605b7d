"""Fuzzing redaction: a secret planted anywhere in a random JSON value never comes out.

The secret is one of the credential shapes the rules know (tokens, command-line
passwords, vendor keys from the kept rule set, name/value pairs), with a random
body, planted as a whole string, inside text between separators, as an object
key, under a secret-named key, as the value of a name/value pair whose name says
secret, split across list items, or respelled (fullwidth, percent-, hex-,
base64- or base32-encoded, HTML character references). Whatever the rest of the value holds,
`redact` returns a value without the secret's body, or refuses the value with
its documented ValueError (cyclic, nested deeper than 64 levels).
"""

from __future__ import annotations

import base64
import json
import string
from typing import Any

from hypothesis import assume, example, given
from hypothesis import strategies as st

from fabric_jev.redaction.redactor import MAX_DEPTH, redact, redact_text
from tests.fuzz_support import NASTY_TEXT, fuzz_timeout, json_values

pytestmark = fuzz_timeout

_ALNUM = string.ascii_letters + string.digits


def _body(size: int, alphabet: str = _ALNUM) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=size, max_size=size)


@st.composite
def _secrets(draw: st.DrawFn) -> tuple[str, str]:
    """(the secret as written, the part of it that must never come out)."""
    kind = draw(st.sampled_from(["github", "aws", "openai", "bearer", "password", "url", "pem", "jwt",
                                 "slack", "docker", "assignment", "command", "vendor", "pair", "userinfo"]))
    if kind == "command":
        body = draw(_body(12))
        shape = draw(st.sampled_from(["mongo -u admin -p {}", "sqlcmd -S db -U sa -P {}", "ldapsearch -x -w {} -b dc=x",
                                      "7z a -p{} out.7z", "unzip -P {} a.zip", "smbclient //fs/s -U bob%{}",
                                      "htpasswd -nb admin {}", "ssh-keygen -N {} -f k", "echo {} | sudo -S true",
                                      "openssl enc -passin pass:{}", "machine h login u password {}",
                                      "CREATE USER x IDENTIFIED BY '{}';", "<password>{}</password>"]))
        return shape.format(body), body
    if kind == "vendor":
        prefix, alphabet, size = draw(st.sampled_from([("dop_v1_", "0123456789abcdef", 64), ("shpat_", "0123456789abcdef", 32),
                                                       ("hf_", string.ascii_letters, 34), ("dapi", "0123456789abcdef", 32),
                                                       ("AGE-SECRET-KEY-1", "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)]))
        body = draw(_body(size, alphabet))
        return prefix + body, body
    if kind == "pair":
        body = draw(_body(14))
        name = draw(st.sampled_from(["DB_PASSWORD", "API_TOKEN", "/prod/db/password", "Authorization", "client_secret"]))
        shape = draw(st.sampled_from(['{{"name": "{}", "value": "{}"}}', '["{}", "{}"]', "- name: {}\n  value: {}",
                                      '<add key="{}" value="{}"/>']))
        return shape.format(name, body), body
    if kind == "userinfo":
        body = draw(_body(10)) + "/" + draw(_body(6))
        return f"s3://key:{body}@bucket/path", body
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
    how = draw(st.sampled_from(["plain", "plain", "plain", "fullwidth", "percent", "hex", "base64", "html", "base32"]))
    if how == "html":
        return "".join(f"&#{ord(c)};" if c in "=:@/<>\"'" else c for c in secret)
    if how == "base32":
        return base64.b32encode(secret.encode()).decode()
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
    where = draw(st.sampled_from(["whole", "text", "key", "named", "split", "named pair"]))
    leaf: Any
    if where == "whole":
        leaf = written
    elif where == "text":
        before, after = draw(_FILLER) + draw(_SEPARATORS), draw(_SEPARATORS) + draw(_FILLER)
        assume(body not in before and body not in after)
        leaf = before + written + after
    elif where == "key":
        inner = draw(json_values(3))
        assume(body not in json.dumps(inner, ensure_ascii=False))
        leaf = {written: inner}
    elif where == "named pair":
        name = draw(st.sampled_from(["DB_PASSWORD", "X-Auth-Token", "/prod/api/secret", "MYSQL_PWD", "ssn"]))
        leaf = draw(st.sampled_from([{"name": name, "value": written}, {"Name": name, "Value": written},
                                     {"key": name, "value": written}, [name, written]]))
    elif where == "named":
        leaf = {draw(st.sampled_from(["password", "apiKey", "X-Auth-Token", "client_secret", "ｐａｓｓｗｏｒｄ",
                                      "pass\u00adword", "db_pass", "ssn"])): written}
    else:
        cut = sorted(draw(st.lists(st.integers(1, len(secret) - 1), min_size=1, max_size=2, unique=True)))
        leaf = [secret[i:j] for i, j in zip([0, *cut], [*cut, len(secret)], strict=True)]
        body_parts = [p for p in leaf if len(p) >= 12 and p in body]
        body = max(body_parts, key=len) if body_parts else body
    value = draw(json_values(12))
    assume(body not in json.dumps(value, ensure_ascii=False))  # the rest of the value holds no copy of it
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
# hex of `smbclient //fs/s -U bob%000000000000`: folded before it was scanned, `%00` became a NUL
@example((b"smbclient //fs/s -U bob%000000000000".hex(), "000000000000"))
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
