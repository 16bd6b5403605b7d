from __future__ import annotations

import json
from typing import Any

import pytest

from fabric_jev.approval import ApprovalRequest, ProposedAction, build_evidence
from fabric_jev.assertions.snapshot import Element, Snapshot
from fabric_jev.contract.observe import ObserveOptions, SessionEvent, project
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


# ---------------------------------------------------------------- the secret-scanner checklist
# Each family of detect-secrets' plugins, in the spellings an agent session
# actually shows: (text, a part of the secret that must not survive).
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq9x2Lr4Tz\nQm9vZ1VzZXIxMjM0NTY3ODkw\n-----END RSA PRIVATE KEY-----"
SPELLINGS = [
 (PEM, "MIIEpAIBAAKCAQEA7bq9x2Lr4Tz"),
 ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAA"),
 ("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk", "MHcCAQEEIBkg4LVWM9nuwNSk"),
 ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
 ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
 ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "dozjgNryP4J3"),
 ("mysql -u root -phunter2 shop", "hunter2"),
 ("export DB_PASS=Tr0ub4dor", "Tr0ub4dor"),
 ("sshpass -p 's3cret!' ssh host", "s3cret!"),
 ("curl -u admin:letmein123 https://x", "letmein123"),
 ("redis-cli -h h -a rediSpass9 ping", "rediSpass9"),
 ("git clone https://bob:pa55w0rd@github.com/x/y", "pa55w0rd"),
 ("DATABASE_URL=postgres://u:Zx9kq@db:5432/app", "Zx9kq"),
 ("xoxb-123456789012-abcdefABCDEF", "abcdefABCDEF"),
 ("https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX", "XXXXXXXXXXXXXXXX"),
 ("AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI", "AIzaSyDdI0hCZtE6vySjMm"),
 ("glpat-xxxxXXXXyyyyYYYY1234", "glpat-xxxxXXXX"),
 ("npm_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ", "npm_abcdefghij"),
 ("SG.aaaaaaaaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "SG.aaaa"),
 ("AC0123456789abcdef0123456789abcdef", "AC0123456789abcdef"),
 ("123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1", "AAHdqTcvCH1vGWJx"),
 ("0123456789abcdef0123456789abcdef-us12", "0123456789abcdef0123456789abcdef"),
 ("sq0csp-0123456789abcdefABCDEF_xyz", "sq0csp-0123"),
 ("DefaultEndpointsProtocol=https;AccountName=x;AccountKey=ab12CD34ef56GH78ij90KL==;", "ab12CD34ef56"),
 ("pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0LXV2d3h5ejAxMjM0NQ", "AgEIcHlwaS5vcmcCJGFi"),
 ("PGPASSWORD=pgSecret1 psql", "pgSecret1"),
 ("MYSQL_PWD='my pw value'", "my pw value"),
 ('{"password": "correct horse battery"}', "correct horse"),
 ("password: hunter22", "hunter22"),
 ("--password=Sup3rS3cret", "Sup3rS3cret"),
 ("--token abcd1234efgh", "abcd1234efgh"),
 ("api_key=0f9a8b7c6d5e", "0f9a8b7c6d5e"),
 ("X-Api-Key: 0f9a8b7c6d5e4f3a", "0f9a8b7c6d5e4f3a"),
 ("client_secret => 'cl1ent-s3cret'", "cl1ent-s3cret"),
 ("SECRET_KEY = 'django-insecure-abc123'", "django-insecure"),
 ("auth_token: tok_9a8b7c6d", "tok_9a8b7c6d"),
 ("{\\\"db_pass\\\": \\\"esc4ped\\\"}", "esc4ped"),
 ("Authorization: Bearer abcdefghijklmnop", "abcdefghijklmnop"),
 ("Authorization: token ghx0123", "ghx0123"),
 ("Cookie: session=abc123; other=1", "abc123"),
 ("Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA"),
 ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghij"),
 ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_pat_11ABC"),
 ("sk-proj-abcdefghijklmnopqrstuvwxyz", "sk-proj-abcdef"),
 ("sk-ant-api03-abcdefghijklmnopqrstuv", "sk-ant-api03"),
 ("sk_live_abcdefghijklmnopqrstu", "sk_live_abcdef"),
 ("key: A8f3kLq92ZmXv71BcdPq0wRt", "A8f3kLq92ZmXv71BcdPq0wRt"),
 ("value 7hJk2LmN9pQr4StUv8WxYz3A", "7hJk2LmN9pQr4StUv8WxYz3A"),
 ("passphrase=\"open sesame now\"", "open sesame"),
 ("ftp://anon:guestpw@ftp.example.com", "guestpw"),
 ("MjQ1NjM2NzQ1NjM1Njc4OTAx.GhJkLm.AbCdEfGhIjKlMnOpQrStUvWxYz0123456", "GhJkLm.AbCdEf"),
 ("PuTTY-User-Key-File-2: ssh-rsa\nPrivate-Lines: 1\nAAAAgQCabc\nPrivate-MAC: 0a1b", "AAAAgQCabc"),
 ("mysqldump --user=root -pS3cr3t db > x.sql", "S3cr3t"),
 ("redis://:s3cretpw@cache:6379/0", "s3cretpw"),
 ("secret_key_base: 7f3a9b1c2d", "7f3a9b1c2d"),
 ("jdbc:mysql://db/app?user=root&password=jdbcpw1", "jdbcpw1"),
 ("Server=db;User Id=sa;Password=Pass123;", "Pass123"),
 ("mongodb+srv://app:mongopw@cluster0.example.net", "mongopw"),
 ("https://api.example.com/v1?access_token=tok123abc", "tok123abc"),
]


