"""Lone UTF-16 surrogates: the one check for them, in text Python already holds.

A JavaScript string may hold half of a surrogate pair (U+D800 to U+DFFF) on its
own, and JSON text may spell one as an escape (`"\\ud800"`); Python text read
from either keeps it as a code point of its own. UTF-8 cannot encode such a
code point, so text holding one cannot be written to a file, hashed, tokenized
or matched by RE2. Where the text must go on, each becomes U+FFFD, the
replacement character, one for one, so every offset stays where it was; where
it must not, it is refused.

(JSON text carries one only as an escape: the bounded reader `_json` refuses
such an escape and the sandbox wire turns it into U+FFFD before parsing. Those
two read escapes, not code points, and keep their own patterns for it.)
Standard library only: the floor every room may stand on.
"""

from __future__ import annotations

from ._patterns import LazyPattern

__all__ = ["LONE_SURROGATE", "SURROGATES", "has_lone_surrogate", "without_lone_surrogates"]

#: The surrogate code points, as a range to put inside a character class.
SURROGATES = "\ud800-\udfff"
#: One surrogate code point. In Python text every one is lone: a pair read from JSON or UTF-16
#: is already one code point past U+FFFF.
LONE_SURROGATE = LazyPattern(f"[{SURROGATES}]")


def has_lone_surrogate(text: str) -> bool:
    """Whether `text` holds a code point UTF-8 cannot encode."""
    return LONE_SURROGATE.search(text) is not None


def without_lone_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (the same length: offsets are kept)."""
    return LONE_SURROGATE.sub("\ufffd", text) if LONE_SURROGATE.search(text) else text
