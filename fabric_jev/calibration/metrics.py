"""Calibration metrics over answered, labeled examples. Pure code, no I/O.

An answer is scored by its *top label*: the class it picks (``noul >= 0.5``,
the choice, the rounded score) and the probability it gives that class
(for a noul ``max(noul, 1 - noul)``, for a choice or a score the
probability of the picked option or level). Then:

* accuracy — the share of picks that match the label;
* Brier score — for a noul ``(noul - label)²``; for a choice or a score the
  sum over options (levels) of ``(p_k - [k is the label])²`` (0 is perfect;
  2 is the worst for a choice or score, 1 for a noul);
* expected calibration error (ECE) — picks grouped into 10 equal-width
  confidence bins; the bins' ``|accuracy − mean confidence|`` weighted by
  their share of the picks;
* a coverage curve — keep only picks with confidence ≥ t: what share is
  kept, and how accurate they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..contract.evaluation import Question
from ..evaluators.profile import answer_distribution
from ..questions import kind_of
from .labels import Label, classes_of, label_from_answer

BINS = 10


@dataclass(frozen=True, slots=True)
class AnswerOutcome:
    """One answered example, reduced to what the metrics need."""

    type: str
    predicted: Label
    label: Label
    confidence: float  # probability of the predicted class
    brier: float
    noul: float | None = None  # the yes-probability of a yes-or-no kind (a noul), for its thresholds

    @property
    def correct(self) -> bool:
        return self.predicted == self.label


distribution = answer_distribution


def outcome(question: Question, answer: dict[str, Any], label: Label) -> AnswerOutcome:
    kind = kind_of(question.type)
    classes = classes_of(question)
    probs = distribution(question, answer)
    predicted = label_from_answer(question, answer)  # what the answer picked, as a label
    confidence = probs[classes.index(predicted)]
    return AnswerOutcome(question.type, predicted, label, confidence, kind.brier(question, answer, label),
                         kind.yes_probability(answer))


def accuracy(outcomes: Sequence[AnswerOutcome]) -> float:
    return sum(o.correct for o in outcomes) / len(outcomes) if outcomes else 0.0


def brier(outcomes: Sequence[AnswerOutcome]) -> float:
    return sum(o.brier for o in outcomes) / len(outcomes) if outcomes else 0.0


@dataclass(frozen=True, slots=True)
class Bin:
    low: float
    high: float
    count: int
    confidence: float  # mean confidence in the bin (0 when empty)
    accuracy: float  # share correct in the bin (0 when empty)


def _bin_index(confidence: float, bins: int) -> int:
    return min(int(confidence * bins), bins - 1)


def reliability(outcomes: Sequence[AnswerOutcome], bins: int = BINS) -> list[Bin]:
    groups: list[list[AnswerOutcome]] = [[] for _ in range(bins)]
    for o in outcomes:
        groups[_bin_index(o.confidence, bins)].append(o)
    out = []
    for i, group in enumerate(groups):
        n = len(group)
        out.append(Bin(i / bins, (i + 1) / bins, n,
                       sum(o.confidence for o in group) / n if n else 0.0,
                       sum(o.correct for o in group) / n if n else 0.0))
    return out


def ece(outcomes: Sequence[AnswerOutcome], bins: int = BINS) -> float:
    total = len(outcomes)
    if not total:
        return 0.0
    return sum(b.count / total * abs(b.accuracy - b.confidence) for b in reliability(outcomes, bins))


@dataclass(frozen=True, slots=True)
class CoveragePoint:
    threshold: float
    coverage: float  # share of all picks with confidence >= threshold
    accuracy: float  # accuracy among them


def coverage_curve(outcomes: Sequence[AnswerOutcome]) -> list[CoveragePoint]:
    """One point per distinct confidence, from the most confident picks to all of them."""
    ranked = sorted(outcomes, key=lambda o: -o.confidence)
    points: list[CoveragePoint] = []
    right = 0
    for i, o in enumerate(ranked):
        right += o.correct
        if i + 1 < len(ranked) and ranked[i + 1].confidence == o.confidence:
            continue  # ties enter together: a threshold cannot split them
        points.append(CoveragePoint(o.confidence, (i + 1) / len(ranked), right / (i + 1)))
    return points


@dataclass(frozen=True, slots=True)
class Threshold:
    """"Act at ≥ threshold keeps precision ≥ target on these labels, covering `coverage`."""

    threshold: float
    precision: float
    coverage: float  # share of all examples acted on
    recall: float  # share of the examples whose label is the acted-on class that are acted on


def _best_cut(scored: list[tuple[float, bool]], total: int, positives: int,
              target: float) -> Threshold | None:
    """The lowest cut t (largest coverage) with precision ≥ target among scores ≥ t."""
    scored = sorted(scored, key=lambda s: -s[0])
    best: Threshold | None = None
    right = 0
    for i, (score, hit) in enumerate(scored):
        right += hit
        if i + 1 < len(scored) and scored[i + 1][0] == score:
            continue
        precision = right / (i + 1)
        if precision >= target:
            best = Threshold(score, precision, (i + 1) / total, right / positives if positives else 0.0)
    return best


def noul_thresholds(outcomes: Sequence[AnswerOutcome], target: float) -> dict[str, Threshold | None]:
    """Where to act without asking: allow at ``noul ≥ t``, deny at ``noul ≤ t``."""
    nouls = [o for o in outcomes if o.noul is not None]
    total = len(nouls)
    yes = sum(o.label is True for o in nouls)
    allow = _best_cut([(o.noul, o.label is True) for o in nouls if o.noul is not None], total, yes, target)
    deny = _best_cut([(-o.noul, o.label is False) for o in nouls if o.noul is not None], total,
                     total - yes, target)
    if deny is not None:
        deny = Threshold(-deny.threshold, deny.precision, deny.coverage, deny.recall)
    return {"allow": allow, "deny": deny}


def confidence_threshold(outcomes: Sequence[AnswerOutcome], target: float) -> Threshold | None:
    """Accept a pick without review at confidence ≥ t, keeping accuracy ≥ target."""
    right = sum(o.correct for o in outcomes)
    return _best_cut([(o.confidence, o.correct) for o in outcomes], len(outcomes), right, target)


def summary(outcomes: Sequence[AnswerOutcome], target: float = 0.95) -> dict[str, object]:
    """Accuracy, Brier, ECE and suggested thresholds, as plain JSON."""

    def cut(t: Threshold | None) -> dict[str, float] | None:
        return None if t is None else {"threshold": t.threshold, "precision": t.precision,
                                       "coverage": t.coverage, "recall": t.recall}

    out: dict[str, Any] = {"examples": len(outcomes), "accuracy": accuracy(outcomes),
                           "brier": brier(outcomes), "ece": ece(outcomes), "targetPrecision": target}
    if outcomes and all(o.noul is not None for o in outcomes):  # a yes-or-no kind's (noul's)
        out["thresholds"] = {k: cut(v) for k, v in noul_thresholds(outcomes, target).items()}
    else:
        out["thresholds"] = {"accept": cut(confidence_threshold(outcomes, target))}
    return out
