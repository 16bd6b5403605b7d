"""Reading a judgment from a language model's next token: labels, spellings, mass, temperature. Pure.

Each question is read over single-token labels:

- choice: ``A``, ``B``, ``C``, … for its options in criteria order (at most 26
  a round; more options are read in rounds, see `combine_rounds`);
- noul: ``Yes`` / ``No``;
- score: the level digits ``0`` … ``n-1``.

From logprobs (`read_logprobs`): the probabilities of the server's top next
tokens are summed per label, spellings of one label merged (surrounding
whitespace and case: ``" yes"``, ``"YES"`` and ``"Yes"`` are one label), then
renormalised over the valid labels. The mass the valid labels had before
renormalising is the *valid mass*; under `LOW_MASS` the answer is flagged.
A label the server did not list gets the smaller of the smallest listed
probability and its share of what the list leaves: an upper bound, never 0.

From samples (`read_samples`): counts of the labels the samples named,
smoothed by adding `SAMPLE_PRIOR` to every label (Jeffreys' prior), so that
five samples of one label give 0.92, not 1. Coarse: with k samples a
probability moves in steps of about 1/k.

A profile's temperature `T` for the question's type is applied to the label
log-probabilities before renormalising: p ∝ exp(log p / T) (`temper`).
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import AnswerInvalid

#: Under this valid mass an answer is flagged (provenance `lowMass`): the model mostly wanted to
#: say something else, so the renormalised distribution rests on little.
LOW_MASS = 0.5
#: How many next tokens a logprobs request asks for (OpenAI's maximum).
TOP_LOGPROBS = 20
#: Labels one choice round can use.
LETTERS = tuple(string.ascii_uppercase)
MAX_ROUND = len(LETTERS)
NOUL_LABELS = ("Yes", "No")
#: Added to each label's count when reading samples.
SAMPLE_PRIOR = 0.5
#: Temperatures a profile may hold.
MIN_TEMPERATURE = 0.05
MAX_TEMPERATURE = 20.0


class NoValidLabel(AnswerInvalid):
    """None of a question's labels was among the next tokens (or the samples)."""


@dataclass(frozen=True, slots=True)
class Reading:
    """One question (or one round of a choice) read over its labels."""

    #: Renormalised over the labels, in the labels' order.
    probabilities: tuple[float, ...]
    #: The share of the next-token mass (or of the samples) that named a valid label.
    valid_mass: float

    @property
    def low(self) -> bool:
        return self.valid_mass < LOW_MASS


def spelling(token: str) -> str:
    """The form in which spellings of one label meet: no surrounding whitespace, case-folded."""
    return token.strip().casefold()


def score_labels(levels: int) -> tuple[str, ...]:
    return tuple(str(i) for i in range(levels))


def rounds(options: int) -> list[range]:
    """A choice's options cut into rounds of at most 26, in criteria order (one round up to 26)."""
    if options <= MAX_ROUND:
        return [range(options)]
    count = math.ceil(options / MAX_ROUND)
    size = math.ceil(options / count)  # even rounds: 27 options are 14 + 13, not 26 + 1
    return [range(start, min(start + size, options)) for start in range(0, options, size)]


def read_logprobs(labels: Sequence[str], candidates: Sequence[tuple[str, float]], where: str) -> Reading:
    """`candidates`: the server's top next tokens as (text, log-probability)."""
    index = {spelling(label): i for i, label in enumerate(labels)}
    mass = [0.0] * len(labels)
    seen = [False] * len(labels)
    listed = 0.0
    smallest = 1.0
    for token, logprob in candidates:
        p = math.exp(min(0.0, logprob))
        listed += p
        smallest = min(smallest, p)
        i = index.get(spelling(token))
        if i is not None:
            mass[i] += p
            seen[i] = True
    valid = sum(mass)
    if valid <= 0.0:
        raise NoValidLabel(f"{where}: none of the labels {', '.join(labels)} is among the model's "
                           f"{len(candidates)} most likely next tokens (it does not answer in the labels)")
    missing = seen.count(False)
    if missing:
        floor = min(smallest, max(0.0, 1.0 - listed) / missing)
        floor = max(floor, valid * 1e-9)  # never 0: a temperature takes its logarithm
        mass = [m if s else floor for m, s in zip(mass, seen, strict=True)]
    total = sum(mass)
    return Reading(tuple(m / total for m in mass), min(1.0, valid))


