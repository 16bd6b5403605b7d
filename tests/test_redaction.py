from __future__ import annotations

import json
from typing import Any

import pytest

from fabric_jev.approval import ApprovalRequest, ProposedAction, build_evidence
from fabric_jev.assertions.snapshot import Element, Snapshot
from fabric_jev.contract.observe import ObserveOptions, SessionEvent, project
from fabric_jev.redaction.redactor import is_secret_key, redact, redact_text


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
    options = ObserveOptions(events=("input",), include=("inputText",), max_chars=8192)
    payload, _ = project(SessionEvent("input", 1, input_text=text), options)
    evidence, _ = build_evidence(ApprovalRequest(
        user_text="go", action=ProposedAction("shell.run", "execute", "run", {"cmd": text})))
    artifact = Snapshot(elements=(Element(text=text),)).redacted_json()
    assert payload["inputText"] == expected
    assert json.loads(evidence["proposedAction"]["argumentsJson"])["cmd"] == expected
    assert artifact["elements"][0]["text"] == expected
    assert secret not in expected


def test_high_entropy_rule_leaves_identifiers_and_digests_alone() -> None:
    for text in ("tokens: 1500, maxTokens=200", "fabric_jev/redaction/redactor.py", "TestRedaction2Cases",
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


# ---------------------------------------------------------------- round three (issue 21, item 4)
GHP = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
HEX64 = "4f5e6d7c8b9a0f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899a"


def _leaks(value: Any, secret: str) -> bool:
    return secret in json.dumps(redact(value)[0], ensure_ascii=False)


def test_a_secret_used_as_a_dictionary_key_is_redacted() -> None:
    value, kinds = redact({GHP: 1, "user": {"AKIAIOSFODNN7EXAMPLE": "note"}})
    assert value == {"[redacted: github token]": 1, "user": {"[redacted: aws access key id]": "note"}}
    assert kinds == ["github token", "aws access key id"]


def test_keys_that_redact_alike_do_not_overwrite_each_other() -> None:
    value, _ = redact({GHP: 1, GHP[:-1] + "X": 2})
    assert sorted(value.values()) == [1, 2] and not _leaks({GHP: 1}, GHP)


def test_a_secret_named_key_holding_a_secret_does_not_leak_it_through_the_marker() -> None:
    value, kinds = redact({f"{GHP}_token": "v"})
    assert GHP not in json.dumps(value) and GHP not in json.dumps(kinds)


@pytest.mark.parametrize(("text", "secret"), [
    ("password%3Dhunter2x", "hunter2x"),
    ("GET /login?user=bob&password%3D%22s3cret-pw%22", "s3cret-pw"),
    ("api_key%253Dabc123def456", "abc123def456"),  # encoded twice
    ("\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44=hunter2x", "hunter2x"),  # fullwidth
    ("\u0440\u0430ssw\u043erd=hunter2x", "hunter2x"),  # Cyrillic р, а, о
    ("pass\u00adword=hunter2x", "hunter2x"),  # soft hyphen
    ("to\u200bken: zzq9-secret", "zzq9-secret"),  # zero-width space
    ("g\u200dhp_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghijklmnopqrstuvwxyz0123456789"),
    ("token " + GHP.encode().hex(), GHP.encode().hex()),  # hex-encoded
    ("blob " + b"password=hunter2x".hex(), b"password=hunter2x".hex()),
    ("echo 'Sup3rPW!' | docker login -u me --password-stdin ghcr.io", "Sup3rPW!"),
    ('echo "$X" && echo hunter2x | sudo docker login --username me --password-stdin', "hunter2x"),
    ("printf '%s' hunter2x | podman login --password-stdin quay.io", "hunter2x"),
    ('{"type": "service_account", "private_key_id": "4f5e6d7c8b9a0f1e2d3c4b5a69788796a5b4c3d2"}',
     "4f5e6d7c8b9a0f1e2d3c4b5a69788796a5b4c3d2"),
    ("SSN 078-05-1120 on file", "078-05-1120"),
    ("ssn=078051120", "078051120"),
    (f"secret_hex: {HEX64}", HEX64),
    (f'"secretHex": "{HEX64}"', HEX64),
])
def test_round_three_spellings_are_redacted(text: str, secret: str) -> None:
    out, kinds = redact_text(text)
    assert secret not in out and kinds, out


@pytest.mark.parametrize(("key", "value"), [
    ("\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44", "hunter2x"), ("\u0440\u0430ssword", "hunter2x"),
    ("pass\u00adword", "hunter2x"), ("private_key_id", "4f5e6d7c8b9a"), ("secret_hex", HEX64),
    ("tokenB64", "dG9rZW4="), ("ssn", "078-05-1120"), ("SSN", "078051120"),
])
def test_look_alike_and_encoded_key_names_are_secret(key: str, value: str) -> None:
    assert is_secret_key(key)
    assert not _leaks({key: value}, value)


@pytest.mark.parametrize(("items", "secrets"), [
    (["sk-proj-", "abcdefghijklmnopqrstuvwx", "yz"], ["abcdefghijklmnopqrstuvwx"]),
    (["note", "-----BEGIN RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA7bq9x2Lr4Tz", "Qm9vZ1VzZXIxMjM0NTY3ODkw",
      "-----END RSA PRIVATE KEY-----"], ["MIIEpAIBAAKCAQEA7bq9x2Lr4Tz", "Qm9vZ1VzZXIxMjM0NTY3ODkw"]),
    (["Authorization:", "Bearer", "abcdefghijklmnop"], ["abcdefghijklmnop"]),
    (["export", "DB_PASSWORD=", "hunter2x"], ["hunter2x"]),
    (["AKIA", "IOSFODNN", "7EXAMPLE", 3], ["IOSFODNN"]),
])
def test_the_middle_of_a_key_split_across_list_items_is_redacted(items: list[Any], secrets: list[str]) -> None:
    value, kinds = redact({"lines": items})
    assert kinds and ("note" not in items or value["lines"][0] == "note")
    for secret in secrets:
        assert secret not in json.dumps(value), value


def test_list_items_that_are_no_secret_joined_stay() -> None:
    items = ["a1B2", "c3D4", "e5F6", "g7H8", "i9J0", "token", "budget", "sk-", "is a prefix"]
    assert redact(items) == (items, [])


@pytest.mark.parametrize("text", [
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "The date 2024-01-15 and the phone 555-123-4567 and order 123-45-67890.",
    "Use 100%25 of the budget; 50%3D half",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u03ba\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1",
    "caf\u00e9 \ufb01le na\u00efve \u2460",
    "echo hello | docker login --help",
    "deadbeef" * 4,
])
def test_round_three_rules_leave_ordinary_text_alone(text: str) -> None:
    assert redact_text(text) == (text, [])


@pytest.mark.timeout(20)
@pytest.mark.parametrize("filler", ["%25", "%3D", "\u00ad", "\uff50", "ab", "echo x |", "000-00-"])
def test_round_three_rules_stay_linear(filler: str) -> None:
    redact_text(filler * (200_000 // len(filler)))
    redact([filler] * 20_000)


# ---------------------------------------------------------------- round four (issue 33, redaction)
# Every spelling of the round-four attacks, and the earlier rounds' that still leaked:
# (text, the part of the secret that must not survive). Each leaked before this round.
ZEROS = "0" * 64
ROUND_FOUR = [
 # passwords on other command lines
 ("mongo -u admin -p hunter2x --authenticationDatabase admin", "hunter2x"),
 ("mongosh 'mongodb://db:27017/app' -u root -p 'S3cret pw'", "S3cret pw"),
 ("mongodump --uri mongodb://db -u bk -p dumpPw77 --gzip", "dumpPw77"),
 ("sqlcmd -S db.local -U sa -P 'Pass123!' -Q 'SELECT 1'", "Pass123!"),
 ("bcp dbo.t out t.dat -S db -U sa -PbcpPw9 -c", "bcpPw9"),
 ("ldapsearch -x -D 'cn=admin,dc=ex,dc=com' -w ldapPw99 -b dc=ex,dc=com", "ldapPw99"),
 ("ldappasswd -x -D cn=admin -w adminPw1 -s newUserPw2 uid=bob", "newUserPw2"),
 ("openssl pkcs12 -in cert.p12 -passin pass:p12secret -nodes", "p12secret"),
 ("openssl rsa -in k.pem -passout 'pass:two words' -aes256", "two words"),
 ("openssl enc -aes-256-cbc -k encpass77 -in a -out b", "encpass77"),
 ("7z a -pzipSecret9 backup.7z ./data", "zipSecret9"),
 ("7za x '-pq uoted' backup.7z", "q uoted"),
 ("unzip -P unzipPw42 archive.zip", "unzipPw42"),
 ("zip -P zipPw43 -r out.zip dir", "zipPw43"),
 ("smbclient //fs/share -U alice%smbPw123", "smbPw123"),
 ("smbclient -L fs -U 'CORP\\alice%smb pw 2'", "smb pw 2"),
 ("htpasswd -b /etc/nginx/.htpasswd admin htPw555", "htPw555"),
 ("htpasswd -nbB admin htPw556 > users", "htPw556"),
 ("ssh-keygen -t ed25519 -N 'key phrase 1' -f id", "key phrase 1"),
 ("ssh-keygen -p -P oldPhrase -N newPhrase -f id", "newPhrase"),
 ("echo 'sudoPw1!' | sudo -S apt-get install -y nginx", "sudoPw1!"),
 ("echo sudoPw2 | sudo -kS systemctl restart app", "sudoPw2"),
 ("sudo -S true <<< 'sudoPw3'", "sudoPw3"),
 ("machine api.example.com login bob password netrcPw7", "netrcPw7"),
 ("machine git.example.com\n  login bob\n  password netrcPw8", "netrcPw8"),
 ("net use \\\\fs\\share /user:CORP\\alice NetPw#2024", "NetPw#2024"),
 ("net use Z: \\\\fs\\share NetPw#2025 /user:alice /persistent:no", "NetPw#2025"),
 ("net user svc_backup Backup#Pw1 /add", "Backup#Pw1"),
 ("CREATE USER 'app'@'%' IDENTIFIED BY 'sqlPw2024';", "sqlPw2024"),
 ("ALTER USER scott IDENTIFIED BY tiger99;", "tiger99"),
 ("ALTER ROLE app WITH LOGIN PASSWORD 'pgRolePw1';", "pgRolePw1"),
 ("ALTER LOGIN app WITH PASSWORD=N'MsSqlPw1!'", "MsSqlPw1!"),
 ("SET PASSWORD FOR 'bob'@'%' = PASSWORD('oldMyPw2')", "oldMyPw2"),
 ("<password>xmlPw321</password>", "xmlPw321"),
 ("<db:Password>\n  xmlPw322\n</db:Password>", "xmlPw322"),
 ('<add key="DbPassword" value="cfgPw323" />', "cfgPw323"),
 ('<property name="hibernate.connection.password" value="hbPw324"/>', "hbPw324"),
 ('<entry key="api.token">xmlTok325</entry>', "xmlTok325"),
 # secrets given as name/value pairs, written as text
 ('env:\n  - name: DB_PASSWORD\n    value: "k8sPw1"', "k8sPw1"),
 ('{"name": "DB_PASSWORD", "value": "ecsPw2"}', "ecsPw2"),
 ('{"name": "API_TOKEN", "type": "secure", "value": "ecsTok3"}', "ecsTok3"),
 ('{"Value": "ssmPw4", "Name": "/prod/db/password"}', "ssmPw4"),
 ('[["DB_PASSWORD", "pairPw5"]]', "pairPw5"),
 ('{"key": "Authorization", "value": "Token hdrTok6"}', "hdrTok6"),
 ("aws ssm put-parameter --name /prod/db/password --type SecureString --value ssmPw7", "ssmPw7"),
 ("ParameterKey=DbPassword,ParameterValue=cfnsecretvalue", "cfnsecretvalue"),
 # URL userinfo
 ("postgres://admin:pa/ss/word@db.example.com/app", "pa/ss/word"),
 ("mysql://root:my secret pw@db:3306/app", "my secret pw"),
 ("git clone https://0123456789abcdef0123456789abcdef01234567@github.com/o/r", "0123456789abcdef01234567"),
 ("https://ghtoken0123456789abcdef@github.com/o/r.git", "ghtoken0123456789abcdef"),
 ("aws s3 cp s3://mykey:lowercase/secret/value@bucket/key .", "lowercase/secret/value"),
 ("s3://key:secret/with+slash@bucket/path", "secret/with+slash"),
 # vendor keys with low-entropy bodies (gitleaks' shapes; Kingfisher's for Ethereum)
 ("token dop_v1_" + ZEROS, "dop_v1_" + ZEROS[:20]),
 ("doo_v1_" + "a" * 64, "a" * 64),
 ("shpat_" + "a" * 32, "a" * 32),
 ("shpss_" + "0" * 32, "0" * 32),
 ("mailgun: key-" + "0" * 32, "0" * 32),
 ("dapi" + "0" * 32, "dapi" + "0" * 32),
 ("hf_" + "a" * 34, "a" * 34),
 ("api_org_" + "b" * 34, "b" * 34),
 ("newrelic: NRAK-" + "A" * 27, "A" * 27),
 ("AGE-SECRET-KEY-1" + "Q" * 58, "Q" * 58),
 ("privateKeyToAccount('0x" + "1" * 64 + "')", "1" * 64),
 ("wallet.set_eth_private_key('" + "2" * 64 + "')", "2" * 64),
 # base32, HTML references, rot13
 ("OBQXG43XN5ZGIPLIOVXHIZLSGJ4A====", "OBQXG43XN5ZGIPLIOVXHIZLSGJ4A"),
 ("blob " + "obqxg43xn5zgiplbmjrxgojvmy", "obqxg43xn5zgiplbmjrxgojvmy"),
 ("&#112;&#97;&#115;&#115;&#119;&#111;&#114;&#100;&#61;hunter2x", "hunter2x"),
 ("&quot;password&quot;: &quot;hunter3x&quot;", "hunter3x"),
 ("&#x70;assword=hunter4x", "hunter4x"),
 ("cnffjbeq=uhagre2k", "uhagre2k"),
 ("nja_npprff_gbxra: nopqrs123456", "nopqrs123456"),
 ("Nhgubevmngvba: Ornere nopqrstuvwxyz12345", "nopqrstuvwxyz12345"),
 # earlier rounds
 ('echo -n "hunter 2x" | docker login --password-stdin', "hunter 2x"),
 ("echo hunter5x | passwd --stdin bob", "hunter5x"),
 (f"secret_hex {HEX64}", HEX64),
 (f"secret_hex\n{HEX64}", HEX64),
 (f"--secret-hex {HEX64}", HEX64),
 (f"secret_hex | {HEX64}", HEX64),
 (f"secret_hex -> 0x{HEX64}", HEX64),
]


@pytest.mark.parametrize(("text", "secret"), ROUND_FOUR, ids=[f"{i:02d}" for i in range(len(ROUND_FOUR))])
def test_round_four_spellings_are_redacted(text: str, secret: str) -> None:
    out, kinds = redact_text(text)
    assert secret not in out and kinds, out


@pytest.mark.parametrize(("text", "kind"), [
    ("dop_v1_" + ZEROS, "digitalocean pat"), ("dor_v1_" + ZEROS, "digitalocean refresh token"),
    ("shpat_" + "a" * 32, "shopify access token"), ("mailgun: key-" + "0" * 32, "mailgun private api token"),
    ("dapi" + "0" * 32, "databricks api token"), ("hf_" + "a" * 34, "huggingface access token"),
    ("newrelic: NRAK-" + "A" * 27, "new relic user api key"), ("AGE-SECRET-KEY-1" + "Q" * 58, "age secret key"),
    ("ETH_PRIVATE_KEY=0x" + ZEROS, "ethereum private key"),
])
def test_vendor_keys_are_named_by_the_kept_rule_set(text: str, kind: str) -> None:
    assert kind in redact_text(text)[1]


def test_the_vendor_rules_are_the_kept_rule_sets_with_their_source() -> None:
    from fabric_jev.redaction.vendor_rules import all_rules, rule_sources

    counts = rule_sources()
    assert counts["gitleaks"] >= 200 and counts["kingfisher"] == 1
    ids = {r.id for r in all_rules()}
    assert {"digitalocean-pat", "shopify-access-token", "mailgun-private-api-token", "databricks-api-token",
            "huggingface-access-token", "new-relic-user-api-key", "age-secret-key", "ethereum-private-key"} <= ids
    assert "generic-api-key" not in ids  # our secret-assignment rule is the generic one
    import importlib.resources

    folder = importlib.resources.files("fabric_jev.redaction").joinpath("secret_rules")
    for name, licence in (("gitleaks.toml", "MIT"), ("kingfisher.toml", "Apache-2.0")):
        text = folder.joinpath(name).read_text(encoding="utf-8")
        assert f'licence = "{licence}"' in text and 'commit = "' in text
    assert "Permission is hereby granted" in folder.joinpath("LICENSE.gitleaks").read_text(encoding="utf-8")
    assert "Apache License" in folder.joinpath("LICENSE.kingfisher").read_text(encoding="utf-8")


def test_a_vendor_rules_allowlist_is_kept() -> None:
    # gitleaks' vault rule allows `s.` followed by letters only (a word, not a token).
    assert redact_text("vault token s.abcdefghijklmnopqrstuvwx here") == \
        ("vault token s.abcdefghijklmnopqrstuvwx here", [])
    assert "vault service token" in redact_text("vault token s.abcdefghijkl0123456789ab here")[1]


@pytest.mark.parametrize(("value", "secret"), [
    ({"spec": {"containers": [{"env": [{"name": "DB_PASSWORD", "value": "k8sPw1"}]}]}}, "k8sPw1"),
    ({"environment": [{"name": "API_TOKEN", "value": 12345678}]}, "12345678"),  # ECS, a number
    ({"env": [["DB_PASSWORD", "pairPw2"]]}, "pairPw2"),
    ({"env": [("MYSQL_PWD", "tuplePw3")]}, "tuplePw3"),
    ({"headers": [{"key": "Authorization", "value": "Token abc123"}]}, "abc123"),
    ({"header": [{"key": "X-Api-Key", "value": "pmKey4", "type": "text"}]}, "pmKey4"),  # Postman
    ({"Parameter": {"Name": "/prod/db/password", "Value": "ssmPw3", "Type": "SecureString"}}, "ssmPw3"),
    ({"Parameters": [{"ParameterKey": "DbPassword", "ParameterValue": "cfnPw4"}]}, "cfnPw4"),
    ({"fields": [{"id": "password", "label": "Password", "value": "formPw5"}]}, "formPw5"),
    ({"settings": [{"name": "client_secret", "value": {"v1": "nestedPw6", "v2": ["nestedPw7"]}}]}, "nestedPw"),
    ({"settings": [{"name": "db_password", "value": ["listPw8"]}]}, "listPw8"),
])
def test_a_pair_whose_name_says_secret_loses_its_value_whatever_its_shape(value: Any, secret: str) -> None:
    out, kinds = redact(value)
    assert secret not in json.dumps(out) and any(k.endswith(" value") for k in kinds), out


def test_pairs_keep_their_names_and_other_fields() -> None:
    out, kinds = redact({"env": [{"name": "DB_PASSWORD", "value": "x1"}, {"name": "DB_USER", "value": "bob"}]})
    assert out == {"env": [{"name": "DB_PASSWORD", "value": "[redacted: DB_PASSWORD value]"},
                           {"name": "DB_USER", "value": "bob"}]}
    assert kinds == ["DB_PASSWORD value"]


@pytest.mark.parametrize("value", [
    {"env": [{"name": "DB_USER", "value": "bob"}, {"name": "LOG_LEVEL", "value": "debug"}]},
    {"headers": [{"key": "Accept", "value": "application/json"}]},
    [["timeout", 30], ["tokens_used", 1500], ["passwordPolicy", "strict"]],
    {"valueFrom": {"secretKeyRef": {"name": "db-secret", "key": "password"}}},  # a reference, no value
    {"name": "DB_PASSWORD", "value": ""},
])
def test_pairs_that_hold_no_secret_stay(value: Any) -> None:
    assert redact(value) == (value, [])


# Near misses of the round-four rules, and ordinary text they must leave alone.
NEAR_MISSES = [
    "mongo --host db --port 27017 app", "unzip -p archive.zip notes.txt | less", "ssh-keygen -p -f ~/.ssh/id_ed25519",
    "sudo -S -v", "7z x archive.7z -o/tmp/out", "htpasswd -c /etc/nginx/.htpasswd admin",
    "net use Z: \\\\fs\\share /persistent:yes", "net user alice /domain", "openssl req -new -nodes -keyout k.pem",
    "ldapsearch -x -W -b dc=example,dc=com", "sqlcmd -S db -E -Q 'SELECT 1'", "smbclient -L fs -N",
    "Exceptions are identified by class instances.", "The tests pass: 40 of 40.", "git@github.com:org/repo.git",
    "ssh://git@github.com/org/repo", "https://medium.com:443/@someone/a-post", "http://localhost:8080 or mail bob@example.com",
    "tx 0x" + HEX64, '{"name": "username", "value": "bob"}', "<user>bob</user> <password/> <token></token>",
    '("timeout", 30)', "R&D &amp; more", "Basic customization", "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
    "machine learning is fun", "echo hello | sudo tee /etc/motd", "the password is required",
    'kubectl create secret generic db --from-literal=user=bob', "identified by the patterns of leading underscores",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_round_four_rules_leave_near_misses_alone(text: str) -> None:
    assert redact_text(text) == (text, [])


@pytest.mark.timeout(30)
@pytest.mark.parametrize("filler", [
    "mongo -p ", "htpasswd -b ", "net use \\\\a ", "pass:", "<password>", "<a name='pw' ", '{"name": "password", ',
    "name: x\n", "['token', ", "&#112;", "cnff", "machine x ", "secret_hex ", "s3://a:b/", "http://a:b c",
    "AGE-SECRET-KEY-1", "dop_v1_", "mailgun=", "eth_private_key=", "OBQXG43X",
])
def test_round_four_rules_stay_linear(filler: str) -> None:
    redact_text(filler * (200_000 // len(filler)))
    redact([filler] * 20_000)


# ---------------------------------------------------------------- false positives on ordinary text
#: The most redaction may change of each corpus (tests/redaction_corpus.py); docs/observers.md
#: gives the measured figures.
FALSE_POSITIVE_BOUNDS = {"suite": 0.0, "eval-set": 0.0, "python-reference": 0.001}


@pytest.mark.parametrize("corpus", sorted(FALSE_POSITIVE_BOUNDS))
def test_the_false_positive_rate_on_ordinary_text_is_bounded(corpus: str) -> None:
    from tests.redaction_corpus import false_positives, ordinary_corpora

    texts = ordinary_corpora()[corpus]
    changed = false_positives(texts)
    assert len(texts) >= 50
    assert len(changed) / len(texts) <= FALSE_POSITIVE_BOUNDS[corpus], changed[:5]


def test_code_where_a_value_would_be_is_no_secret_but_a_value_is() -> None:
    for text in ('password = getpass.getpass("Password: ")', 'token = os.environ["TOKEN"]',
                 "export DIR=$PWD:/tmp", "--from-file=password=./db-password.txt"):
        assert redact_text(text) == (text, [])
    assert redact_text("password = hunter2x")[0] == "password = [redacted: secret assignment]"
    assert redact_text("token = os.environ")[0] == "token = [redacted: secret assignment]"


# ---------------------------------------------------------------- the new rules reach every consumer
# Observer payloads, approval evidence (the classifier's), the question a person is asked,
# assertion artifacts and pytest cassettes all redact through this module.
CONSUMER_SAMPLES = [
    ('{"env": [{"name": "DB_PASSWORD", "value": "consumerPw1"}]}', "consumerPw1"),
    ("mongo -u admin -p consumerPw2 shop", "consumerPw2"),
    ("dop_v1_" + "0" * 64, "0" * 64),
    ("cnffjbeq=pbafhzrecj3", "pbafhzrecj3"),
    ("<password>consumerPw4</password>", "consumerPw4"),
]
PAIR_VALUE = {"env": [{"name": "DB_PASSWORD", "value": "consumerPw5"}], "headers": [["Authorization", "Token t6"]]}


@pytest.mark.parametrize(("text", "secret"), CONSUMER_SAMPLES)
def test_round_four_rules_reach_observer_payloads_evidence_and_artifacts(text: str, secret: str) -> None:
    from fabric_jev.contract.observe import ToolResult

    options = ObserveOptions(events=("input", "tool_error"), include=("inputText", "toolResults"), max_chars=8192)
    payload, _ = project(SessionEvent("input", 1, input_text=text), options)
    tool, _ = project(SessionEvent("tool_error", 2, tool_name="shell", tool_results=(ToolResult("shell", True, text),)),
                      options)
    evidence, _ = build_evidence(ApprovalRequest(
        user_text=text, action=ProposedAction("shell.run", "execute", "run", {"cmd": text, **PAIR_VALUE})))
    artifact = Snapshot(elements=(Element(text=text),)).redacted_json()
    for shown in (payload, tool, evidence, artifact):
        dumped = json.dumps(shown)
        assert secret not in dumped and "[redacted: " in dumped, dumped
    assert "consumerPw5" not in json.dumps(evidence) and "Token t6" not in json.dumps(evidence)


SHELL_SAMPLE = "cd /srv && mongo -u admin -p consumerPw7 && echo consumerPw8 | sudo -S ls"


async def _asked(answer: str, *calls: dict[str, Any]) -> tuple[list[Any], Any]:
    """The questions a person was asked about `calls` (made in turn by one run), and the envelope."""
    from fabric_jev import CapabilityCall, CapabilityRegistry, JevHost
    from tests.conftest import program

    seen: list[CapabilityCall] = []

    async def approver(call: CapabilityCall) -> str:
        seen.append(call)
        return answer

    async def run(args: Any, ctx: Any) -> Any:
        return "done"

    registry = CapabilityRegistry()
    registry.register("shell.run", run, "execute")
    code = "".join(f"try {{ await tools.call({{ref: 'shell.run', args: {json.dumps(c)}}}); }} catch (e) {{}}\n"
                   for c in calls)
    async with JevHost(capabilities=registry, approver=approver) as host:
        env = await host.run(program(code, requires=["shell.run"]), None)
    return seen, env


@pytest.mark.anyio
async def test_round_four_rules_reach_the_question_a_person_is_asked() -> None:
    seen, env = await _asked("deny", {"command": SHELL_SAMPLE, "samples": [t for t, _ in CONSUMER_SAMPLES],
                                      **PAIR_VALUE}, {"command": SHELL_SAMPLE, **PAIR_VALUE})
    assert len(seen) == 2
    # Every string under a shell capability is read as a possible command: '<password>…</password>'
    # among the samples does not parse, so the floor asks and offers no "always" pattern.
    assert seen[0].commands and seen[0].always is None
    assert seen[1].commands and seen[1].always  # the segments and the pattern are shown, redacted
    for call in seen:
        shown = json.dumps(call.to_json()) + call.arguments_text + json.dumps(call.commands) + str(call.always)
        for secret in [s for _, s in CONSUMER_SAMPLES] + ["consumerPw5", "Token t6", "consumerPw7", "consumerPw8"]:
            assert secret not in shown, shown
            assert secret not in json.dumps(env.to_json())


@pytest.mark.anyio
async def test_always_for_a_command_holding_a_password_still_answers_the_same_command() -> None:
    # The person is shown the pattern redacted; the pattern kept for the run is the real one.
    seen, env = await _asked("always", {"command": "mongo -u admin -p consumerPw9 shop"},
                             {"command": "mongo -u admin -p consumerPw9 shop"})
    assert len(seen) == 1 and "consumerPw9" not in str(seen[0].always)
    assert [a["allowed"] for a in env.to_json().get("approvals", [])] == [True, True]


@pytest.mark.anyio
async def test_round_four_rules_reach_pytest_cassettes(tmp_path: Any) -> None:
    from fabric_jev.contract.evaluation import validate_request
    from fabric_jev.testing import RecordingEvaluator, ScriptedEvaluator

    path = tmp_path / "c.jsonl"
    question = {"q": {"type": "noul", "instructions": "Safe?"}}
    ev = RecordingEvaluator(path, "new", record_from=lambda: ScriptedEvaluator({"q": {"noul": 0.5}}))
    await ev.evaluate(validate_request({"state": PAIR_VALUE, "questions": question}), timeout=5)
    for text, _ in CONSUMER_SAMPLES:
        await ev.evaluate(validate_request({"state": text, "questions": question}), timeout=5)
    await ev.aclose()
    written = path.read_text(encoding="utf-8")
    for secret in [s for _, s in CONSUMER_SAMPLES] + ["consumerPw5", "Token t6"]:
        assert secret not in written


def test_no_vendor_rule_matches_text_shorter_than_the_length_it_skips() -> None:
    # Redaction skips the vendor rules for text shorter than vendor_rules.SHORTEST_MATCH; Python's
    # parser reads these RE2 patterns once the few RE2-only spellings are put its way.
    import warnings

    from fabric_jev.redaction import vendor_rules

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import sre_parse as parser

    def shortest(regex: str) -> int:
        for a, b in (("(?i)", ""), ("(?-i:", "(?:"), ("[[:alnum:]]", "[a-zA-Z0-9]"), ("[[:xdigit:]]", "[0-9a-f]"),
                     ("[[:blank:]]", "[ \t]"), ("\\z", "\\Z")):
            regex = regex.replace(a, b)
        return int(parser.parse(regex).getwidth()[0])

    assert min(shortest(r.regex) for r in vendor_rules.all_rules()) >= vendor_rules.SHORTEST_MATCH
