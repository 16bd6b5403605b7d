"""The statistics of an eval. Pure code, no I/O, standard library only.

- `wilson`: a 95 % interval for a pass rate (Wilson's score interval: unlike
  the normal approximation it stays inside [0, 1] and is honest at 0 or n
  passes and for small n);
- `mcnemar`: McNemar's paired test for two cells judged on the same lines,
  from the discordant lines only (passed in one cell, failed in the other):
  the exact binomial test while there are fewer than `EXACT_BELOW` of them,
  then the chi-square test with Edwards' continuity correction (the two agree
  closely from there on);
- `percentile`: linear interpolation between closest ranks (numpy's default);
- `covered_seconds`: wall time as the union of the runs' intervals, so runs in
  parallel count once and a pause between two sessions of a resumed eval
  does not count at all.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

#: The two-sided 95 % normal quantile.
Z95 = 1.959963984540054
#: McNemar's test is exact (binomial) below this many discordant lines.
EXACT_BELOW = 25


def wilson(passed: int, total: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for `passed` of `total` (the whole [0, 1] when there is no line)."""
    if total <= 0:
        return 0.0, 1.0
    p = passed / total
    z2 = z * z
    denominator = 1 + z2 / total
    centre = (p + z2 / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / denominator
    # At 0 or n passes one end is exactly 0 or 1 (rounding would leave it a hair off).
    low = 0.0 if passed <= 0 else max(0.0, centre - half)
    high = 1.0 if passed >= total else min(1.0, centre + half)
    return low, high


class McNemarMethod(StrEnum):
    """How McNemar's p-value was computed; its value is what summary.json writes."""

    #: the exact binomial test (fewer than EXACT_BELOW discordant lines)
    EXACT = "exact"
    #: the chi-square test with Edwards' continuity correction
    CHI2 = "chi2"
    #: no discordant line: nothing to test, p = 1
    NONE = "none"


@dataclass(frozen=True, slots=True)
class McNemar:
    """McNemar's test on two cells' verdicts for the same lines."""

    #: lines passed only by the first cell, and only by the second
    first_only: int
    second_only: int
    p_value: float
    method: McNemarMethod


def mcnemar(first_only: int, second_only: int) -> McNemar:
    """Two-sided p-value that the two cells pass equally often, from the discordant lines."""
    n = first_only + second_only
    if n == 0:
        return McNemar(first_only, second_only, 1.0, McNemarMethod.NONE)
    if n < EXACT_BELOW:
        low = min(first_only, second_only)
        tail = sum(math.comb(n, k) for k in range(low + 1))
        # Two-sided: twice the smaller tail of Binomial(n, 1/2), capped at 1 (both tails meet).
        return McNemar(first_only, second_only, min(1.0, 2 * tail / 2**n), McNemarMethod.EXACT)
    statistic = max(0.0, abs(first_only - second_only) - 1) ** 2 / n
    # The chi-square survival function with one degree of freedom.
    return McNemar(first_only, second_only, math.erfc(math.sqrt(statistic / 2)), McNemarMethod.CHI2)


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th quantile (0 ≤ q ≤ 1), interpolating between closest ranks; 0 for no value."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def covered_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """The length of the union of (start, seconds) intervals."""
    total = 0.0
    end = -math.inf
    for start, seconds in sorted(intervals):
        stop = start + seconds
        if start >= end:
            total += seconds
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total