def read_samples(labels: Sequence[str], picks: Sequence[str | None], where: str,
                 prior: float = SAMPLE_PRIOR) -> Reading:
    """`picks`: the label each sample named (None, or anything else, for a sample that named none)."""
    index = {spelling(label): i for i, label in enumerate(labels)}
    counts = [0] * len(labels)
    for pick in picks:
        i = index.get(spelling(pick)) if pick is not None else None
        if i is not None:
            counts[i] += 1
    valid = sum(counts)
    if valid == 0:
        raise NoValidLabel(f"{where}: none of the {len(picks)} samples named one of the labels {', '.join(labels)}")
    total = valid + prior * len(labels)
    return Reading(tuple((c + prior) / total for c in counts), valid / len(picks))


def temper(probabilities: Sequence[float], temperature: float) -> tuple[float, ...]:
    """p ∝ exp(log p / T): T > 1 softens, T < 1 sharpens, T = 1 leaves it as it is."""
    if temperature == 1.0:
        return tuple(probabilities)
    logs = [math.log(max(p, 1e-300)) / temperature for p in probabilities]
    top = max(logs)
    scaled = [math.exp(x - top) for x in logs]
    total = sum(scaled)
    return tuple(s / total for s in scaled)


def combine_rounds(groups: Sequence[Reading], final: Reading, winners: Sequence[int]) -> tuple[float, ...]:
    """One distribution over all options from rounds of at most 26 and a final round among their winners.

    Read as a softmax over options (a choice that does not depend on which other
    options are shown), option i of round g has p(i) ∝ final(g) · q_g(i) / q_g(w_g),
    where q_g is round g's reading and w_g its winner, the option that went to the
    final. Exact for such a model; for a real one, an approximation (docs).
    """
    weights: list[float] = []
    for g, reading in enumerate(groups):
        anchor = reading.probabilities[winners[g]]
        weights += [final.probabilities[g] * q / anchor for q in reading.probabilities]
    total = sum(weights)
    return tuple(w / total for w in weights)


def answer(qtype: str, keys: Sequence[str], probabilities: Sequence[float]) -> dict[str, Any]:
    """The wire answer for a question of `qtype` whose labels stand for `keys`, from their probabilities.

    The one definition of an LLM route's answer, its confidence included (`choice_confidence`,
    `score_confidence`): the route builds every answer with it, and `learn`'s report builds the
    tempered answers it measures with it too (calibration.learn_temperatures.tempered)."""
    from .local import choice_confidence, score_confidence

    probs = list(probabilities)
    if qtype == "noul":
        return {"type": "noul", "noul": probs[0]}
    best = max(range(len(probs)), key=lambda i: probs[i])
    if qtype == "choice":
        return {"type": "choice", "choice": keys[best], "probabilities": dict(zip(keys, probs, strict=True)),
                "confidence": choice_confidence(probs)}
    # The expected level: the wire's rule (a score is Σ i·p, jevcompat's score.expectation). The most
    # probable level is the largest of `probabilities`; between two likely levels they can differ.
    score = sum(i * p for i, p in enumerate(probs))
    return {"type": "score", "score": min(float(len(probs) - 1), max(0.0, score)),
            "probabilities": {str(i): p for i, p in enumerate(probs)}, "confidence": score_confidence(probs)}


__all__ = ["LETTERS", "LOW_MASS", "MAX_ROUND", "NOUL_LABELS", "SAMPLE_PRIOR", "TOP_LOGPROBS", "NoValidLabel",
           "Reading", "answer", "combine_rounds", "read_logprobs", "read_samples", "rounds", "score_labels",
           "spelling", "temper"]
