"""Deprecated: a snapshot's diff moved to `fabric_jev.assertions.snapshot_diff` (evals/diff.py
compares two evals); this path is removed in 0.3.0. Every name read here warns and comes from
there; the names are also exported from `fabric_jev.assertions`."""

from .._lazy import moved_module

__getattr__ = moved_module(__name__, "fabric_jev.assertions.snapshot_diff", "0.3.0")