@pytest.mark.parametrize(("text", "secret"), SPELLINGS, ids=[f"{i:02d}" for i in range(len(SPELLINGS))])
def test_every_spelling_is_redacted(text: str, secret: str) -> None:
    out, kinds = redact_text(text)
    assert secret not in out and kinds and "[redacted: " in out


def test_the_table_covers_at_least_51_spellings() -> None:
    assert len(SPELLINGS) >= 51


@pytest.mark.parametrize(("key", "value"), [
    ("DB_PASS", "Tr0ub4dor"), ("MYSQL_PWD", "x1y2z3"), ("PGPASSWORD", "pg"), ("aws_secret_access_key", "wJalrXUtnFEMI"),
    ("AccountKey", "ab12CD34"), ("auth", "user:pw"), ("passphrase", "open sesame"), ("Authorization", "Token t"),
    ("npmAuthToken", "npm-tok-1"), ("sessionId", "sess-42"),
])
def test_secret_named_keys_inside_action_arguments(key: str, value: str) -> None:
    evidence, kinds = build_evidence(ApprovalRequest(
        user_text="deploy", action=ProposedAction("shell.run", "execute", "run", {"env": {key: value}, "cmd": "x"})))
    assert value not in evidence["proposedAction"]["argumentsJson"] and f"{key} value" in kinds


@pytest.mark.parametrize(("text", "secret"), SPELLINGS, ids=[f"{i:02d}" for i in range(len(SPELLINGS))])
def test_one_rule_for_observer_payloads_approval_evidence_and_assertion_artifacts(text: str, secret: str) -> None:
    expected, _ = redact_text(text)
    options = ObserveOptions(events=("input",), include=("inputText",), maxChars=8192)
    payload, _ = project(SessionEvent("input", 1, input_text=text), options)
    evidence, _ = build_evidence(ApprovalRequest(
        user_text="go", action=ProposedAction("shell.run", "execute", "run", {"cmd": text})))
    artifact = Snapshot(elements=(Element(text=text),)).redacted_json()
    assert payload["inputText"] == expected
    assert json.loads(evidence["proposedAction"]["argumentsJson"])["cmd"] == expected
    assert artifact["elements"][0]["text"] == expected
    assert secret not in expected


def test_high_entropy_rule_leaves_identifiers_and_digests_alone() -> None:
    for text in ("tokens: 1500, maxTokens=200", "fabric_jev/contract/redaction.py", "TestRedaction2Cases",
                 "commit 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b", "550e8400-e29b-41d4-a716-446655440000",
                 "docker run -p8080:80 nginx", "--password-file /etc/pw", "password: null"):
        assert redact_text(text) == (text, [])


@pytest.mark.parametrize("value", [[], {}])
def test_cyclic_and_over_deep_values_are_refused(value: Any) -> None:
    value.append(value) if isinstance(value, list) else value.update(me=value)
    with pytest.raises(ValueError, match="cyclic"):
        redact(value)
    deep: Any = "x"
    for _ in range(100):
        deep = [deep]
    with pytest.raises(ValueError, match="deeper"):
        redact(deep)
