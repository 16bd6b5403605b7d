"""Issue 39 part 6: the earlier rounds' open cases of redaction, each family with fixed cases that
failed before its fix and hypothesis variants (names, quoting, casing, separators, surrounding
text) that the fixed cases never showed.

(a) a 64-hex secret after a secret's name, the name a snake/camel/kebab compound with words
    after the secret word (`my_secret_hex_value`, `secretHexValue`);
(b) a password piped into a command that reads it from stdin (`printf %s PW | docker login
    --password-stdin`);
(c) passwords in other tools' command lines and config syntaxes (`mysql -p'…'`, `.pgpass`,
    `lftp -u user,pass`, `--client-secret "…"`, …);
(d) vendor-prefixed keys whatever their body's entropy;
(e) a bare base32 TOTP seed, and the ordinary upper-case text it must leave alone.
"""

from __future__ import annotations

import json
import random
import string

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fabric_jev.redaction.redactor import is_secret_key, redact, redact_text
from tests.fuzz_support import fuzz_timeout

HEX64 = "4f5e2a9c0b1d3e7f8a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f"
_HEX = "0123456789abcdef"
_BASE32 = string.ascii_uppercase + "234567"

#: Text around a secret: before it, after it (never a character that could join the secret).
_BEFORE = st.sampled_from(["", "config: ", "$ ", "Run:\n", "log line 3 | ", "> ", "  ", "# set up\n"])
_AFTER = st.sampled_from(["", "\n", " # done", "\nnext line", " ;", "  ", "\r\n"])


def _leaks(text: str, secret: str) -> bool:
    out, kinds = redact_text(text)
    return secret in out or not kinds


# ---------------------------------------------------------------- (a) hex after a compound name
@pytest.mark.parametrize("text", [
    f"my_secret_hex_value={HEX64}", f'secret_hex_key = "{HEX64}"', f"secretHexValue: '{HEX64}'",
    f"SIGNING_SECRET_HEX_STRING={HEX64}", f'{{"hmac-secret-hex-value": "{HEX64}"}}',
])
def test_a_hex_secret_after_a_compound_name_is_redacted(text: str) -> None:
    assert not _leaks(text, HEX64)


@pytest.mark.parametrize("key", ["secret_hex_key", "secretHexValue", "signing-secret-hex-string",
                                 "API_TOKEN_B64_VALUE", "dbPasswordHashHex"])
def test_a_compound_key_with_words_after_the_secret_word_is_secret(key: str) -> None:
    assert is_secret_key(key)
    assert redact({key: HEX64})[0] == {key: f"[redacted: {key} value]"}


_SECRET_WORDS = ["secret", "password", "token", "api_key", "private_key", "client_secret", "auth_token",
                 "access_key", "passphrase"]
_TAIL_WORDS = ["hex", "value", "key", "b64", "string", "bytes", "data", "hash", "str", "text", "base64"]
_LEAD_WORDS = ["my", "app", "hmac", "signing", "session", "db", "webhook", "jwt"]


def _spelled(words: list[str], style: str) -> str:
    parts = [p for w in words for p in w.split("_")]
    if style == "snake":
        return "_".join(parts)
    if style == "screaming":
        return "_".join(parts).upper()
    if style == "kebab":
        return "-".join(parts)
    if style == "camel":
        return parts[0] + "".join(p.capitalize() for p in parts[1:])
    return "".join(p.capitalize() for p in parts)  # Pascal


