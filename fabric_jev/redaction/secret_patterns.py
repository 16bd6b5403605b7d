"""The text rules of redaction: what a credential looks like in text (contract §8). Pure code.

Each rule is one RE2 pattern (linear time whatever the input) whose named
group `s`, `q`, `d`, `t` or `u` (bare, single-quoted, double-quoted, ...:
whichever took part) holds the secret, and which may name the secret's name in group `n`
(then the rule applies only when the name says secret, `is_secret_key`).
Vendor token shapes come from kept rule sets (`vendor_rules`), not from here.
"""

from __future__ import annotations

import base64
import binascii
import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import re2

from . import vendor_rules
from .secret_names import is_secret_key
from .vendor_rules import VendorRule

BASE64_MARKER = "[omitted base64]"


def marker(kind: str) -> str:
    return f"[redacted: {kind}]"


_KEYWORDS = (r"(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|auth[_-]?key|"
             r"private[_-]?key(?:[_-]?id)?|client[_-]?secret|access[_-]?key|secret[_-]?access[_-]?key|"
             r"secret[_-]?key|account[_-]?key|credentials?|cookie|ssn|[_.-]pass|[_.-]pw)")
#: Words naming how a secret is written, after its name (secret_hex, token_b64, secretHexValue,
#: SIGNING_SECRET_HEX_STRING): up to three of them.
_NAME_TAIL = r"(?:[_-]?(?:key|value|b64|base64|base|hash|hex|str|string|text|data|bytes|file_content)){0,3}"
# A value in quotes (spaces allowed) or a bare word; `\\?` lets the rule see
# through JSON that was itself escaped into a string.
_VALUE = r"""(?:\\?["'](?P<q>[^"'\n\\]{3,})|(?P<s>[^\s"'`,;{}()\[\]\\<>]{3,}))"""


def _arg(bare: str = r"[^\s'\"|;&<>`-][^\s'\"|;&<>`]*") -> str:
    """One shell argument: quoted (spaces allowed) or bare (by default not an option, `-x`)."""
    return rf"""(?:'(?P<q>[^'\n]+)'|"(?P<d>[^"\n]+)"|(?P<s>{bare}))"""


_ARG = _arg()
_ATTACHED = _arg(r"[^\s'\"|;&<>`]+")  # glued to its option: `-pSECRET`, which may start with `-`
_WINDOWS_ARG = _arg(r"[^\s/*'\"|;&<>`][^\s'\"|;&<>`]*")  # not `/switch`, not `*` (prompt)
_QUOTED = r"""(?:'(?P<q>[^'\n]+)'|"(?P<d>[^"\n]+)")"""


def _command(names: str, option: str) -> Rule:
    """A password given by `option` to one of the commands `names`: each such option of the
    command (same line, before a pipe or `;`), not only its first."""
    segment = rf"\b(?i:{names})(?:\.exe)?\b[^\n|;&]*"
    return Rule("command-line password", rf"\b(?i:{names})(?:\.exe)?\b[^\n|;&]*?\s{option}",
                segment=segment, inner=rf"\s{option}")


