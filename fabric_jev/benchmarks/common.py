"""Shared helpers of the benchmark suites."""

from __future__ import annotations

import statistics


def median(xs: list[float]) -> float:
    return statistics.median(xs)
