"""Temperature scaling (fabric_jev.calibration.temperature): what a fitted temperature does."""

from __future__ import annotations

import math
import random

import pytest

from fabric_jev.calibration.temperature import MAX_TEMPERATURE, fit_temperature, nll, scale


def test_scaling_keeps_the_order_and_moves_the_confidence() -> None:
    probs = [0.7, 0.2, 0.1]
    soft, sharp = scale(probs, 2.0), scale(probs, 0.5)
    assert scale(probs, 1.0) == pytest.approx(probs)
    assert sum(soft) == pytest.approx(1.0) and sum(sharp) == pytest.approx(1.0)
    assert soft[0] > soft[1] > soft[2] and sharp[0] > sharp[1] > sharp[2]
    assert soft[0] < 0.7 < sharp[0]
    assert sharp == pytest.approx([0.49 / 0.54, 0.04 / 0.54, 0.01 / 0.54])


def test_a_zero_probability_does_not_make_the_loss_infinite() -> None:
    assert nll([[1.0, 0.0]], [1], 1.0) == pytest.approx(-math.log(1e-9), rel=1e-6)


def test_the_fit_recovers_the_temperature_that_made_a_model_overconfident() -> None:
    rng = random.Random(7)
    dists, labels = [], []
    for _ in range(3000):
        p = rng.uniform(0.5, 0.95)
        truth = [p, 1 - p] if rng.random() < 0.5 else [1 - p, p]
        labels.append(0 if rng.random() < truth[0] else 1)
        dists.append(scale(truth, 0.4))  # what an overconfident model reports: T = 0.4 too sharp
    fitted = fit_temperature(dists, labels)
    assert fitted == pytest.approx(2.5, rel=0.15)
    assert nll(dists, labels, fitted) < nll(dists, labels, 1.0)


def test_labels_the_model_cannot_tell_apart_flatten_it_to_the_limit() -> None:
    dists = [[0.9, 0.1], [0.1, 0.9]] * 50
    labels = [1, 0] * 50  # always wrong, whatever it says
    assert fit_temperature(dists, labels) == pytest.approx(MAX_TEMPERATURE, rel=0.01)
    assert fit_temperature([], []) == 1.0