class Rule:
    """One pattern; the first group of `groups` that took part (and is not empty) holds the secret."""

    def __init__(self, kind: str, pattern: str | Any, *, check: Callable[[str], bool] | None = None,
                 replacement: str | None = None, groups: list[int] | None = None,
                 segment: str | None = None, inner: str | None = None, code_is_no_value: bool = False,
                 match_check: Callable[[Any], bool] | None = None) -> None:
        self.kind = kind
        self.code_is_no_value = code_is_no_value
        self.match_check = match_check
        # Patterns compile on first use: most text holds no secret, and most rules never run.
        self.source: str = pattern if isinstance(pattern, str) else pattern.pattern
        self._compiled = None if isinstance(pattern, str) else pattern
        # A rule with a segment finds each stretch of text it applies to (a command line),
        # then every match of `inner` inside it: one pass each, so still linear.
        self._segment, self._inner = segment, inner
        self._groups = groups
        self.check = check
        self.replacement = replacement or marker(kind)

    @functools.cached_property
    def pattern(self) -> Any:
        return self._compiled if self._compiled is not None else re2.compile(self.source)

    @functools.cached_property
    def segment(self) -> Any:
        return re2.compile(self._segment) if self._segment is not None else None

    @functools.cached_property
    def inner(self) -> Any:
        return re2.compile(self._inner) if self._inner is not None else self.pattern

    @functools.cached_property
    def groups(self) -> list[int]:
        names = self.inner.groupindex
        return self._groups if self._groups is not None else [names[g] for g in ("s", "q", "d", "t", "u")
                                                              if g in names]

    @functools.cached_property
    def name_group(self) -> int | None:
        found: int | None = self.inner.groupindex.get("n")
        return found

    def finditer(self, text: str) -> Iterator[tuple[Any, int, int]]:
        """Each match, with the offset in `text` of the string it was found in, and where in
        `text` what the match stands on starts (its segment's start: `mongo` of `mongo … -p x`)."""
        if self.segment is None:
            for m in self.pattern.finditer(text):
                yield m, 0, m.start()
            return
        for seg in self.segment.finditer(text):
            for m in self.inner.finditer(seg.group(0)):
                yield m, seg.start(), seg.start()

    def sub(self, replace: Callable[[Any], str], text: str) -> str:
        if self.segment is None:
            return str(self.pattern.sub(replace, text))
        inner = self.inner
        return str(self.segment.sub(lambda seg: inner.sub(replace, seg.group(0)), text))

    def refuses(self, m: Any, group: int) -> bool:
        """Whether this match is no secret after all: a name that does not say secret, code
        where a value would be, or the rule's check."""
        if self.name_group is not None and not is_secret_key(m.group(self.name_group) or ""):
            return True
        if self.code_is_no_value and _is_code(m, group):
            return True
        if self.match_check is not None and not self.match_check(m):
            return True
        return self.check is not None and not self.check(m.group(group))

    @classmethod
    def from_vendor(cls, rule: VendorRule) -> Rule:
        pattern = rule.pattern
        groups = [rule.secret_group] if rule.secret_group is not None \
            else [*range(1, pattern.groups + 1), 0]
        allowed = rule.allowed
        return cls(rule.kind, pattern, groups=groups,
                   check=None if allowed is None else (lambda s: allowed.search(s) is None))


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
    """Not a placeholder (`null`, `***`) and not a relative or home path (`./db-password.txt`)."""
    return value.lower() not in {"null", "none", "true", "false", "undefined", "nil", "***", "****"} \
        and not value.startswith(("./", "../", "~/"))


_IDENTIFIER_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def _is_code(m: Any, group: int) -> bool:
    """`password = getpass.getpass(…)`, `token = os.environ[…]`: a name called or indexed is code."""
    end = m.end(group)
    return m.string[end:end + 1] in ("(", "[") and _IDENTIFIER_PATH.fullmatch(m.group(group)) is not None


_NEGATED_OPTION = re.compile(r"\s*--?no-", re.IGNORECASE)


def _not_a_negation(m: Any) -> bool:
    """`--no-password now`: an option that turns the password off takes no value."""
    return _NEGATED_OPTION.match(m.group(0)) is None


def _not_a_variable(value: str) -> bool:
    return not value.startswith("$")


def _is_ssn(value: str) -> bool:
    """Issued-looking: area not 000, 666 or 9xx; group not 00; serial not 0000."""
    area, group, serial = value.split("-")
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def _is_basic_credentials(value: str) -> bool:
    """`Basic <base64 of user:password>`: the word "basic" before an ordinary word is not one."""
    body = value.rstrip("=")
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in raw


