"""The one rule for model ids, in requests and in configuration.

A model id is what a route serves (`jev-latest`, `typesafe/jev-1.13`,
`~typesafe/jev-latest`, `typesafe-ai/jev`): an optional `~`, one name, and at
most one `/`-separated second name; names start with a letter or digit and
hold letters, digits, `.`, `_` and `-`. No `..`, no further path segments, no
`:`, `?`, `#`, `%` or spaces: an id can never reshape a URL or a file name.
"""

from __future__ import annotations

from .._patterns import LazyPattern

MODEL_ID_MAX_CHARS = 128
#: The rule as a pattern (the same in Python, Rust and ECMAScript regexes), but for "no ..".
MODEL_ID_PATTERN = r"^~?[A-Za-z0-9][A-Za-z0-9._-]{0,62}(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,62})?$"
_MODEL_ID = LazyPattern(MODEL_ID_PATTERN)
MODEL_ID_RULE = ("a model id of 1-128 characters: an optional '~', a name and at most one '/name' "
                 "(letters, digits, '.', '_', '-'; no '..')")


def is_model_id(value: object) -> bool:
    return (isinstance(value, str) and len(value) <= MODEL_ID_MAX_CHARS
            and _MODEL_ID.fullmatch(value) is not None and ".." not in value)
