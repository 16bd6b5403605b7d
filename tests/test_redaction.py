from __future__ import annotations

import pytest

from fabric_jev.contract.redaction import is_secret_key, redact, redact_text


@pytest.mark.parametrize(("text", "kind", "secret"), [
    ("Authorization: Bearer abcdefghijklmnop", "authorization header", "abcdefghijklmnop"),
    ("curl -H 'X: y' --header \"Bearer qwertyuiopasdfgh\"", "bearer token", "qwertyuiopasdfgh"),
    ("auth Basic dXNlcjpwYXNzd29yZA==", "basic credentials", "dXNlcjpwYXNzd29yZA=="),
    ("key sk-abcdefghijklmnopqrstuv", "api key", "sk-abcdefghijklmnopqrstuv"),
    ("pk_live_abcdefghijklmnopqrst", "api key", "pk_live_abcdefghijklmnopqrst"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123", "github token", "ghp_abcdefghij"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github token", "github_pat_11ABC"),
    ("xoxb-1234567890-abcdef", "slack token", "xoxb-1234567890"),
    ("Cookie: session=abc123; other=1", "cookie header", "session=abc123"),
    ("Set-Cookie: id=zz99; Path=/", "cookie header", "id=zz99"),
    ("postgres://admin:hunter2@db.example.com/app", "url credentials", "admin:hunter2"),
    ("password=hunter2", "secret assignment", "hunter2"),
    ('{"client_secret": "s3cr3t-value"}', "secret assignment", "s3cr3t-value"),
])
def test_text_patterns(text: str, kind: str, secret: str) -> None:
    out, kinds = redact_text(text)
    assert secret not in out and kind in kinds and f"[redacted: {kind}]" in out


def test_long_base64_is_omitted() -> None:
    out, kinds = redact_text("image: " + "QUJD" * 60 + " end")
    assert out == "image: [omitted base64] end" and kinds == ["base64 data"]


@pytest.mark.parametrize("text", [
    "The token budget ran out after 40 evaluations.",
    "Check the password field is masked; basic tests pass.",
    "Use a Bearer token header (see docs).",
    "sk- prefixes identify keys; ghp_ prefixes too.",
    "https://example.com/path?q=1 and mailto:someone@example.com",
    "a sha256 like 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 stays",
])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == (text, [])


@pytest.mark.parametrize(("key", "secret"), [
    ("password", True), ("secret", True), ("token", True), ("apikey", True), ("api_key", True),
    ("privateKey", True), ("clientsecret", True), ("Set-Cookie", True), ("db_password", True), ("X-Api-Key", True), ("clientSecret", True),
    ("accessToken", True), ("Authorization", True), ("cookie", True), ("private_key", True),
    ("tokens_used", False), ("passwordPolicy", False), ("author", False), ("name", False),
])
def test_secret_keys(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_structured_values() -> None:
    value, kinds = redact({"user": "bob", "db_password": "x", "nested": [{"apiKey": "k"}],
                           "note": "Bearer abcdefghijklmnop"})
    assert value == {"user": "bob", "db_password": "[redacted: db_password value]",
                     "nested": [{"apiKey": "[redacted: apiKey value]"}],
                     "note": "Bearer [redacted: bearer token]"}
    assert len(kinds) == 3


@pytest.mark.timeout(20)
@pytest.mark.parametrize("filler", ["c", "a.b-", "a:b@", "x://", '"password": ', "Bearer ", "QUJD"])
def test_adversarial_input_stays_linear(filler: str) -> None:
    # A quadratic pattern takes minutes on 200k characters; linear ones take well under a second.
    redact_text(filler * (200_000 // len(filler)))