#: The lengths of a TOTP seed in base32: 80, 128 and 160 bits (RFC 4226 asks 128 at least, 160
#: recommended; authenticator apps show 16 or 32 characters).
_SEED_LENGTHS = frozenset({16, 26, 32})
_SEED_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def _ascending_run(text: str, most: int = 5) -> bool:
    """Whether `most` characters in a row follow the base32 alphabet's order (`ABCDEFGH`, `234567`)."""
    run = 1
    for a, b in itertools.pairwise(text):
        i, j = _SEED_ALPHABET.find(a), _SEED_ALPHABET.find(b)
        run = run + 1 if i >= 0 and j == i + 1 else 1
        if run >= most:
            return True
    return False


#: The thirty commonest letter pairs of English text: a random seed holds few of them (each pair
#: of letters is one of these 1 time in 23), words many (`PENDINGAPPROVAL2` holds six).
_ENGLISH_PAIRS = frozenset(("TH", "HE", "IN", "ER", "AN", "RE", "ON", "AT", "EN", "ND", "TI", "ES", "OR", "TE",
                           "ED", "IS", "IT", "AL", "AR", "ST", "TO", "NT", "NG", "SE", "HA", "OU", "IO", "LE",
                           "VE", "RO"))


def _reads_as_words(body: str) -> bool:
    """Whether a run reads like words: three or more common English letter pairs, a fifth of its pairs."""
    pairs = [body[i:i + 2] for i in range(len(body) - 1)]
    common = sum(p in _ENGLISH_PAIRS for p in pairs)
    return common >= 3 and common * 5 >= len(pairs)


def _is_seed(value: str, *, named: bool = False) -> bool:
    """A base32 TOTP seed: 16, 26 or 32 characters (spaces aside) of A–Z and 2–7 that look random.

    Random means many distinct characters (three eighths of the length at least: 6 of 16), no
    run of five in the alphabet's order (the alphabet itself is no seed), a digit (upper-case
    words hold none, and a random 16-character seed holds one 96 times in 100) and no group of
    four all digits in a run of four groups (`ROOM 2345 WING EAST`), and it does not read as words (`IPV6ADDRESSESARE`).
    After a name that says one-time code (`named`), a single run of capitals needs no digit.
    """
    groups = value.rstrip("=").split()
    body = "".join(groups).upper()
    if len(body) not in _SEED_LENGTHS or len(set(body)) < len(body) * 3 // 8 or _ascending_run(body) \
            or _reads_as_words(body):
        return False
    if named and len(groups) == 1 and groups[0].isupper():
        return True
    all_digits = len(groups) == 4 and any(g.isdigit() for g in groups)
    return any(c.isdigit() for c in body) and not all_digits


def _grouped(letters: str) -> str:
    """A seed of 32, 26 or 16 characters in groups of four (the last of 26 a group of two), in that
    order: a word after it (`… 3pxp done`) is not taken into it."""
    c = f"[{letters}2-7]"
    return f"{c}{{4}}(?: {c}{{4}}){{7}}|{c}{{4}}(?: {c}{{4}}){{5}} {c}{{2}}|{c}{{4}}(?: {c}{{4}}){{3}}"


def _is_named_seed(value: str) -> bool:
    return _is_seed(value, named=True)


_PORT = re.compile(r"\d{1,5}[/\s?#]")  # a port (at most 65535) before a path


def _userinfo_password(value: str) -> bool:
    """`user:password` of a URL, not `host:8080/path` before an `@` further on."""
    password = value.split(":", 1)[1] if ":" in value else value
    return _PORT.match(password) is None and "://" not in value


def _token_user(value: str) -> bool:
    """A URL's user that is a token (`https://<40 hex>@github.com`), not a person's name."""
    return len(value) >= 32 or any(c.isdigit() for c in value)


_URL = r"(?i)(?:^|[^a-z0-9+.-])[a-z][a-z0-9+.-]{0,30}://"

