"""Deprecated: redaction moved to `fabric_jev.redaction` (it is not the contract); this path
is removed in 0.3.0. Every name read here warns and comes from there."""

from .._lazy import moved_module

__getattr__ = moved_module(__name__, "fabric_jev.redaction", "0.3.0")
