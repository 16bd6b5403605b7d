"""`pattern` and `format` in the schema subset: string checks that always run in linear time.

`pattern` is matched by RE2, never by a backtracking engine: a schema comes from
whoever wrote the program, the value from whoever sent the input, and neither
may make validation take exponential time. RE2 has no lookaround and no
backreferences; a pattern that needs them is refused when the schema is
checked. As JSON Schema says, a pattern is searched for anywhere in the string:
anchor it with ^ and $ to match the whole value.

`format` is checked (not only annotated) for the names in `FORMATS`; any other
name is refused, never silently trusted.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import re2

#: Longest `pattern` accepted (RE2 compiles it to a program whose size grows with it).
MAX_PATTERN_CHARS = 1_000
#: RE2's memory budget for one compiled pattern; a pattern needing more is refused.
MAX_PATTERN_MEMORY = 1 << 20


class PatternInvalid(ValueError):
    """A `pattern` that RE2 cannot compile (or that is too large)."""


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print to stderr; the error is reported to the author instead
    options.max_mem = MAX_PATTERN_MEMORY
    return options


@lru_cache(maxsize=512)
def compile_pattern(pattern: str) -> Any:
    """The compiled RE2 program of `pattern`; raises `PatternInvalid` with RE2's reason."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternInvalid(f"a pattern is at most {MAX_PATTERN_CHARS} characters")
    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise PatternInvalid(f"RE2 cannot compile it ({reason}); patterns use RE2 syntax: no "
                             "lookaround and no backreferences") from None


def pattern_matches(pattern: str, value: str) -> bool:
    return compile_pattern(pattern).search(value) is not None


def _re(expression: str) -> Any:
    return re2.compile(expression, _options())