# Order matters: multi-line keys, header lines and URLs before the bare token
# shapes they contain; vendor rules (inserted between HEAD and TAIL) before
# keyword assignments; keyword assignments before the generic entropy rule.
HEAD: tuple[Rule, ...] = (
    Rule("private key", r"(?P<s>-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
                        r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\z))"),
    Rule("private key", r"(?P<s>PuTTY-User-Key-File-\d+:[\s\S]*?(?:Private-MAC: *[0-9a-fA-F]+|\z))"),
    Rule("authorization header", r"(?im)^\s*(?:proxy-)?authorization\s*:\s*(?P<s>\S.*)$"),
    Rule("cookie header", r"(?im)^\s*(?:set-)?cookie\s*:\s*(?P<s>\S.*)$"),
    # user:password@ (the password may hold `/`, as AWS secrets in `s3://KEY:SECRET@bucket` do),
    # then one with spaces in it, then a token standing as the user.
    Rule("url credentials", _URL + r"(?P<s>[^\s/:@]*:[^\s@]+)@", check=_userinfo_password),
    Rule("url credentials", _URL + r"(?P<s>[^\s/:@]+:[^@\n]+?)@[A-Za-z0-9.-]+",
         check=_userinfo_password),
    Rule("url credentials", _URL + r"(?P<s>[A-Za-z0-9_~.-]{16,})@[A-Za-z0-9-]+\.", check=_token_user),
    Rule("slack webhook", r"(?P<s>https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/+-]+)"),
    Rule("bearer token", r"(?i)\bbearer\s+(?P<s>[A-Za-z0-9\-._~+/]{8,}=*)"),
    Rule("basic credentials", r"(?i)\bbasic\s+(?P<s>[A-Za-z0-9+/]{8,}={0,2})", check=_is_basic_credentials),
    Rule("jwt", r"(?P<s>\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*)"),
    Rule("aws access key id",
         r"(?P<s>\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16})\b"),
    Rule("github token", r"(?P<s>\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,})"),
    Rule("gitlab token", r"(?P<s>\bgl(?:pat|dt|rt|ptt|cbt|soat)-[A-Za-z0-9_-]{20,})"),
    Rule("slack token", r"(?P<s>\bxox[abposr]-[A-Za-z0-9-]{10,})"),
    Rule("api key", r"(?P<s>\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}|\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,})"),
    Rule("google api key", r"(?P<s>\bAIza[0-9A-Za-z_-]{35})"),
    Rule("npm token", r"(?P<s>\bnpm_[A-Za-z0-9]{36})"),
    Rule("pypi token", r"(?P<s>\bpypi-AgE[A-Za-z0-9_-]{40,})"),
    Rule("sendgrid key", r"(?P<s>\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,})"),
    Rule("twilio key", r"(?P<s>\b(?:AC|SK)[0-9a-f]{32})\b"),
    Rule("telegram bot token", r"(?P<s>\b[0-9]{8,10}:AA[0-9A-Za-z_-]{33})"),
    Rule("discord bot token", r"(?P<s>\b[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,})"),
    Rule("mailchimp key", r"(?P<s>\b[0-9a-f]{32}-us[0-9]{1,2})\b"),
    Rule("square token", r"(?P<s>\bsq0(?:atp|csp|idp)-[0-9A-Za-z_-]{22,})"),
)

_HTPASSWD = (r"\b(?i:htpasswd)\s+(?P<flags>(?:-[A-Za-z]+(?:\s+\d+)?\s+)+)"
             r"""(?:'[^'\n]*'\s+|"[^"\n]*"\s+|[^\s|;&<>'"-][^\s|;&<>'"]*\s+)""")


def _htpasswd_flags(m: Any) -> str:
    return "".join(w[1:] for w in str(m.group("flags")).split() if w.startswith("-"))


def _htpasswd_with_file(m: Any) -> bool:
    flags = _htpasswd_flags(m)
    return "b" in flags and "n" not in flags


def _htpasswd_without_file(m: Any) -> bool:
    flags = _htpasswd_flags(m)
    return "b" in flags and "n" in flags


_PIPED_TO = (r"(?:--password-stdin|--stdin\b|--passphrase-fd|\bsudo\b[^\n|;&]*?\s-[A-Za-z]*S\b|"
             r"\bchpasswd\b|\bkinit\b|-passin\s+(?:stdin|fd:0))")

