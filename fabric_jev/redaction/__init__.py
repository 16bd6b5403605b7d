"""Secrets in text: redaction, and an answer that echoes its key. Pure code, no I/O.

`redact` and `redact_text` (`redactor.py`) replace what looks like a credential
before text leaves the host: observer payloads, approval evidence and questions,
assertion artifacts, cassettes. Secret-named keys are `secret_names.py`'s, text
rules `secret_patterns.py`'s, vendor token shapes the kept rule sets in
`secret_rules/` (read by `vendor_rules.py`). `key_echo.carries_key` refuses an
upstream answer that carries the key it was sent with, in any spelling. Both see
through look-alike spellings (`lookalikes.fold`).

This room stands only on the floor (`_surrogates`): the contract, the host and the drivers
all stand on it. Names load on first use (RE2 and the rule sets are not small).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .key_echo import carries_key
    from .redactor import MAX_DEPTH, is_secret_key, marker, redact, redact_text

_LAZY = {
    "carries_key": ".key_echo",
    **dict.fromkeys(("MAX_DEPTH", "is_secret_key", "marker", "redact", "redact_text"), ".redactor"),
}

__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = ["MAX_DEPTH", "carries_key", "is_secret_key", "marker", "redact", "redact_text"]