_DATE = _re(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_DATE_TIME = _re(r"^([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
                 r"([Zz]|[+-][0-9]{2}:[0-9]{2})$")
# A dot-atom mailbox (RFC 5321/5322 without quoted local parts or address literals).
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_EMAIL = _re(rf"^{_ATEXT}(?:\.{_ATEXT})*@{_LABEL}(?:\.{_LABEL})*$")
# An absolute URI (RFC 3986): a scheme, then only characters a URI may hold, escapes well formed.
_URI = _re(r"^[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?#\[\]]|%[0-9A-Fa-f]{2})*$")
_UUID = _re(r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$")


def _is_date(value: str) -> bool:
    if _DATE.search(value) is None:
        return False
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _is_date_time(value: str) -> bool:
    match = _DATE_TIME.search(value)
    if match is None:
        return False
    day, hour, minute, second, _, offset = match.groups()
    if not _is_date(day) or int(hour) > 23 or int(minute) > 59 or int(second) > 60:
        return False  # second 60 is a leap second, which RFC 3339 allows
    return offset in ("Z", "z") or (int(offset[1:3]) <= 23 and int(offset[4:6]) <= 59)


def _is_email(value: str) -> bool:
    local, _, domain = value.rpartition("@")
    return len(value) <= 254 and len(local) <= 64 and len(domain) <= 253 and _EMAIL.search(value) is not None


def _is_uri(value: str) -> bool:
    return _URI.search(value) is not None


def _is_uuid(value: str) -> bool:
    if _UUID.search(value) is None:
        return False
    uuid.UUID(value)  # cannot fail once the shape matched; kept as the authority on the form
    return True


#: The `format` names the subset checks, and how. Each check is linear in the string's length.
FORMATS: dict[str, Callable[[str], bool]] = {
    "date-time": _is_date_time,
    "date": _is_date,
    "email": _is_email,
    "uri": _is_uri,
    "uuid": _is_uuid,
}


def format_checker() -> Any:
    """A jsonschema FormatChecker that knows exactly `FORMATS` (other values are not strings: skipped)."""
    from jsonschema import FormatChecker

    checker = FormatChecker(formats=())
    for name, check in FORMATS.items():
        def checks(value: object, check: Callable[[str], bool] = check) -> bool:
            return not isinstance(value, str) or check(value)

        checker.checks(name)(checks)
    return checker


# ---------------------------------------------------------------- patterns other engines read alike

# Escapes with one meaning in RE2, ECMA-262 (with or without the u flag) and Python's `re`.
_PORTABLE_CLASS_ESCAPES = frozenset("dDwWsS")
_PORTABLE_CONTROL_ESCAPES = frozenset("nrtfv")
_SYNTAX = frozenset("^$\\.*+?()[]{}|/")
_QUANTIFIER_BRACES = re2.compile(r"^\{[0-9]+(?:,[0-9]*)?\}")
_HEX2 = frozenset("0123456789abcdefABCDEF")


def _portable_escape(pattern: str, i: int, *, in_class: bool) -> int | None:
    """The index after the escape at `i` (a backslash), or None when engines read it differently."""
    if i + 1 >= len(pattern):
        return None
    c = pattern[i + 1]
    if c in _PORTABLE_CLASS_ESCAPES or c in _PORTABLE_CONTROL_ESCAPES or c in _SYNTAX:
        return i + 2
    if c in "bB" and not in_class:  # a word boundary (inside a class, \b is a backspace in ECMA only)
        return i + 2
    if c == "-" and in_class:
        return i + 2
    if c == "x" and len(pattern) >= i + 4 and set(pattern[i + 2:i + 4]) <= _HEX2:
        return i + 4
    if c == "u" and len(pattern) >= i + 6 and set(pattern[i + 2:i + 6]) <= _HEX2:
        return i + 6
    return None  # \pL, \z, \A, \Z, \Q…\E, \x{…}, back-references, octal, \C, …


def portable_pattern(pattern: str) -> bool:
    """Whether `pattern` (which RE2 accepts) means the same to ECMA-262 (with or without the u flag)
    and to Python's `re`, so a published schema may carry it: JSON Schema validators in clients
    compile patterns with their own engine, and one that fails to compile can break the client.

    Conservative: the common core only (literals, `.`, classes with ranges and the portable
    escapes, groups `(…)`/`(?:…)`, alternation, `^`/`$` and the quantifiers `* + ? {n,m}` with
    an optional lazy `?`); anything else is not portable.
    """
    i, n = 0, len(pattern)
    quantifiable = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            after = _portable_escape(pattern, i, in_class=False)
            if after is None:
                return False
            quantifiable = pattern[i + 1] not in "bB"
            i = after
        elif c == "[":
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                return False  # `[]…]`: an empty class to ECMA, a literal ] to Python and RE2
            while i < n and pattern[i] != "]":
                if pattern[i] == "\\":
                    after = _portable_escape(pattern, i, in_class=True)
                    if after is None:
                        return False
                    i = after
                elif pattern[i] == "[" or pattern.startswith(("--", "&&", "~~", "||"), i):
                    return False  # POSIX classes, nested sets and set operations (Python warns, v flag)
                else:
                    i += 1
            if i >= n:
                return False
            i += 1
            quantifiable = True
        elif c == "(":
            if pattern.startswith("(?", i):
                if not pattern.startswith("(?:", i):
                    return False  # named groups, flags, lookaround: spelled differently or missing
                i += 3
            else:
                i += 1
            quantifiable = False
        elif c in "*+?":
            if not quantifiable:
                return False
            i += 1
            if i < n and pattern[i] == "?":
                i += 1  # lazy
            if i < n and pattern[i] in "*+":
                return False  # possessive in Python 3.11+, an error elsewhere
            quantifiable = False
        elif c == "{":
            braces = _QUANTIFIER_BRACES.search(pattern[i:i + 24])
            if braces is None or not quantifiable:
                return False  # a lone brace: a literal to Python and RE2, an error to ECMA's u flag
            i += len(braces.group())
            if i < n and pattern[i] == "?":
                i += 1
            quantifiable = False
        elif c in "}]":
            return False  # a lone closer: an error to ECMA's u flag
        else:
            quantifiable = c not in "^$|)"
            if c == ")":
                quantifiable = True
            i += 1
    import re
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            re.compile(pattern)
    except (re.error, Warning, RecursionError):
        return False
    return True
