"""The eval's statistics, each against a case worked out by hand or by another formula."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from fabric_jev.evals import stats


def _wilson_by_quadratic(passed: int, total: int, z: float = stats.Z95) -> tuple[float, float]:
    """The interval as the set of p where the score test does not reject: (p̂ − p)² = z² p(1 − p)/n."""
    phat = passed / total
    a = 1 + z * z / total
    b = -(2 * phat + z * z / total)
    c = phat * phat
    root = math.sqrt(b * b - 4 * a * c)
    return (-b - root) / (2 * a), (-b + root) / (2 * a)


@pytest.mark.parametrize(("passed", "total"), [(36, 40), (24, 40), (1, 3), (81, 263), (5000, 10000)])
def test_wilson_is_the_score_test_inverted(passed: int, total: int) -> None:
    assert stats.wilson(passed, total) == pytest.approx(_wilson_by_quadratic(passed, total), abs=1e-12)


def test_wilson_stays_inside_zero_and_one_at_the_ends() -> None:
    low, high = stats.wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)  # the textbook 0/10 upper bound
    low, high = stats.wilson(10, 10)
    assert high == 1.0 and low == pytest.approx(0.7225, abs=1e-4)
    assert stats.wilson(0, 0) == (0.0, 1.0)


def test_mcnemar_exact_on_a_small_known_case() -> None:
    # 1 line passed only by the first cell, 9 only by the second: n = 10, P(X ≤ 1) = 11/1024.
    test = stats.mcnemar(1, 9)
    assert test.method == "exact"
    assert test.p_value == pytest.approx(float(Fraction(22, 1024)), abs=1e-15)
    assert stats.mcnemar(9, 1).p_value == test.p_value  # symmetric
    assert stats.mcnemar(3, 3).p_value == 1.0  # the tails meet: capped at 1
    assert stats.mcnemar(0, 0).method == "none" and stats.mcnemar(0, 0).p_value == 1.0


def test_mcnemar_switches_to_chi_square_with_continuity_correction() -> None:
    # The classic example (121 and 59 discordant pairs): (|121 − 59| − 1)² / 180 = 20.672.
    test = stats.mcnemar(121, 59)
    assert test.method == "chi2"
    statistic = (abs(121 - 59) - 1) ** 2 / 180
    assert statistic == pytest.approx(20.672, abs=1e-3)
    # The chi-square(1) survival function is P(|Z| > sqrt(x)) for a standard normal Z.
    assert test.p_value == pytest.approx(2 * (1 - _normal_cdf(math.sqrt(statistic))), rel=1e-9)
    assert test.p_value < 1e-5


def test_the_exact_test_and_the_approximation_agree_where_they_meet() -> None:
    below, above = stats.EXACT_BELOW - 1, stats.EXACT_BELOW
    exact = stats.mcnemar(6, below - 6)
    approx = stats.mcnemar(6, above - 6)
    assert exact.method == "exact" and approx.method == "chi2"
    assert abs(exact.p_value - approx.p_value) < 0.05


def _normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


@pytest.mark.parametrize("q", [0.0, 0.5, 0.95, 1.0])
def test_percentile_interpolates_as_numpy_does(q: float) -> None:
    values = [0.31, 0.05, 0.2, 0.2, 1.7, 0.9, 0.44]
    assert stats.percentile(values, q) == pytest.approx(float(np.percentile(values, q * 100)), abs=1e-12)
    assert stats.percentile([], q) == 0.0


def test_wall_time_is_the_union_of_the_runs_intervals() -> None:
    # Two runs side by side count once; a pause between sessions not at all.
    intervals = [(10.0, 2.0), (11.0, 2.0), (100.0, 1.0), (100.2, 0.3)]
    assert stats.covered_seconds(intervals) == pytest.approx(3.0 + 1.0)
    assert stats.covered_seconds([]) == 0.0


def test_mcnemar_method_is_a_closed_set_written_as_its_string() -> None:
    import json

    from fabric_jev.evals.summary import PairedTest

    methods = [stats.mcnemar(0, 0).method, stats.mcnemar(1, 4).method, stats.mcnemar(5, 30).method]
    assert methods == [stats.McNemarMethod.NONE, stats.McNemarMethod.EXACT, stats.McNemarMethod.CHI2]
    pair = PairedTest(first=0, second=1, lines=35, both_passed=0, first_only=5, second_only=30, both_failed=0,
                      difference=0.7, p_value=0.01, method=methods[2])
    assert json.dumps(pair.to_json()["method"]) == '"chi2"'
    assert PairedTest.model_validate(pair.to_json()).method is stats.McNemarMethod.CHI2
