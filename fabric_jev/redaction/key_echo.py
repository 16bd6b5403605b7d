"""Whether an upstream answer carries the key it was sent with, in any reversible form.

A hostile upstream can hand the key back to the program (and so to the
envelope and to whoever reads it) in a field the contract lets through,
`model` say, spelled so that a plain substring test misses it: reversed,
upper-cased, spaced out, cut in halves, base64- or hex-encoded. The answer's
strings (object keys included) are therefore compared with the key in a
normal form: folded like redaction folds text (percent-decoding, invisible
characters dropped, NFKC, look-alike letters), case-folded, with everything
but letters and digits dropped, and also as the hex and base64 runs they
hold decode to (two layers deep). Any stretch of `PIECE` letters and digits of the key (half
of a shorter key), forwards, backwards or ROT13-shifted, refuses the answer.

A key too short to have a distinctive piece (under 8 letters and digits) is
only looked for as written: its normal form would match ordinary words.
Matching runs on RE2 and every step is one pass: linear in the answer's size.
"""

from __future__ import annotations

import binascii
import codecs
import html
import re
from functools import lru_cache
from typing import Any

import re2

from .lookalikes import fold

__all__ = ["PIECE", "carries_key"]

#: Letters and digits of the key that, found together, count as the key: 12, or half
#: of a shorter key (so either half is found), and never fewer than 8.
PIECE = 12
_MIN_PIECE = 8
_NOT_ALNUM = re.compile(r"[^0-9a-z]+")
_ALNUM = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = bytes.maketrans(_ALNUM[36:], _ALNUM[10:36])
_NOT_ALNUM_BYTES = bytes(b for b in range(256) if b not in _ALNUM)
#: Runs that may encode something: base64 and base64url, and hex within them.
_RUN = re.compile(r"[A-Za-z0-9+/_-]{16,}")
_HEX_RUN = re.compile(r"[0-9a-fA-F]{16,}")
_URLSAFE = str.maketrans("-_", "+/")


def _normal(text: str) -> str:
    return _NOT_ALNUM.sub("", fold(text).casefold())


def _normal_bytes(raw: bytes) -> str:
    return raw.translate(_LOWER, _NOT_ALNUM_BYTES).decode("ascii")


@lru_cache(maxsize=8)
def _pieces(key: str) -> Any:
    """One pattern for every piece of the key's normal form: forwards, backwards, ROT13."""
    norm = _normal(key)
    size = max(_MIN_PIECE, min(PIECE, len(norm) // 2))
    if len(norm) < size:
        return None
    forms = (norm, norm[::-1], codecs.encode(norm, "rot13"), codecs.encode(norm[::-1], "rot13"))
    pieces = {f[i:i + size] for f in forms for i in range(len(f) - size + 1)}
    return re2.compile("|".join(sorted(pieces)))


def _decodings(runs: list[str]) -> bytes:
    """What hex and base64 runs decode to, at every alignment (a prefix can shift them).

    Every run is cut to whole pairs or quads and the cuts are decoded together:
    one C call per alignment, however many runs there are.
    """
    if not runs:
        return b""
    hexes = _HEX_RUN.findall("\n".join(runs))
    out = [bytes.fromhex("".join(h[a: a + (len(h) - a) // 2 * 2] for h in hexes)) for a in (0, 1)]
    out += [binascii.a2b_base64("".join(r[a: a + (len(r) - a) // 4 * 4] for r in runs).translate(_URLSAFE))
            for a in range(4)]
    return b"".join(out)


def carries_key(value: object, key: str) -> bool:
    """Whether the strings of a parsed JSON value (object keys included) hold a form of `key`.

    The strings are read joined by newlines: a key split across two fields is
    still found, and no hex or base64 run reaches from one string into the next.
    """
    if not key:
        return False
    strings: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            strings.append(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    text = "\n".join(strings)
    if key in text:
        return True
    pieces = _pieces(key)
    if pieces is None:
        return False
    forms = [_normal(text)]
    if "&" in text:
        forms.append(_normal(html.unescape(text)))
    if any(pieces.search(f) for f in forms):
        return True
    # All decodings searched as one (a piece straddling two of them would be chance), and
    # decoded once more, forwards: hex of base64 is two layers.
    runs = _RUN.findall(text)
    decoded = _decodings(runs) + _decodings([r[::-1] for r in runs])
    if pieces.search(_normal_bytes(decoded)):
        return True
    return pieces.search(_normal_bytes(_decodings(_RUN.findall(decoded.decode("latin-1"))))) is not None