@st.composite
def _named_hex(draw: st.DrawFn) -> tuple[str, str, str]:
    """(the name, the text assigning a hex value to it, the value)."""
    lead = draw(st.lists(st.sampled_from(_LEAD_WORDS), max_size=2))
    tail = draw(st.lists(st.sampled_from(_TAIL_WORDS), min_size=1, max_size=3))
    words = [*lead, draw(st.sampled_from(_SECRET_WORDS)), *tail]
    name = _spelled(words, draw(st.sampled_from(["snake", "screaming", "kebab", "camel", "pascal"])))
    value = draw(st.sampled_from([HEX64, "0" * 64, HEX64.upper(), "0x" + HEX64])
                 | st.text(alphabet=_HEX, min_size=32, max_size=64))
    shape = draw(st.sampled_from(["{n}={v}", "{n} = {v}", "{n}: {v}", '"{n}": "{v}"', "{n} = '{v}'",
                                  "export {n}={v}", '{n}="{v}"', "  {n}: '{v}'", "{n} {v}", "{n}\n{v}",
                                  '{{"{n}":"{v}"}}', "--{n}={v}", "<{n}>{v}</{n}>"]))
    text = draw(_BEFORE) + shape.format(n=name, v=value) + draw(_AFTER)
    return name, text, value.removeprefix("0x")


@fuzz_timeout
@given(_named_hex())
@example(("my_secret_hex_value", f"my_secret_hex_value={HEX64}", HEX64))
def test_hex_after_any_compound_secret_name_is_redacted(case: tuple[str, str, str]) -> None:
    name, text, value = case
    assert not _leaks(text, value), (text, redact_text(text))
    assert is_secret_key(name), name
    assert value not in json.dumps(redact({name: value})[0])


# ---------------------------------------------------------------- (b) a password piped to stdin
@pytest.mark.parametrize("text", [
    "printf %s hunter2pw | docker login --password-stdin",
    "printf -- '%s' hunter2pw | docker login --username bob --password-stdin",
    "echo -n 'hunter2pw'|sudo docker login -u bob --password-stdin ghcr.io",
])
def test_a_password_piped_to_password_stdin_is_redacted(text: str) -> None:
    assert not _leaks(text, "hunter2pw")


_PASSWORDS = st.text(alphabet=string.ascii_letters + string.digits + "_.!@%^*+~:,=/", min_size=8, max_size=20).filter(
    lambda s: s[0].isalnum() and any(c.isdigit() for c in s) and any(c.isalpha() for c in s))


@st.composite
def _piped(draw: st.DrawFn) -> tuple[str, str]:
    password = draw(_PASSWORDS)
    feeder = draw(st.sampled_from(["echo", "echo -n", "echo -e", "printf '%s'", 'printf "%s"', "printf %s",
                                   "printf '%s\\n'", "printf -- '%s'", "printf -- %s", "/bin/echo"]))
    quoted = draw(st.sampled_from(["{}", "'{}'", '"{}"'])).format(password)
    pipe = draw(st.sampled_from([" | ", "|", " |", "| ", "  |  "]))
    tool = draw(st.sampled_from(["docker login", "sudo docker login", "podman login", "helm registry login",
                                 "nerdctl login", "buildah login", "skopeo login", "oras login", "crane auth login",
                                 "docker --config ./d login"]))
    user = draw(st.sampled_from(["", " -u bob", " --username bob", " -u=bob"]))
    where = draw(st.sampled_from(["{t}{u} --password-stdin", "{t} --password-stdin{u}",
                                  "{t}{u} --password-stdin registry.example.com",
                                  "{t}{u} registry.example.com --password-stdin"]))
    text = draw(_BEFORE) + f"{feeder} {quoted}{pipe}" + where.format(t=tool, u=user) + draw(_AFTER)
    return text, password


@fuzz_timeout
@given(_piped())
def test_any_password_piped_to_password_stdin_is_redacted(case: tuple[str, str]) -> None:
    text, password = case
    assert not _leaks(text, password), (text, redact_text(text))


# ---------------------------------------------------------------- (c) other tools and config syntaxes
@pytest.mark.parametrize(("text", "secret"), [
    ("mysql -u root -p'hunter2 pw' app", "hunter2 pw"), ('mysql -p"hunter2pw" -h db', "hunter2pw"),
    ("db.example.com:5432:app:bob:hunter2pw", "hunter2pw"), ("*:*:*:postgres:hunter2pw", "hunter2pw"),
    ("lftp -u bob,hunter2pw ftp.example.com", "hunter2pw"),
    ('az login --service-principal --client-secret "hunter2 pw"', "hunter2 pw"),
    ("rclone config --pass hunter2pw", "hunter2pw"),
])
def test_other_tools_passwords_are_redacted(text: str, secret: str) -> None:
    assert not _leaks(text, secret)