TAIL: tuple[Rule, ...] = (
    # Passwords on command lines: `mysql -pSECRET`, `sshpass -p SECRET`, `curl -u user:pass`,
    # `redis-cli -a SECRET`, and the clients below, each with its own password option.
    Rule("command-line password",
         r"(?i)\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mysqlpump|mariadb|"
         r"mariadb-dump)\b[^\n|;&]*?\s-p(?:'(?P<q>[^'\n]+)'|\"(?P<d>[^\"\n]+)\"|(?P<s>[^\s'\"]+))"),
    Rule("command-line password", r"(?i)\bsshpass\s+-p\s*['\"]?(?P<s>[^\s'\"]+)"),
    Rule("command-line password", r"(?i)\bredis-cli\b[^\n|;&]*?\s-a\s+['\"]?(?P<s>[^\s'\"]+)"),
    Rule("command-line password",
         r"(?i)\b(?:curl|wget)\b[^\n|;&]*?\s(?:-[a-z]*u|--user|--http-password|--password)[ =]\s*['\"]?"
         r"(?P<s>[^\s'\"]+)"),
    _command(
        "mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport|mongostat|mongotop|mongofiles",
        r"(?:-p|--password)(?:\s+|=)" + _ARG),
    _command("sqlcmd|bcp|osql|isql", r"-P\s*" + _ARG),
    # lftp -u user,password (a comma, not a colon, between them).
    _command("lftp", r"(?:-u|--user)\s+(?:'[^',\n]*,(?P<q>[^'\n]+)'|\"[^\",\n]*,(?P<d>[^\"\n]+)\"|"
                     r"[^\s,'\"|;&<>]*,(?P<s>[^\s'\"|;&<>]+))"),
    _command(r"ldap[a-z]*", r"-w\s*" + _ARG),
    _command("ldappasswd", r"-[as]\s*" + _ARG),
    _command("openssl", r"-[kK]\s+" + _ARG),
    Rule("command-line password",
         r"""(?:'pass:(?P<q>[^'\n]+)'|"pass:(?P<d>[^"\n]+)"|(?:^|[\s=])pass:(?P<s>[^\s'"|;&<>]+))"""),
    _command("7z|7za|7zr|7zz|7zg|rar|unrar|winrar",
             r"""(?:'-p(?P<t>[^'\n]+)'|"-p(?P<u>[^"\n]+)"|-p""" + _ATTACHED + ")"),
    _command("unzip|zip|zipcloak|funzip", r"(?:-P|--password)\s*" + _ARG),
    # smbclient -U user%password (and the Samba tools alike), and its password after the share.
    _command(
        r"smbclient|rpcclient|smbcacls|smbget|smbtree|smbmap|smbcquotas|net|winexe|samba-tool|mount\.cifs",
        r"(?:-U|--user(?:name)?=?|-u)\s*"
        r"""(?:'[^'%\n]*%(?P<q>[^'\n]+)'|"[^"%\n]*%(?P<d>[^"\n]+)"|"""
        r"""[^\s'"%|;&<>]*%(?P<s>[^\s'"|;&<>]+))"""),
    Rule("command-line password", r"\b(?i:smbclient)\s+(?:-\S+\s+)*(?://|\\\\)\S+\s+" + _ARG),
    # htpasswd -b FILE USER PASSWORD, htpasswd -nb USER PASSWORD (-n: no file). The options
    # decide how many words come before the password.
    Rule("command-line password", _HTPASSWD + r"{2}" + _ARG, match_check=_htpasswd_with_file),
    Rule("command-line password", _HTPASSWD + r"{1}" + _ARG, match_check=_htpasswd_without_file),
    _command("ssh-keygen", r"-[NP]\s*" + _ARG),
    # net use \\server\share PASSWORD /user:NAME (or after /user:NAME); net user NAME PASSWORD.
    Rule("command-line password",
         r"(?i)\bnet\s+use\b[^\n|;&]*?(?:\\\\\S+|/user:\S+)\s+" + _WINDOWS_ARG),
    Rule("command-line password", r"""(?i)\bnet\s+user\s+(?:"[^"\n]+"|[^\s"/]+)\s+""" + _WINDOWS_ARG),
    # Any tool's option whose last word names a secret (`--password`, `--client-secret`, `--db-pass`,
    # `-pw`, `--api-key-hex`), its value bare or quoted with spaces; `--x=…` is a secret assignment.
    Rule("command-line password",
         r"(?i)(?:^|\s)--?(?:[a-z0-9-]*(?:password|passwd|passphrase|token|secret|api-key|apikey)|"
         r"(?:[a-z0-9]+[-_])*(?:pass|pwd|pw))"
         r"(?:[-_](?:hex|b64|base64|key|value|string|text))?\s+" + _arg(r"[^\s'\"-][^\s'\"]*"),
         match_check=_not_a_negation),
    # `echo PW | docker login --password-stdin` (podman, helm, ... alike), `| sudo -S`,
    # `| passwd --stdin`, `| chpasswd`; and here-strings.
    Rule("command-line password",
         r"(?i)\b(?:echo|printf)\s+(?:--?[a-z]*\s+)*(?:(?:['\"]%s(?:\\n)?['\"]|%s(?:\\n)?)\s+)?"
         + _arg(r"[^\s'\"|;&]+") + r"\s*\|[^\n|;&]*?" + _PIPED_TO, check=_not_a_variable),
    Rule("command-line password",
         r"(?i)(?:--password-stdin|--stdin\b|\bsudo\b[^\n|;&<]*?\s-[A-Za-z]*S\b[^\n|;&<]*?)\s*<<<\s*"
         + _arg(r"[^\s'\"|;&<>]+"), check=_not_a_variable),
    # .pgpass: HOST:PORT:DATABASE:USER:PASSWORD, `\:` escaping a colon; the port digits or `*`.
    Rule("pgpass password",
         r"(?m)(?:^|[ \t'\"])(?:\*|(?:[^\s:\\]|\\.)*[A-Za-z.](?:[^\s:\\]|\\.)*):(?:[0-9]{1,5}|\*):"
         r"(?:[^\s:\\]|\\.)+:(?:[^\s:\\]|\\.)+:"
         r"(?P<s>(?:[^\s:\\'\"]|\\.){2,})(?:[\s'\"]|$)", check=lambda s: s.strip("*") != ""),
    # .netrc: machine HOST login NAME password SECRET (one line or several).
    Rule("command-line password",
         r"(?i)\b(?:machine\s+\S+|default)(?:\s+(?:login|account|port)\s+\S+)*\s+password\s+" + _ARG),
    Rule("secret assignment",
         r"(?i)(?:^|[^A-Za-z0-9_.$-])\\?[\"']?[A-Za-z0-9_.-]*?" + _KEYWORDS + _NAME_TAIL +
         r"\\?[\"']?\s*(?::=|=>|=|:)\s*" + _VALUE,
         check=_not_placeholder, code_is_no_value=True),
    # A long hex value after a secret's name with no `=` or `:` between: `secret_hex 4f5e…`,
    # `secret_hex | 4f5e…`, `secret_hex` on one line and the value on the next.
    Rule("secret assignment",
         r"(?i)(?:^|[^A-Za-z0-9_.-])\\?[\"']?[A-Za-z0-9_.-]*?" + _KEYWORDS + _NAME_TAIL +
         r"\\?[\"']?(?:\s*[|,>-]+\s*|\s+)\\?[\"']?(?P<s>(?:0x)?[0-9a-fA-F]{32,})\b"),
    # Name/value pairs in text: XML elements and attributes, JSON/YAML objects, CLI options, tuples.
    Rule("secret pair",
         r"<(?:[A-Za-z_][\w.-]*:)?(?P<n>[A-Za-z_][\w.-]*)(?:\s[^<>]*)?>\s*(?P<s>[^<\s][^<]*?)\s*</"),
    Rule("secret pair",  # <Password value="…"/>: the element names the secret, an attribute holds it
         r"<(?:[A-Za-z_][\w.-]*:)?(?P<n>[A-Za-z_][\w.-]*)\s[^<>]*?\b(?i:value)\s*=\s*" + _QUOTED),
    Rule("secret pair",
         r"<[\w:.-]+\s[^<>]*?\b(?i:key|name|id)\s*=\s*[\"'](?P<n>[^\"'<>\n]+)[\"'][^<>]*?"
         r"\b(?i:value)\s*=\s*" + _QUOTED),
    Rule("secret pair",
         r"<[\w:.-]+\s[^<>]*?\b(?i:key|name)\s*=\s*[\"'](?P<n>[^\"'<>\n]+)[\"'][^<>]*>"
         r"\s*(?P<s>[^<\s][^<]*?)\s*</"),
    Rule("secret pair",
         r"""(?i)["']?\b(?:name|key|parameter_?key|parameter_?name|option_?name|variable|header|field|id)"""
         r"""["']?\s*[:=]\s*["']?(?P<n>[^"'\s,;{}\[\]]+)["']?\s*[,;]?\s*"""
         r"""(?:["']?[\w-]+["']?\s*[:=]\s*(?:"[^"\n]*"|'[^'\n]*'|[\w.-]*)\s*[,;]?\s*){0,3}(?:-\s+)?"""
         r"""["']?\b(?:value|val|parameter_?value|option_?value|secret_?value|data|default)["']?\s*[:=]\s*"""
         r"""(?:"(?P<d>[^"\n]+)"|'(?P<q>[^'\n]+)'|(?P<s>[^\s"',;{}\[\]]+))"""),
    Rule("secret pair",
         r"""(?i)["']?\b(?:value|val|parameter_?value|secret_?value)["']?\s*[:=]\s*"""
         r"""(?:"(?P<d>[^"\n]+)"|'(?P<q>[^'\n]+)'|(?P<s>[^\s"',;{}\[\]]+))["']?\s*[,;]?\s*"""
         r"""(?:["']?[\w-]+["']?\s*[:=]\s*(?:"[^"\n]*"|'[^'\n]*'|[\w.-]*)\s*[,;]?\s*){0,3}"""
         r"""["']?\b(?:name|key|parameter_?key|parameter_?name)["']?\s*[:=]\s*["']?(?P<n>[^"'\s,;{}\[\]]+)"""),
    Rule("secret pair",
         r"""(?i)--(?:name|key)[=\s]+["']?(?P<n>[^\s"']+)["']?"""
         r"""(?:\s+--?[\w-]+(?:[=\s]+(?:"[^"\n]*"|'[^'\n]*'|[^\s"'-][^\s"']*))?){0,4}"""
         r"""\s+--(?:value|secret-string|secret-value)[=\s]+""" + _ARG),
    Rule("secret pair",
         r"""[\[(]\s*["'](?P<n>[^"'\n]+)["']\s*,\s*"""
         r"""(?:"(?P<d>[^"\n]+)"|'(?P<q>[^'\n]+)'|(?P<s>[^\s"',\])]+))\s*[\])]"""),
    # SQL: IDENTIFIED BY 'pw', PASSWORD 'pw', SET PASSWORD … = PASSWORD('pw').
    # A bare word after IDENTIFIED BY (Oracle) must end the statement or lead to the next clause:
    # "identified by the patterns" in prose is no password.
    Rule("sql password",
         r"(?im)\bidentified\s+(?:with\s+\S+\s+)?by\s+(?:password\s+)?(?:" + _QUOTED +
         r"|(?P<s>[^\s'\"|;&<>`]+)\s*(?:;|$|\s(?:default|quota|profile|password|account|temporary|container)\b))"),
    Rule("sql password", r"(?i)\bset\s+password\b[^\n;=]*=\s*(?:password\s*\(\s*)?" + _ARG),
    Rule("sql password", r"(?i)(?:^|[^\w'\"$./-])password(?:\s+|\s*=\s*|\s*\(\s*)N?" + _QUOTED),
    # A TOTP seed (base32): after a name that says one-time code, in any case, grouped or not; bare,
    # in upper case (or grouped by four, as authenticator apps show it, in either case).
    Rule("totp seed",
         r"(?i)(?:\b|_)(?:totp|hotp|otp|2fa|mfa|two[-_ ]?factor|authenticator|setup[-_ ]?key)"
         r"(?:[-_ ]?(?:secret|seed|key|code|setup))*[\"']?\s*(?:[:=]|\bis\b)?\s*[\"']?"
         r"(?P<s>[A-Za-z2-7]{16,32}={0,6}|" + _grouped("A-Za-z") + ")"
         r"(?:[^A-Za-z0-9=]|$)", check=_is_named_seed),
    Rule("totp seed", r"(?:^|[^A-Za-z0-9_+/-])(?P<s>[A-Z2-7]{32}|[A-Z2-7]{26}|[A-Z2-7]{16})={0,6}"
                      r"(?:[^A-Za-z0-9_+/=-]|$)", check=_is_seed),
    Rule("totp seed", r"(?:^|[^A-Za-z0-9_+/-])(?P<s>" + _grouped("A-Z") + "|" + _grouped("a-z") +
                      r")(?:[^A-Za-z0-9_+/=-]|$)", check=_is_seed),
    Rule("azure storage key", r"(?i)\bAccountKey=(?P<s>[A-Za-z0-9+/=]{20,})"),
    Rule("social security number", r"\b(?P<s>[0-9]{3}-[0-9]{2}-[0-9]{4})\b", check=_is_ssn),
    Rule("base64 data", r"(?P<s>(?:[A-Za-z0-9+/]{4}){40,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)",
         replacement=BASE64_MARKER),
    Rule("high-entropy string", r"(?P<s>[A-Za-z0-9+/_=-]{20,})", check=_is_entropic),
)

