"""Deprecated: the replay of a plan moved to `fabric_jev.verification.replay` (host/run.py holds a
program's Run); this path is removed in 0.3.0. Every name read here warns and comes from there;
the public names are also exported from `fabric_jev.verification`."""

from .._lazy import moved_module

__getattr__ = moved_module(__name__, "fabric_jev.verification.replay", "0.3.0")