#: Each tool and config syntax: {p} is the password, {q} the same quoted when the syntax allows.
_SHAPES = [
    "mysql -u {u} -p{p} app", "mysql -u {u} -p'{p}' app", 'mariadb -p"{p}" -h db', "mysqldump --password={p} app",
    "mysql --password {q} app", "sshpass -p {p} ssh {u}@host", "sshpass -p {q} scp a host:",
    "curl -u {u}:{p} https://api.example.com", "curl --user '{u}:{p}' https://x", "curl -su {u}:{p} https://x",
    "wget --password={p} http://x/f", "wget --http-password {q} http://x", "wget --ftp-password={p} ftp://x",
    "htpasswd -b /etc/nginx/.htpasswd {u} {p}", "htpasswd -nbB {u} {q}",
    "openssl pkcs12 -export -passout pass:{p} -out a.p12", "openssl rsa -passin 'pass:{p}' -in k.pem",
    "machine api.example.com login {u} password {p}", "machine h\n  login {u}\n  password {p}",
    "db.example.com:5432:app:{u}:{p}", "localhost:*:*:{u}:{p}", "*:*:*:{u}:{p}",
    "[client]\nuser = {u}\npassword = {p}", "[db]\npassword={p}\n", "db:\n  user: {u}\n  password: {p}",
    "db:\n  password: '{p}'", 'password = "{p}"', "[database]\npassword = '{p}'", "<password>{p}</password>",
    '<Password value="{p}"/>', "docker run -e PASSWORD={p} img", "docker run --env DB_PASSWORD={p} img",
    'docker run -e "POSTGRES_PASSWORD={p}" img', "az login --client-secret {q}", "tool --client-secret={p}",
    "kcadm.sh config credentials --secret {q}", "lftp -u {u},{p} ftp.example.com", "rclone --pass {p} ls",
    "redis-cli -a {q} ping", "psql 'postgresql://{u}:{p}@db/app'", "PGPASSWORD={p} psql -h db",
    "java -Djavax.net.ssl.keyStorePassword={p} -jar a.jar", "DB_PASS={p} ./run",
]
_SHELL_SAFE = st.text(alphabet=string.ascii_letters + string.digits + "_.!%^*+~", min_size=8, max_size=20).filter(
    lambda s: s[0].isalnum() and any(c.isdigit() for c in s) and any(c.isalpha() for c in s))


@st.composite
def _tool_lines(draw: st.DrawFn) -> tuple[str, str]:
    shape = draw(st.sampled_from(_SHAPES))
    password = draw(_SHELL_SAFE)
    quoted = draw(st.sampled_from(["{}", "'{}'", '"{}"'])).format(password)
    user = draw(st.sampled_from(["bob", "admin", "svc_ci", "root"]))
    return draw(_BEFORE) + shape.format(u=user, p=password, q=quoted) + draw(_AFTER), password


@fuzz_timeout
@given(_tool_lines())
def test_passwords_in_every_tool_and_config_syntax_are_redacted(case: tuple[str, str]) -> None:
    text, password = case
    assert not _leaks(text, password), (text, redact_text(text))


# ---------------------------------------------------------------- (d) vendor keys of low entropy
#: (prefix, body alphabet, body length): keys whose kind is in the prefix, not in the body's randomness.
_VENDOR = [("sk-", _HEX + string.ascii_letters, 48), ("sk-proj-", string.ascii_letters, 40),
           ("ghp_", string.ascii_letters + string.digits, 36), ("gho_", string.digits, 36),
           ("github_pat_", string.ascii_uppercase, 82), ("glpat-", string.ascii_letters, 20),
           ("xoxb-", string.digits, 24), ("AKIA", _BASE32, 16), ("ASIA", _BASE32, 16),
           ("AIza", string.ascii_letters, 35), ("npm_", string.ascii_lowercase, 36), ("dop_v1_", _HEX, 64),
           ("shpat_", _HEX, 32), ("hf_", string.ascii_lowercase, 34), ("sk_live_", string.digits, 24),
           ("pscale_tkn_", string.ascii_letters, 32), ("lin_api_", string.ascii_lowercase, 40)]


