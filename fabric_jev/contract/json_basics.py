"""The smallest rules about JSON that checks and messages share: what a finite number is, and
how a key or a path step is written in a one-line message. (values.py re-exports them; the
schema subset reads them from here, so the two modules need not import each other.)"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import TypeIs

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


_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]{0,63}")


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
