"""Deprecated: the reliability diagram and coverage curve moved to
`fabric_jev.calibration.diagrams` (evals/report.py is the eval's report); this path is removed
in 0.3.0. Every name read here warns and comes from there."""

from .._lazy import moved_module

__getattr__ = moved_module(__name__, "fabric_jev.calibration.diagrams", "0.3.0")
