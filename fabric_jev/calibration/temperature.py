"""Temperature scaling: one temperature per question type, fitted on a user's labels.

A language-model route reads an answer from the next-token distribution over the
question's labels. Small models are often over- or under-confident there. Dividing
the labels' log-probabilities by a temperature T and renormalising (T > 1 softens,
T < 1 sharpens) keeps their order, so the pick never changes, and moves the
confidence toward how often the picks are right (Guo et al., "On Calibration of
Modern Neural Networks", 2017). T is the one that minimises the mean negative
log-likelihood of the labels on the training share.

Pure code: distributions in, temperatures out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: The range a fitted temperature is kept in: beyond it a model's answers would be all
#: but constant (T → ∞) or all but certain (T → 0), which no labeled set justifies.
MIN_TEMPERATURE = 0.05
MAX_TEMPERATURE = 20.0
#: A label the model gave no mass keeps this much, so one such label does not make the loss infinite.
FLOOR = 1e-9


def scale(probs: Sequence[float], temperature: float) -> list[float]:
    """`probs` ∝ p^(1/T), renormalised (computed on logs, so tiny probabilities do not underflow)."""
    logs = [math.log(max(p, FLOOR)) / temperature for p in probs]
    top = max(logs)
    weights = [math.exp(x - top) for x in logs]
    total = sum(weights)
    return [w / total for w in weights]


def nll(dists: Sequence[Sequence[float]], labels: Sequence[int], temperature: float) -> float:
    """Mean negative log-likelihood of `labels` (class indices) under the scaled distributions."""
    if not dists:
        return 0.0
    total = 0.0
    for probs, label in zip(dists, labels, strict=True):
        total -= math.log(max(scale(probs, temperature)[label], FLOOR))
    return total / len(dists)


def fit_temperature(dists: Sequence[Sequence[float]], labels: Sequence[int]) -> float:
    """The temperature in [MIN_TEMPERATURE, MAX_TEMPERATURE] with the least mean NLL.

    The NLL of temperature scaling is not convex in T but is unimodal in practice; a coarse
    grid over log T finds the basin and a golden-section search refines it.
    """
    if not dists:
        return 1.0
    lo, hi = math.log(MIN_TEMPERATURE), math.log(MAX_TEMPERATURE)
    grid = [lo + (hi - lo) * i / 40 for i in range(41)]
    losses = [nll(dists, labels, math.exp(x)) for x in grid]
    best = min(range(len(grid)), key=lambda i: (losses[i], abs(grid[i])))
    a, b = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = nll(dists, labels, math.exp(c)), nll(dists, labels, math.exp(d))
    for _ in range(40):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = nll(dists, labels, math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = nll(dists, labels, math.exp(d))
    x = (a + b) / 2
    return math.exp(x) if nll(dists, labels, math.exp(x)) <= losses[best] else math.exp(grid[best])
