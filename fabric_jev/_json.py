"""The one parser for untrusted JSON: bounded in size and depth, one-line errors.

Every byte string that comes from outside (HTTP bodies, upstream answers, files
named on the command line) goes through here. `json.loads` alone is not safe
on such input: a few hundred kilobytes of `[` raise RecursionError (or exhaust
the C stack of a worker thread), a BOM or a stray Latin-1 byte gives a message
that points nowhere, and reading a 50 MB file whole happens before anything
could refuse it. The checks below are linear in the input and run before the
real parse. What the parse would accept but nothing after it could use is
refused too: numbers that overflow to infinity (`1e400`), integers past
Python's digit limit, and lone surrogate escapes (`"\\ud800"`), which no
encoder can write back out.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from ._patterns import LazyPattern

__all__ = ["DEFAULT_MAX_DEPTH", "STRUCTURE_TOKEN", "JSONInputError", "check_depth", "copy_tree", "loads_bounded",
           "read_json_file", "values_at_most"]

DEFAULT_MAX_DEPTH = 64
_BOM = b"\xef\xbb\xbf"
#: Structure tokens: a whole JSON string (so brackets inside strings are not
#: counted), a bracket, or a lone quote that opens a string never closed. The
#: possessive quantifiers and the lone-quote stop keep the scan linear even on
#: input crafted to make a string pattern backtrack. (Also the MCP server's scan
#: of lines its SDK could not parse.)
STRUCTURE_TOKEN = LazyPattern(r'"(?:[^"\\]++|\\.)*+"|[\[\]{}]|"', re.DOTALL)
#: A \uD800-\uDFFF escape: the only way JSON text can carry a surrogate (UTF-8 cannot).
_SURROGATE_ESCAPE = LazyPattern(r"\\u[dD][89a-fA-F]")


#: A whole JSON string, as bytes (for `values_at_most`).
_STRING_BYTES = LazyPattern(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)


def values_at_most(data: bytes, limit: int) -> int:
    """An upper bound on the number of JSON values in `data` (exact enough to compare with `limit`),
    found without building any: every value but the first follows a `[`, a `,` or a `:`.

    Counting bytes is a few milliseconds for 16 MiB; only when that count passes `limit` are the
    strings (whose brackets and commas are text) taken out and the count made again. Parsing is
    what costs: 16 MiB of `[],` is 5.6 million lists, a gigabyte of Python objects.
    """
    def count(text: bytes) -> int:
        return 1 + text.count(b"[") + text.count(b",") + text.count(b":")

    found = count(data)
    if found <= limit:
        return found
    return count(_STRING_BYTES.sub(b'""', data))


class JSONInputError(ValueError):
    """Untrusted JSON that was refused. The message is one line and names the input."""


def check_depth(text: str, max_depth: int, what: str) -> None:
    """Refuse nesting deeper than `max_depth` containers, before any recursive parse."""
    if text.count("[") + text.count("{") <= max_depth:
        return  # cannot nest deeper than the number of openers: the common, cheap case
    depth = 0
    for match in STRUCTURE_TOKEN.finditer(text):
        token = match.group()
        if token == '"':
            return  # an unterminated string: the parser reports it, and nothing after it nests
        if token in "[{":
            depth += 1
            if depth > max_depth:
                raise JSONInputError(f"{what} nests deeper than {max_depth} levels")
        elif token in "]}":
            depth -= 1


def _refuse_constant(name: str) -> Any:
    raise JSONInputError(f"contains {name}, which JSON does not allow")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: Python would read infinity
        raise JSONInputError(f"holds the number {text[:24]}, too large for a finite float")
    return value


def _holds_lone_surrogate(value: Any) -> bool:
    """Escaped pairs were joined by the parser: what cannot be encoded is an unpaired half."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different: the text that gives one twice is ambiguous (parsers
    disagree on which wins), so it is refused rather than read as its last."""
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JSONInputError(f"gives the key {json.dumps(key, ensure_ascii=True)[:80]} twice in one object")
            seen.add(key)
    return found


#: The two decoders `loads_bounded` uses, made once: `json.loads` with any keyword builds a new
#: decoder (and its scanner) per call, a third of the parse of a small request body. A decoder
#: keeps no state between calls.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
_UNIQUE_KEYS_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float,
                                        object_pairs_hook=_unique_keys)


def loads_bounded(data: bytes | str, *, what: str, max_bytes: int, max_depth: int = DEFAULT_MAX_DEPTH,
                  unique_keys: bool = False) -> Any:
    """Parse untrusted JSON, refusing anything over `max_bytes` or nested over `max_depth`.

    `unique_keys`: refuse an object that gives a key twice (documents a person writes, such as a
    program; it costs a call per object, so the wire formats leave it off)."""
    if isinstance(data, str):
        if len(data) > max_bytes:  # characters ≤ bytes: a cheap first bound
            raise JSONInputError(f"{what} is larger than {max_bytes} bytes")
        try:
            raw = data.encode("utf-8")
        except UnicodeEncodeError:
            raise JSONInputError(f"{what} contains a lone surrogate and is not valid UTF-8") from None
    else:
        raw = data
    if len(raw) > max_bytes:
        raise JSONInputError(f"{what} is larger than {max_bytes} bytes")
    if raw.startswith(_BOM):
        raise JSONInputError(f"{what} starts with a UTF-8 byte order mark; save it without one")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONInputError(f"{what} is not UTF-8 (invalid byte at offset {exc.start})") from None
    if not text.strip():
        raise JSONInputError(f"{what} is empty")
    check_depth(text, max_depth, what)
    try:
        value = (_UNIQUE_KEYS_DECODER if unique_keys else _DECODER).decode(text)
    except JSONInputError as exc:
        raise JSONInputError(f"{what} {exc}") from None
    except json.JSONDecodeError as exc:
        raise JSONInputError(
            f"{what} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except ValueError:  # Python's limit on integer digits (sys.get_int_max_str_digits)
        raise JSONInputError(f"{what} holds an integer with more than {sys.get_int_max_str_digits()} "
                             "digits") from None
    except RecursionError:  # belt and braces: the depth check should make this unreachable
        raise JSONInputError(f"{what} nests too deeply") from None
    if _SURROGATE_ESCAPE.search(text) and _holds_lone_surrogate(value):
        # Such text cannot be encoded, printed, tokenized or hashed.
        raise JSONInputError(f"{what} contains a lone surrogate (an unpaired \\uD800-\\uDFFF escape), "
                             "which is not Unicode text")
    return value


def read_bounded(path: str | Path, *, label: str, max_bytes: int) -> bytes:
    """A file's bytes ("-" is standard input), refused by size before it is read whole
    (JSONInputError, naming `label`); a file that grows while it is read is still bounded.
    Only a regular file is read (`_files.open_regular`): a device, a FIFO or a socket is
    refused at once, without waiting for a writer."""
    if str(path) == "-":
        try:
            raw = sys.stdin.buffer.read(max_bytes + 1)
        except OSError as exc:
            raise JSONInputError(f"cannot read {label}: {exc.strerror or exc}") from None
        if len(raw) > max_bytes:
            raise JSONInputError(f"{label} is larger than {max_bytes} bytes")
        return raw
    from ._files import read_regular

    return read_regular(path, label=label, max_bytes=max_bytes, error=JSONInputError)


def read_json_file(path: str | Path, *, what: str, max_bytes: int, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """Read and parse a JSON file ("-" is standard input), refusing it by size before reading it whole."""
    label = f"{what} on standard input" if str(path) == "-" else f"{what} {path}"
    raw = read_bounded(path, label=label, max_bytes=max_bytes)
    return loads_bounded(raw, what=label, max_bytes=max_bytes, max_depth=max_depth)


_CONTAINERS = (dict, list)


def copy_tree(value: Any) -> Any:
    """A copy of a JSON value's objects and lists, all the way down (its text and numbers are
    immutable and shared): for a value kept to be handed out again, whose receiver may change it."""
    if value.__class__ is dict:
        return {k: v if v.__class__ not in _CONTAINERS else copy_tree(v) for k, v in value.items()}
    if value.__class__ is list:
        return [v if v.__class__ not in _CONTAINERS else copy_tree(v) for v in value]
    return value
