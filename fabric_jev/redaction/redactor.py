"""Credential redaction applied before text leaves the host (contract §8, §9).

One rule set, used identically for observer payloads, approval evidence and
questions, assertion artifacts and cassettes. Defense in depth, not a
guarantee: keys that name secrets have their values replaced, and so do
name/value pairs whose name says secret (`secret_names`); text that looks
like a credential is replaced by a marker that names its kind
(`[redacted: bearer token]`), so a classifier can still see that a credential
was there without receiving it.

The text rules (`secret_patterns`) follow the plugin families of a well-kept
secret scanner (detect-secrets) — private keys, service tokens, JWTs,
credentials in URLs and headers, keyword assignments, passwords on command
lines, pairs written as text, US social security numbers, high-entropy
strings — and vendor token shapes come from kept rule sets read as data
(`vendor_rules`: gitleaks, Kingfisher). Every pattern runs on RE2, whose
matching time is linear in the text whatever the input: hostile text cannot
make redaction slow.

Spellings that hide a secret from a pattern but not from a reader are undone
(`lookalikes.fold`: HTML references, percent-encoding, fullwidth and
look-alike letters, invisible characters; rot13), hex-, base64- and
base32-encoded text is decoded and scanned, dictionary keys are scanned like
any string, and the strings of a list are also scanned joined, so a key split
across items is found.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import codecs
import re
from typing import Any

import re2

from .._surrogates import without_lone_surrogates
from .lookalikes import fold, needs_folding
from .secret_names import is_secret_key, pair_secret
from .secret_patterns import BASE64_MARKER, Rule, marker, rules_for

__all__ = ["MAX_DEPTH", "is_secret_key", "marker", "redact", "redact_text"]

MAX_DEPTH = 64


_MARKER_OPEN = "[redacted: "
_MARKER_MAX = 120  # longer than any marker this module writes for a text rule


def _inside_marker(text: str, at: int) -> bool:
    """A marker left by an earlier rule (or pass) is never redacted again.

    Only a short window before `at` is searched, so the check stays constant-time.
    """
    lo = max(0, at - _MARKER_MAX)
    opened = text.rfind(_MARKER_OPEN, lo, at + len(_MARKER_OPEN))
    return 0 <= opened <= at and text.find("]", opened, at + 1) < 0


#: Runs that may hold an encoded secret: hex (32+ digits), base64 / base64url (20+) or
#: base32 (padding up to six `=`). Every such run also matches `ANY` (the high-entropy
#: rule's character class), so text that `ANY` passes over holds none.
_ENCODED = re2.compile(r"[A-Za-z0-9+/_-]{20,}={0,6}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2}){16,}")
_BASE32 = re.compile(r"[A-Z2-7]+=*|[a-z2-7]+=*")
#: Decoding nests at most this deep (hex of base64 of a token): each layer is shorter.
_DECODE_DEPTH = 2
#: Rules that do not look across list items: joined short strings are not random keys.
_NOT_ACROSS_ITEMS = frozenset({"base64 data", "high-entropy string"})
#: ...and one that looks across them only joined with a space: `["JBSW", "Y3DP", …]` is a seed
#: in groups, `["H2", "H3", …]` joined without a space no seed.
_SPACED_ACROSS_ITEMS = frozenset({"totp seed"})


def _printable(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.replace("\n", " ").replace("\t", " ").replace("\r", " ").isprintable() else None


def _decoded(run: str) -> tuple[str, str] | None:
    """("hex" | "base64" | "base32", the printable text a run encodes), or None when it encodes none."""
    if _HEX.fullmatch(run):
        text = _printable(bytes.fromhex(run))
        return ("hex", text) if text is not None else None
    body = run.rstrip("=")
    urlsafe = "-" in body or "_" in body
    if len(body) % 4 != 1 and "=" not in run[len(body) + 2:] \
            and not (urlsafe and ("+" in body or "/" in body)):
        try:
            raw = binascii.a2b_base64((body.replace("-", "+").replace("_", "/") if urlsafe else body)
                                      + "=" * (-len(body) % 4), strict_mode=True)
        except binascii.Error:
            pass
        else:
            text = _printable(raw)
            if text is not None:
                return "base64", text
    if _BASE32.fullmatch(run) and len(body) % 8 in (0, 2, 4, 5, 7):
        try:
            raw = base64.b32decode(body.upper() + "=" * (-len(body) % 8))
        except binascii.Error:
            return None
        text = _printable(raw)
        return ("base32", text) if text is not None else None
    return None


def _apply_rules(text: str, kinds: list[str], rules: tuple[Rule, ...]) -> str:
    for rule in rules:
        def replace(m: Any, rule: Rule = rule) -> str:
            for group in rule.groups:
                start, end = m.span(group)
                if start < 0 or start == end:
                    continue
                secret = m.group(group)
                if _inside_marker(m.string, start) or secret == BASE64_MARKER or rule.refuses(m, group):
                    return str(m.group(0))
                kinds.append(rule.kind)
                whole_start = m.start()
                whole = m.group(0)
                return str(whole[: start - whole_start] + rule.replacement + whole[end - whole_start:])
            return str(m.group(0))

        text = rule.sub(replace, text)
    return text


def _scan(text: str, kinds: list[str], depth: int = 0) -> str:
    """The rules, then hex, base64 and base32 runs decoded and scanned (a run hiding a secret goes whole)."""
    rules = rules_for(text)
    if rules is None:
        return text
    text = _apply_rules(text, kinds, rules)
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
        # As decoded, then folded: folding first would read `bob%000000` as `bob` and a NUL.
        _scan(decoded[1], found, depth + 1)
        if not found and needs_folding(decoded[1]):
            _scan(fold(decoded[1]), found, depth + 1)
        if not found:
            return run
        kind = f"{decoded[0]}-encoded {found[0]}"
        kinds.append(kind)
        return marker(kind)

    return str(_ENCODED.sub(replace, text))


#: rot13 is its own inverse and keeps every character where it was.
_ROT13 = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
                       "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm")
#: Words a secret's rot13 spelling shows (`cnffjbeq` is password): the rot13 pass runs only
#: when one occurs, as a word's start or a token's prefix.
_ROT13_GATE = re2.compile("(?i)" + "|".join(
    re2.escape(codecs.encode(w, "rot13")) for w in (
        "pass", "pwd", "secret", "token", "apikey", "api_key", "api-key", "authkey", "auth_", "private",
        "credential", "cookie", "bearer", "basic ", "authorization", "ssn", "-----begin", "ghp_", "gho_",
        "github_pat_", "glpat-", "xox", "sk-", "sk_", "pk_", "akia", "asia", "aiza", "npm_", "pypi-")))
#: Kinds a rot13 pass finds in ordinary text by chance (scrambled text is random-looking).
_ROT13_NOISE = frozenset({"high-entropy string", "base64 data", "social security number"})
_ROT13_MARKER = re2.compile(r"\[erqnpgrq: ([^\]\n]{1,120})\]")


def _unrot13(text: str, kinds: list[str]) -> str | None:
    """The text with what its rot13 reading shows redacted (`cnffjbeq=uhagre2` holds password=hunter2),
    or None when that reading shows no secret."""
    if _ROT13_GATE.search(text) is None:
        return None
    found: list[str] = []
    shown = _scan(text.translate(_ROT13), found)
    if not any(k not in _ROT13_NOISE for k in found):
        return None
    kinds.extend(f"rot13-encoded {k}" for k in found)
    # Back to the text as written; the new markers came back scrambled, and are unscrambled.
    back = _ROT13_MARKER.sub(lambda m: marker("rot13-encoded " + str(m.group(1)).translate(_ROT13)),
                             shown.translate(_ROT13))
    return str(back).replace(BASE64_MARKER.translate(_ROT13), BASE64_MARKER)


def redact_text(text: str) -> tuple[str, list[str]]:
    """Return the text with credentials replaced, and the kinds that were found.

    Text without a secret comes back unchanged, but for lone surrogates, which
    become U+FFFD (nothing could print or encode them). When a secret shows only
    once the text is folded (percent-encoding, HTML entities, look-alike letters,
    invisible characters), the folded text comes back, redacted. A secret
    written in rot13 is replaced where it stands.
    """
    kinds: list[str] = []
    if not text.isascii():  # RE2 reads UTF-8, which a lone surrogate (a page's or a JSON escape's) cannot be
        text = without_lone_surrogates(text)
    out = _scan(text, kinds)
    if needs_folding(out):
        folded = fold(out)
        if folded != out:
            more: list[str] = []
            again = _scan(folded, more)
            if more:
                out, kinds = again, kinds + more
    unrotated = _unrot13(out, kinds)
    return (out if unrotated is None else unrotated), kinds


def _touched(spans: list[tuple[int, int, int]], starts: list[int], a: int, b: int,
             most: int | None = None) -> list[int]:
    """The items whose text overlaps [a, b): `spans` are (item, start, end), sorted and disjoint,
    `starts` their starts. A bisection, not a walk over every item: a long list with many
    matches stays linear."""
    found: list[int] = []
    j = max(bisect.bisect_right(starts, a) - 1, 0)
    while j < len(spans) and spans[j][1] < b and (most is None or len(found) < most):
        if spans[j][2] > a:
            found.append(spans[j][0])
        j += 1
    return found


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
            joined = without_lone_surrogates(sep.join(items[i] for i in run))
            rules = rules_for(joined)
            if rules is None:
                continue
            starts = [lo for _, lo, _ in spans]

            for rule in rules:
                if rule.kind in _NOT_ACROSS_ITEMS or (not sep and rule.kind in _SPACED_ACROSS_ITEMS):
                    continue
                for m, offset, stands_from in rule.finditer(joined):
                    if len(_touched(spans, starts, stands_from, m.end() + offset, 2)) < 2:
                        continue  # one item shows it: that item's own scan decides
                    for group in rule.groups:
                        start, end = m.span(group)
                        if start < 0 or start == end or _inside_marker(joined, start + offset) \
                                or rule.refuses(m, group):
                            continue
                        for i in _touched(spans, starts, start + offset, end + offset):
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


def redact(value: object) -> tuple[Any, list[str]]:
    """Redact a JSON value: keys and strings are scanned; secret-named keys lose their values,
    and so do name/value pairs whose name says secret (`{"name": "DB_PASSWORD", "value": …}`,
    `{"Key": "Authorization", "Value": …}`, `["DB_PASSWORD", …]`), whatever the value's shape.

    Raises ValueError for a cyclic value or one nested deeper than 64 levels:
    callers turn that into their own refusal rather than recursing forever.
    """
    kinds: list[str] = []
    path: set[int] = set()

    def hidden(shown_name: str) -> str:
        kinds.append(f"{shown_name} value")
        return marker(f"{shown_name} value")

    def pair_name(v: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> tuple[str, list[Any]]:
        """(the shown name, the keys or indexes of the values) of a secret name/value pair."""
        pair = pair_secret(v)
        if pair is None:
            return "", []
        shown, found = redact_text(pair[0])
        kinds.extend(found)
        # The marker names the pair by its name when that is a short name, not by any text.
        return (shown if len(shown) <= 64 and not any(c.isspace() for c in shown) else "secret pair"), pair[1]

    def walk(v: Any, key: str | None, shown_key: str, depth: int) -> Any:
        if key is not None and is_secret_key(key) and v not in (None, "", [], {}):
            return hidden(shown_key)
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
                # {"name": "DB_PASSWORD", "value": …}, ["DB_PASSWORD", …]: the name says secret.
                shown_name, secret_at = pair_name(v)
                if isinstance(v, dict):
                    out_dict: dict[Any, Any] = {}
                    for k, x in v.items():
                        name = str(k)
                        shown, found = redact_text(name)
                        kinds.extend(found)
                        new_key: Any = k if shown == name else _unique(shown, out_dict)
                        if new_key in out_dict:
                            new_key = _unique(str(new_key), out_dict)
                        out_dict[new_key] = hidden(shown_name) if k in secret_at \
                            else walk(x, name, shown, depth + 1)
                    return out_dict
                items = [hidden(shown_name) if i in secret_at else walk(x, None, "", depth + 1)
                         for i, x in enumerate(v)]
                _across_items(list(v), items, kinds)
                return items
            finally:
                path.discard(id(v))
        return v

    return walk(value, None, "", 0), kinds
