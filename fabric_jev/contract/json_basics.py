"""The smallest rules about JSON that checks and messages share: what a finite number is, and
how a key or a path step is written in a one-line message. (values.py re-exports them; the
schema subset reads them from here, so the two modules need not import each other.)"""

from __future__ import annotations

import json
import math
import sys
from typing import TYPE_CHECKING, Any

from .._patterns import LazyPattern

if TYPE_CHECKING:
    from typing_extensions import TypeIs

#: A number of a file the host reads and writes back (a plan, a profile, an eval's results): in a
#: pydantic field the union keeps an integer an integer (smart mode picks the exact type), where
#: `float` would read 1 as 1.0 and write it back so.
JsonNumber = int | float

#: Past this an integer is no JSON number a reader can hold (JavaScript reads it as Infinity).
_MAX_INT = int(sys.float_info.max)


def is_finite_number(v: object) -> TypeIs[int | float]:
    """A finite JSON number: a finite float, or an int within the float range; not a bool.

    `math.isfinite` alone raises OverflowError on an int past the float range
    (1e400 written out as an integer, say); such an int is refused here, as a
    JavaScript reader would read it as Infinity. What passes converts to float.
    """
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return -_MAX_INT <= v <= _MAX_INT
    return isinstance(v, float) and math.isfinite(v)


_NAME = LazyPattern(r"[A-Za-z_$][A-Za-z0-9_$]{0,63}")


def path_step(name: str) -> str:
    """`.name`, or `["any name"]` JSON-quoted (and cut): a message stays one printable line."""
    if _NAME.fullmatch(name):
        return "." + name
    quoted = json.dumps(name if len(name) <= 64 else name[:64] + "…")
    return f"[{quoted}]"


def key_names(keys: Any) -> str:
    """Object keys for a message, sorted: plain names as they are, others JSON-quoted and cut."""
    return ", ".join(k if _NAME.fullmatch(k) else json.dumps(k if len(k) <= 64 else k[:64] + "…")
                     for k in sorted(str(k) for k in keys))


def did_you_mean(key: str, known: Any) -> str | None:
    """The known key that `key` most likely meant (a typo, a missing unit suffix, another case or
    snake_case for camelCase: `timeout` → `timeoutMs`, `max_tokens` → `maxTokens`), else None."""
    import difflib

    names = [str(k) for k in known]
    if not names or not isinstance(key, str):
        return None
    folded = key.replace("_", "").replace("-", "").lower()
    for name in names:
        if name.lower() == folded or name.replace("_", "").lower() == folded:
            return name
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if close:
        return close[0]
    starts = [name for name in names if name.lower().startswith(key.lower()) and len(key) >= 3]
    return starts[0] if len(starts) == 1 else None


def unknown_keys(keys: Any, known: Any) -> str:
    """Unknown keys for a message, each with its likely meaning: `timeout (did you mean timeoutMs?)`."""
    parts = []
    for key in sorted(str(k) for k in keys):
        shown = key_names([key])
        guess = did_you_mean(key, known)
        parts.append(f"{shown} (did you mean {guess}?)" if guess else shown)
    return ", ".join(parts)