OWN_RULES = HEAD + TAIL


def _options() -> Any:
    # A larger DFA budget than RE2's default 8 MiB, so that hostile text keeps to the fast
    # DFA; when even that runs out, RE2 finishes the search with its NFA (still linear).
    options = re2.Options()
    options.max_mem = 64 << 20
    options.log_errors = False
    return options


def _bare(rule: Rule) -> str:
    return re.sub(r"[(][?]P<[a-z]+>", "(?:", rule.source)


# One pass over the text with every own rule at once: most text holds no secret,
# and RE2 answers "does any rule match?" in a single linear scan.
ANY = re2.compile("|".join(f"(?:{_bare(r)})" for r in OWN_RULES), options=_options())
# Then one more pass names the rules that match somewhere, and only those run. A set
# whose DFA runs out of memory answers "none": then every rule runs.


@functools.cache
def _which() -> Any:
    found = re2.Set.SearchSet(_options())
    for rule in OWN_RULES:
        found.Add(_bare(rule))
    found.Compile()
    return found


_VENDOR: dict[str, Rule] = {}


def _vendor(rule: VendorRule) -> Rule:
    found = _VENDOR.get(rule.id)
    if found is None:
        found = _VENDOR[rule.id] = Rule.from_vendor(rule)
    return found


def rules_for(text: str) -> tuple[Rule, ...] | None:
    """The rules that may match `text`, in order (own rules that match somewhere, and the
    vendor rules whose keywords occur in it), or None when none may."""
    vendor = tuple(_vendor(v) for v in vendor_rules.rules_for(text))
    if ANY.search(text) is None:
        return vendor or None
    hits = _which().Match(text)
    if hits is None:
        return HEAD + vendor + TAIL
    own = sorted(hits)
    return (tuple(OWN_RULES[i] for i in own if i < len(HEAD)) + vendor
            + tuple(OWN_RULES[i] for i in own if i >= len(HEAD)))