@st.composite
def _low_entropy_keys(draw: st.DrawFn) -> tuple[str, str]:
    prefix, alphabet, size = draw(st.sampled_from(_VENDOR))
    period = draw(st.text(alphabet=alphabet, min_size=1, max_size=2))
    body = (period * size)[:size]
    quote = draw(st.sampled_from(["", "'", '"', "`"]))
    around = draw(st.sampled_from(["{}", "key={}", "token: {}", "({})", "[{}]", "{},", "export K={}", "<k>{}</k>"]))
    text = draw(_BEFORE) + around.format(quote + prefix + body + quote) + draw(_AFTER)
    return text, prefix + body


@fuzz_timeout
@given(_low_entropy_keys())
@example(("sk-" + "a" * 48, "sk-" + "a" * 48))
@example(("ghp_" + "0" * 36, "ghp_" + "0" * 36))
@example(("AKIAAAAAAAAAAAAAAAAA", "AKIAAAAAAAAAAAAAAAAA"))
def test_vendor_keys_are_redacted_whatever_their_entropy(case: tuple[str, str]) -> None:
    text, key = case
    assert not _leaks(text, key), (text, redact_text(text))


# ---------------------------------------------------------------- (e) a bare base32 TOTP seed
@pytest.mark.parametrize(("text", "seed"), [
    ("JBSWY3DPEHPK3PXP", "JBSWY3DPEHPK3PXP"), ("your key: JBSW Y3DP EHPK 3PXP", "Y3DP EHPK"),
    ("GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ", "GEZDGNBVGY3TQOJQ"), ("4GQK2ZJHXW7ZJM2MFYQSYDCRQE", "4GQK2ZJHXW7ZJM2MFYQSYDCRQE"),
    ("setup key: jbsw y3dp ehpk 3pxp mfrg gzdf mztw q2lk", "y3dp ehpk"),
    ("otpauth://totp/Example:bob?secret=JBSWY3DPEHPK3PXP&issuer=Example", "JBSWY3DPEHPK3PXP"),
    ("totp_seed: MFRGGZDFMZTWQ2LK", "MFRGGZDFMZTWQ2LK"),
])
def test_a_base32_totp_seed_is_redacted(text: str, seed: str) -> None:
    assert not _leaks(text, seed)


#: The thirty commonest letter pairs of English (docs/observers.md): a run holding three or more,
#: a fifth of its pairs, reads as words.
_ENGLISH_PAIRS = {"TH", "HE", "IN", "ER", "AN", "RE", "ON", "AT", "EN", "ND", "TI", "ES", "OR", "TE", "ED", "IS", "IT",
                  "AL", "AR", "ST", "TO", "NT", "NG", "SE", "HA", "OU", "IO", "LE", "VE", "RO"}


def _wordy(seed: str) -> bool:
    common = sum(seed[i:i + 2] in _ENGLISH_PAIRS for i in range(len(seed) - 1))
    return common >= 3 and common * 5 >= len(seed) - 1


def _ordered(seed: str) -> bool:
    return any(all(_BASE32.find(seed[i + k]) + 1 == _BASE32.find(seed[i + k + 1]) for k in range(4))
               for i in range(len(seed) - 4))


