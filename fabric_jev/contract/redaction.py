"""Credential redaction applied before text leaves the host (contract §8, §9).

One rule set, used identically for observer payloads, approval evidence and
assertion artifacts. Defense in depth, not a guarantee: keys that name
secrets have their values replaced, and text that looks like a credential is
replaced by a marker that names its kind (`[redacted: bearer token]`), so a
classifier can still see that a credential was there without receiving it.

The rules follow the plugin families of a well-kept secret scanner
(detect-secrets): private keys, cloud and service tokens with a known shape
(AWS, GitHub, GitLab, Slack, Stripe, Google, npm, PyPI, SendGrid, Twilio,
Telegram, Discord, Mailchimp, Square, Azure), JWTs, credentials in URLs and
headers, keyword assignments (`password=…`, `"DB_PASS": …`), passwords on
command lines (`mysql -pPASSWORD`, `sshpass -p`, `curl -u user:pass`) and
high-entropy strings. The patterns run on RE2, whose matching time is linear
in the text whatever the input: hostile text cannot make redaction slow.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import re2

#: Keys whose whole normalised name ends with one of these name a secret.
_SECRET_KEY_SUFFIXES = ("password", "passwd", "passphrase", "secret", "token", "authorization",
                        "cookie", "apikey", "privatekey", "clientsecret", "accesskey", "secretkey",
                        "accountkey", "authkey", "sessionid", "credential", "credentials")
#: ...or whose last word is one of these (DB_PASS, MYSQL_PWD; not "bypass").
_SECRET_LAST_WORDS = frozenset({"pass", "pwd", "pw", "auth"})
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
MAX_DEPTH = 64


def is_secret_key(key: str) -> bool:
    """password, db_password, X-Api-Key, client_secret, accessToken, DB_PASS, ... (suffixes included)."""
    norm = re.sub(r"[^a-z0-9]", "", key.lower())
    if any(norm.endswith(w) for w in _SECRET_KEY_SUFFIXES):
        return True
    words = _WORDS.findall(key)
    return bool(words) and words[-1].lower() in _SECRET_LAST_WORDS


def marker(kind: str) -> str:
    return f"[redacted: {kind}]"


_BASE64_MARKER = "[omitted base64]"
_KEYWORDS = (r"(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|auth[_-]?key|"
             r"private[_-]?key|client[_-]?secret|access[_-]?key|secret[_-]?access[_-]?key|"
             r"secret[_-]?key|account[_-]?key|credentials?|cookie|[_.-]pass|[_.-]pw)")
# A value in quotes (spaces allowed) or a bare word; `\\?` lets the rule see
# through JSON that was itself escaped into a string.
_VALUE = r"""(?:\\?["'](?P<q>[^"'\n\\]{3,})|(?P<s>[^\s"'`,;{}()\[\]\\<>]{3,}))"""


class _Rule:
    """One pattern; the named groups `s` / `q` (whichever took part) hold the secret."""

    def __init__(self, kind: str, pattern: str, *, check: Callable[[str], bool] | None = None,
                 replacement: str | None = None) -> None:
        self.kind = kind
        self.pattern = re2.compile(pattern)
        self.groups = [self.pattern.groupindex[g] for g in ("s", "q") if g in self.pattern.groupindex]
        self.check = check
        self.replacement = replacement or marker(kind)


def _is_entropic(token: str) -> bool:
    """Random-looking: mixed case and digits, and many distinct symbols per character."""
    if not (any(c.isupper() for c in token) and any(c.islower() for c in token)
            and any(c.isdigit() for c in token)):
        return False
    counts = Counter(token)
    n = len(token)
    entropy = -sum(c / n * math.log2(c / n) for c in counts.values())
    return entropy >= 3.5


def _not_placeholder(value: str) -> bool:
    return value.lower() not in {"null", "none", "true", "false", "undefined", "nil", "***", "****"}


# Order matters: multi-line keys, header lines and URLs before the bare token
# shapes they contain; keyword assignments before the generic entropy rule.
_RULES: tuple[_Rule, ...] = (
    _Rule("private key", r"(?P<s>-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
                         r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\z))"),
    _Rule("private key", r"(?P<s>PuTTY-User-Key-File-\d+:[\s\S]*?(?:Private-MAC: *[0-9a-fA-F]+|\z))"),
    _Rule("authorization header", r"(?im)^\s*(?:proxy-)?authorization\s*:\s*(?P<s>\S.*)$"),
    _Rule("cookie header", r"(?im)^\s*(?:set-)?cookie\s*:\s*(?P<s>\S.*)$"),
    _Rule("url credentials",
          r"(?i)(?:^|[^a-z0-9+.-])[a-z][a-z0-9+.-]{0,30}://(?P<s>[^\s/:@]*:[^\s/@]+)@"),
    _Rule("slack webhook", r"(?P<s>https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/+-]+)"),
    _Rule("bearer token", r"(?i)\bbearer\s+(?P<s>[A-Za-z0-9\-._~+/]{8,}=*)"),
    _Rule("basic credentials", r"(?i)\bbasic\s+(?P<s>[A-Za-z0-9+/]{8,}={0,2})"),
    _Rule("jwt", r"(?P<s>\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*)"),
    _Rule("aws access key id",
          r"(?P<s>\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16})\b"),
    _Rule("github token", r"(?P<s>\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,})"),
    _Rule("gitlab token", r"(?P<s>\bgl(?:pat|dt|rt|ptt|cbt|soat)-[A-Za-z0-9_-]{20,})"),
    _Rule("slack token", r"(?P<s>\bxox[abposr]-[A-Za-z0-9-]{10,})"),
    _Rule("api key", r"(?P<s>\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}|\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,})"),
    _Rule("google api key", r"(?P<s>\bAIza[0-9A-Za-z_-]{35})"),
    _Rule("npm token", r"(?P<s>\bnpm_[A-Za-z0-9]{36})"),
    _Rule("pypi token", r"(?P<s>\bpypi-AgE[A-Za-z0-9_-]{40,})"),
    _Rule("sendgrid key", r"(?P<s>\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,})"),
    _Rule("twilio key", r"(?P<s>\b(?:AC|SK)[0-9a-f]{32})\b"),
    _Rule("telegram bot token", r"(?P<s>\b[0-9]{8,10}:AA[0-9A-Za-z_-]{33})"),
    _Rule("discord bot token", r"(?P<s>\b[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,})"),
    _Rule("mailchimp key", r"(?P<s>\b[0-9a-f]{32}-us[0-9]{1,2})\b"),
    _Rule("square token", r"(?P<s>\bsq0(?:atp|csp|idp)-[0-9A-Za-z_-]{22,})"),
    # Passwords on command lines: `mysql -pSECRET`, `sshpass -p SECRET`, `curl -u user:pass`,
    # `redis-cli -a SECRET`, `--password SECRET`.
    _Rule("command-line password",
          r"(?i)\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mysqlpump|mariadb|"
          r"mariadb-dump)\b[^\n|;&]*?\s-p(?P<s>[^\s'\"]+)"),
    _Rule("command-line password", r"(?i)\bsshpass\s+-p\s*['\"]?(?P<s>[^\s'\"]+)"),
    _Rule("command-line password", r"(?i)\bredis-cli\b[^\n|;&]*?\s-a\s+['\"]?(?P<s>[^\s'\"]+)"),
    _Rule("command-line password",
          r"(?i)\b(?:curl|wget)\b[^\n|;&]*?\s(?:-u|--user|--http-password|--password)[ =]\s*['\"]?"
          r"(?P<s>[^\s'\"]+)"),
    _Rule("command-line password",
          r"(?i)(?:^|\s)--?[a-z0-9-]*(?:password|passwd|passphrase|token|secret|api-key|apikey)\s+"
          r"(?P<s>[^\s'\"-][^\s'\"]*)"),
    _Rule("secret assignment",
          r"(?i)(?:^|[^A-Za-z0-9_.-])\\?[\"']?[A-Za-z0-9_.-]*?" + _KEYWORDS +
          r"(?:[_-]?(?:key|value|b64|base64|base|hash|str|string|text|data|bytes|file_content))?"
          r"\\?[\"']?\s*(?::=|=>|=|:)\s*" + _VALUE,
          check=_not_placeholder),
    _Rule("azure storage key", r"(?i)\bAccountKey=(?P<s>[A-Za-z0-9+/=]{20,})"),
    _Rule("base64 data", r"(?P<s>(?:[A-Za-z0-9+/]{4}){40,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)",
          replacement=_BASE64_MARKER),
    _Rule("high-entropy string", r"(?P<s>[A-Za-z0-9+/_=-]{20,})", check=_is_entropic),
)


_MARKER_OPEN = "[redacted: "
_MARKER_MAX = 80  # longer than any marker this module writes for a text rule


def _inside_marker(text: str, at: int) -> bool:
    """A marker left by an earlier rule (or pass) is never redacted again.

    Only a short window before `at` is searched, so the check stays constant-time.
    """
    lo = max(0, at - _MARKER_MAX)
    opened = text.rfind(_MARKER_OPEN, lo, at + len(_MARKER_OPEN))
    return 0 <= opened <= at and text.find("]", opened, at + 1) < 0


# One pass over the text with every rule at once: most text holds no secret,
# and RE2 answers "does any rule match?" in a single linear scan.
_ANY = re2.compile("|".join(f"(?:{re.sub(r'[(][?]P<[a-z]+>', '(?:', r.pattern.pattern)})" for r in _RULES))


def redact_text(text: str) -> tuple[str, list[str]]:
    """Return the text with credentials replaced, and the kinds that were found."""
    kinds: list[str] = []
    if _ANY.search(text) is None:
        return text, kinds
    for rule in _RULES:
        def replace(m: Any, rule: _Rule = rule) -> str:
            for group in rule.groups:
                start, end = m.span(group)
                if start < 0:
                    continue
                secret = m.group(group)
                if _inside_marker(m.string, start) or secret == _BASE64_MARKER \
                        or (rule.check is not None and not rule.check(secret)):
                    return str(m.group(0))
                kinds.append(rule.kind)
                whole_start = m.start()
                whole = m.group(0)
                return str(whole[: start - whole_start] + rule.replacement + whole[end - whole_start:])
            return str(m.group(0))

        text = rule.pattern.sub(replace, text)
    return text, kinds


def redact(value: Any) -> tuple[Any, list[str]]:
    """Redact a JSON value: secret-named keys lose their values; strings are scanned.

    Raises ValueError for a cyclic value or one nested deeper than 64 levels:
    callers turn that into their own refusal rather than recursing forever.
    """
    kinds: list[str] = []
    path: set[int] = set()

    def walk(v: Any, key: str | None, depth: int) -> Any:
        if key is not None and is_secret_key(key) and v not in (None, "", [], {}):
            kinds.append(f"{key} value")
            return marker(f"{key} value")
        if isinstance(v, str):
            out, found = redact_text(v)
            kinds.extend(found)
            return out
        if isinstance(v, list | tuple | dict):
            if depth >= MAX_DEPTH:
                raise ValueError(f"value nested deeper than {MAX_DEPTH} levels")
            if id(v) in path:
                raise ValueError("value is cyclic")
            path.add(id(v))
            try:
                if isinstance(v, dict):
                    return {k: walk(x, str(k), depth + 1) for k, x in v.items()}
                return [walk(x, None, depth + 1) for x in v]
            finally:
                path.discard(id(v))
        return v

    return walk(value, None, 0), kinds
