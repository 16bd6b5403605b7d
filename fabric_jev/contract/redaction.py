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
command lines (`mysql -pPASSWORD`, `sshpass -p`, `curl -u user:pass`,
`echo PW | docker login --password-stdin`), US social security numbers and
high-entropy strings. The patterns run on RE2, whose matching time is linear
in the text whatever the input: hostile text cannot make redaction slow.

Spellings that hide a secret from a pattern but not from a reader are undone
first (`lookalikes.fold`: percent-encoding, fullwidth and look-alike letters,
soft hyphens and other invisible characters), hex- and base64-encoded text
is decoded and scanned, dictionary keys are scanned like any string, and the
strings of a list are also scanned joined, so a key split across items is
found.
"""

from __future__ import annotations

import binascii
import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import re2

from .lookalikes import fold, needs_folding

#: Keys whose whole normalised name ends with one of these name a secret.
_SECRET_KEY_SUFFIXES = ("password", "passwd", "passphrase", "secret", "token", "authorization",
                        "cookie", "apikey", "privatekey", "clientsecret", "accesskey", "secretkey",
                        "accountkey", "authkey", "sessionid", "credential", "credentials",
                        "privatekeyid")
#: ...or whose last word is one of these (DB_PASS, MYSQL_PWD, user_ssn; not "bypass").
_SECRET_LAST_WORDS = frozenset({"pass", "pwd", "pw", "auth", "ssn"})
#: How a secret's encoding is named after it (secret_hex, tokenB64, password_hash): dropped
#: before the checks above.
_ENCODING_TAIL = re.compile(r"(?:hex|b64|base64|bytes|str|string|value|data|raw|enc|encoded|hash)+$")
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
#: RE2 reads UTF-8, which a lone surrogate (a page's or a JSON escape's) cannot be.
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
MAX_DEPTH = 64


def is_secret_key(key: str) -> bool:
    """password, db_password, X-Api-Key, client_secret, accessToken, DB_PASS, secret_hex, ...

    Look-alike spellings (fullwidth, Cyrillic letters, a soft hyphen inside) count as the word.
    """
    key = fold(key)
    norm = re.sub(r"[^a-z0-9]", "", key.lower())
    bare = _ENCODING_TAIL.sub("", norm) or norm
    if any(n.endswith(w) for n in (norm, bare) for w in _SECRET_KEY_SUFFIXES):
        return True
    words = [w.lower() for w in _WORDS.findall(key)]
    while len(words) > 1 and _ENCODING_TAIL.fullmatch(words[-1]):
        words.pop()
    return bool(words) and words[-1] in _SECRET_LAST_WORDS


def marker(kind: str) -> str:
    return f"[redacted: {kind}]"


_BASE64_MARKER = "[omitted base64]"
_KEYWORDS = (r"(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|auth[_-]?key|"
             r"private[_-]?key(?:[_-]?id)?|client[_-]?secret|access[_-]?key|secret[_-]?access[_-]?key|"
             r"secret[_-]?key|account[_-]?key|credentials?|cookie|ssn|[_.-]pass|[_.-]pw)")
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


def _not_a_variable(value: str) -> bool:
    return not value.startswith("$")


def _is_ssn(value: str) -> bool:
    """Issued-looking: area not 000, 666 or 9xx; group not 00; serial not 0000."""
    area, group, serial = value.split("-")
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


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
    # `echo PW | docker login --password-stdin` (podman, helm, ... alike), and a here-string.
    _Rule("command-line password",
          r"(?i)\b(?:echo|printf)\s+(?:-[a-z]+\s+)*(?:['\"]%s(?:\\n)?['\"]\s+)?['\"]?(?P<s>[^\s'\"|;&]+)['\"]?"
          r"\s*\|[^\n|;&]*--password-stdin", check=_not_a_variable),
    _Rule("command-line password", r"(?i)--password-stdin\s*<<<\s*['\"]?(?P<s>[^\s'\"]+)",
          check=_not_a_variable),
    _Rule("secret assignment",
          r"(?i)(?:^|[^A-Za-z0-9_.-])\\?[\"']?[A-Za-z0-9_.-]*?" + _KEYWORDS +
          r"(?:[_-]?(?:key|value|b64|base64|base|hash|hex|str|string|text|data|bytes|file_content))?"
          r"\\?[\"']?\s*(?::=|=>|=|:)\s*" + _VALUE,
          check=_not_placeholder),
    _Rule("azure storage key", r"(?i)\bAccountKey=(?P<s>[A-Za-z0-9+/=]{20,})"),
    _Rule("social security number", r"\b(?P<s>[0-9]{3}-[0-9]{2}-[0-9]{4})\b", check=_is_ssn),
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


#: Runs that may hold an encoded secret: hex (32+ digits) or base64 / base64url (20+).
#: Every such run also matches `_ANY` (the high-entropy rule's character class), so
#: text that `_ANY` passes over holds none.
_ENCODED = re2.compile(r"[A-Za-z0-9+/_-]{20,}={0,2}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2}){16,}")
#: Decoding nests at most this deep (hex of base64 of a token): each layer is shorter.
_DECODE_DEPTH = 2
#: Rules that do not look across list items: joined short strings are not random keys.
_NOT_ACROSS_ITEMS = frozenset({"base64 data", "high-entropy string"})


def _decoded(run: str) -> tuple[str, str] | None:
    """("hex" | "base64", the printable text a run encodes), or None when it encodes none."""
    if _HEX.fullmatch(run):
        how, raw = "hex", bytes.fromhex(run)
    else:
        body = run.rstrip("=")
        urlsafe = "-" in body or "_" in body
        if len(body) % 4 == 1 or (urlsafe and ("+" in body or "/" in body)):
            return None
        try:
            raw = binascii.a2b_base64((body.replace("-", "+").replace("_", "/") if urlsafe else body)
                                      + "=" * (-len(body) % 4), strict_mode=True)
        except binascii.Error:
            return None
        how = "base64"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return (how, text) if text.replace("\n", " ").replace("\t", " ").replace("\r", " ").isprintable() else None


def _apply_rules(text: str, kinds: list[str], rules: tuple[_Rule, ...] = _RULES) -> str:
    for rule in rules:
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
    return text


def _scan(text: str, kinds: list[str], depth: int = 0) -> str:
    """The rules, then hex and base64 runs decoded and scanned (a run hiding a secret goes whole)."""
    if _ANY.search(text) is None:
        return text
    text = _apply_rules(text, kinds)
    if depth >= _DECODE_DEPTH:
        return text

    def replace(m: Any) -> str:
        run = str(m.group(0))
        if _inside_marker(m.string, m.start()):
            return run
        decoded = _decoded(run)
        if decoded is None:
            return run
        found: list[str] = []
        _scan(fold(decoded[1]), found, depth + 1)
        if not found:
            return run
        kind = f"{decoded[0]}-encoded {found[0]}"
        kinds.append(kind)
        return marker(kind)

    return str(_ENCODED.sub(replace, text))


def redact_text(text: str) -> tuple[str, list[str]]:
    """Return the text with credentials replaced, and the kinds that were found.

    Text without a secret comes back unchanged, but for lone surrogates, which
    become U+FFFD (nothing could print or encode them). When a secret shows only
    once the text is folded (percent-encoding, look-alike letters, invisible
    characters), the folded text comes back, redacted.
    """
    kinds: list[str] = []
    if not text.isascii() and _LONE_SURROGATE.search(text):
        text = _LONE_SURROGATE.sub("\ufffd", text)
    out = _scan(text, kinds)
    if needs_folding(out):
        folded = fold(out)
        if folded != out:
            more: list[str] = []
            again = _scan(folded, more)
            if more:
                return again, kinds + more
    return out, kinds


def _across_items(items: list[Any], out: list[Any], kinds: list[str]) -> None:
    """Redact, in `out` (the items redacted one by one), what a secret spans only joined.

    `["sk-proj-", "abcdefghijklmnopqrstuvwx", "yz"]` holds a key that no single
    item shows. Each run of consecutive strings of `items` (as written: an item
    already redacted alone may hold the head of a key whose tail is the next
    one) is joined without a separator and with a space; where a match spans
    items, the items its secret touches are replaced.
    """
    runs: list[list[int]] = [[]]
    for i, item in enumerate(items):
        if isinstance(item, str):
            runs[-1].append(i)
        elif runs[-1]:
            runs.append([])
    hit: dict[int, str] = {}
    for run in runs:
        if len(run) < 2:
            continue
        for sep in ("", " "):
            spans, at = [], 0
            for i in run:
                if items[i]:
                    spans.append((i, at, at + len(items[i])))
                at += len(items[i]) + len(sep)
            # U+FFFD for a lone surrogate (RE2 reads UTF-8) keeps every offset where it was.
            joined = _LONE_SURROGATE.sub("\ufffd", sep.join(items[i] for i in run))
            if _ANY.search(joined) is None:
                continue
            for rule in _RULES:
                if rule.kind in _NOT_ACROSS_ITEMS:
                    continue
                for m in rule.pattern.finditer(joined):
                    whole = m.span()
                    if sum(lo < whole[1] and hi > whole[0] for _, lo, hi in spans) < 2:
                        continue  # one item shows it: that item's own scan decides
                    for group in rule.groups:
                        start, end = m.span(group)
                        if start < 0 or _inside_marker(joined, start) \
                                or (rule.check is not None and not rule.check(m.group(group))):
                            continue
                        for i, lo, hi in spans:
                            if lo < end and hi > start:
                                hit.setdefault(i, rule.kind)
    for i, kind in sorted(hit.items()):
        kinds.append(kind)
        out[i] = marker(kind)


def _unique(key: str, taken: dict[Any, Any]) -> str:
    """A redacted key that does not overwrite another: `[redacted: github token] #2`."""
    if key not in taken:
        return key
    n = 2
    while f"{key} #{n}" in taken:
        n += 1
    return f"{key} #{n}"


def redact(value: Any) -> tuple[Any, list[str]]:
    """Redact a JSON value: keys and strings are scanned; secret-named keys lose their values.

    Raises ValueError for a cyclic value or one nested deeper than 64 levels:
    callers turn that into their own refusal rather than recursing forever.
    """
    kinds: list[str] = []
    path: set[int] = set()

    def walk(v: Any, key: str | None, shown_key: str, depth: int) -> Any:
        if key is not None and is_secret_key(key) and v not in (None, "", [], {}):
            kinds.append(f"{shown_key} value")
            return marker(f"{shown_key} value")
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
                    out_dict: dict[Any, Any] = {}
                    for k, x in v.items():
                        name = str(k)
                        shown, found = redact_text(name)
                        kinds.extend(found)
                        new_key: Any = k if shown == name else _unique(shown, out_dict)
                        if new_key in out_dict:
                            new_key = _unique(str(new_key), out_dict)
                        out_dict[new_key] = walk(x, name, shown, depth + 1)
                    return out_dict
                items = [walk(x, None, "", depth + 1) for x in v]
                _across_items(list(v), items, kinds)
                return items
            finally:
                path.discard(id(v))
        return v

    return walk(value, None, "", 0), kinds