@st.composite
def _seeds(draw: st.DrawFn) -> tuple[str, str]:
    size = draw(st.sampled_from([16, 26, 32]))
    # The documented bounds of a seed (docs/observers.md): a digit, 3/8 of its characters distinct,
    # no five in the alphabet's order, no group of four all digits, not reading as words.
    seed = draw(st.text(alphabet=_BASE32, min_size=size, max_size=size).filter(
        lambda s: any(c.isdigit() for c in s) and len(set(s)) >= size * 3 // 8 and not _ordered(s)
        and not any(s[i:i + 4].isdigit() for i in range(0, size, 4)) and not _wordy(s)))
    shape = draw(st.sampled_from(["bare", "grouped", "lower grouped", "otpauth", "named"]))
    if shape == "grouped" or shape == "lower grouped":
        written = " ".join(seed[i:i + 4] for i in range(0, size, 4))
        written = written.lower() if shape == "lower grouped" else written
        part = written[5:14]
    elif shape == "otpauth":
        part = seed.lower() if draw(st.booleans()) else seed
        written = f"otpauth://totp/Acme:bob%40acme.io?secret={part}&issuer=Acme&digits=6"
    elif shape == "named":
        name = draw(st.sampled_from(["totp_secret", "MFA_SEED", "otpSecret", "2fa key", "TOTP seed"]))
        spelled = seed.lower() if draw(st.booleans()) else seed
        written, part = f"{name}: {spelled}", spelled[3:14]
    else:
        written, part = seed, seed
    before = draw(st.sampled_from(["", "key ", "(", "'", '"', "seed=", "Use ", "\n"]))
    after = draw(st.sampled_from(["", " ", ")", "'", '"', ".", ",", "\n"]))
    return draw(_BEFORE) + before + written + after + draw(_AFTER), part


@fuzz_timeout
@given(_seeds())
def test_any_base32_totp_seed_is_redacted(case: tuple[str, str]) -> None:
    text, part = case
    assert not _leaks(text, part), (text, redact_text(text))


@pytest.mark.parametrize("text", [
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", "INTERNATIONALIZE", "READMEFIRSTPLEASE2", "HTTP2SERVERPUSHES",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG", "ERROR CODE 2345 SEE DOCS FOR MORE INFO", "AES256GCMSHA384",
    "TLS_AES_256_GCM_SHA384", "CONFIGURATION2", "RFC4648 SECTION 6", "UTF8 ASCII LATIN1 CP1252",
    "Serial: ABCD-EFGH-2345-WXYZ", "have some more time", "deadbeefcafebabe", "VERYLONGUPPERCASEIDENTIFIER",
])
def test_ordinary_upper_case_text_is_no_totp_seed(text: str) -> None:
    assert redact_text(text) == (text, [])


@pytest.mark.parametrize(("size", "most_missed"), [(16, 0.08), (26, 0.02), (32, 0.005)])
@pytest.mark.parametrize("shape", ["bare", "grouped", "lower grouped"])
def test_few_random_seeds_are_missed(size: int, most_missed: float, shape: str) -> None:
    # Seeds as an authenticator's server makes them (random base32), a fixed sample of 1,000: the
    # bounds that keep upper-case words out miss a few (docs/observers.md gives the rates).
    rng = random.Random(39)
    missed = 0
    for _ in range(1_000):
        seed = "".join(rng.choice(_BASE32) for _ in range(size))
        written = seed if shape == "bare" else " ".join(seed[i:i + 4] for i in range(0, size, 4))
        written = written.lower() if shape == "lower grouped" else written
        out, kinds = redact_text(f"key {written} done")
        missed += "totp seed" not in kinds
        assert kinds or out == f"key {written} done"
    assert missed / 1_000 <= most_missed


@pytest.mark.timeout(30)
@pytest.mark.parametrize("filler", [
    "printf %s ", "echo x | ", "h:5432:d:u:", "a\\:", "lftp -u a,", "--db-pass ", "-pw ", "secret_hex_key_",
    "JBSW ", "jbsw y3dp ", "totp seed ", "MFRGGZDF", "<Password value=", "mysql -p'",
])
def test_the_new_rules_stay_linear(filler: str) -> None:
    redact_text(filler * (200_000 // len(filler)))


def test_a_seed_split_across_list_items_is_found_in_groups_not_glued() -> None:
    out, kinds = redact(["otp", "JBSW", "Y3DP", "EHPK", "3PXP"])
    assert out[0] == "otp" and all(item == "[redacted: totp seed]" for item in out[1:]) and kinds
    assert redact(["H2", "H3", "H4", "H5", "H6", "H7", "A2", "B3"]) == (["H2", "H3", "H4", "H5", "H6", "H7", "A2", "B3"], [])
