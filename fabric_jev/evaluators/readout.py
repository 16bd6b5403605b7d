"""Reading a judgment from a language model's next token: labels, spellings, mass, temperature. Pure.

Each question is read over single-token labels:

- choice: ``A``, ``B``, ``C``, … for its options in criteria order (at most 26
  a round; more options are read in rounds, see `combine_rounds`);
- noul: ``Yes`` / ``No``;
- score: the level digits ``0`` … ``n-1``.

From logprobs (`read_logprobs`): the server's top next tokens are first
checked to be a distribution: every log-probability a finite number, none
above 0 (`POSITIVE_TOLERANCE` for rounding), and the listed probabilities
adding up to at most 1 (`MASS_TOLERANCE` for rounding); anything else is
refused (`DistributionRefused`, with its `reason`). Then the spellings of one
label are merged (`spelling`: ``" yes"``, ``"YES"``, ``"Ｙｅｓ"``, ``"Yes\u200b"``
and ``"Yes"`` are one label) by log-sum-exp, never by a sum of probabilities
past 1, and renormalised over the valid labels. The mass the valid labels had
before renormalising is the *valid mass*; under `LOW_MASS` the answer is
flagged. A label the server did not list gets the smaller of the smallest
listed probability and its share of what the list leaves: an upper bound,
never 0.

From samples (`read_samples`): counts of the labels the samples named,
smoothed by adding `SAMPLE_PRIOR` to every label (Jeffreys' prior), so that
five samples of one label give 0.92, not 1. Coarse: with k samples a
probability moves in steps of about 1/k.

A profile's temperature `T` for the question's type is applied to the label
log-probabilities before renormalising: p ∝ exp(log p / T) (`temper`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..contract.provenance import SampledReason
from ..errors import AnswerInvalid
from ..questions import kind_of
from ..questions.common import LETTERS as LETTERS
from ..questions.common import NOUL_LABELS as NOUL_LABELS
from ..questions.common import score_labels as score_labels

#: Under this valid mass an answer is flagged (provenance `lowMass`): the model mostly wanted to
#: say something else, so the renormalised distribution rests on little.
LOW_MASS = 0.5
#: How many next tokens a logprobs request asks for (OpenAI's maximum).
TOP_LOGPROBS = 20
#: Labels one choice round can use.
MAX_ROUND = len(LETTERS)
#: Added to each label's count when reading samples.
SAMPLE_PRIOR = 0.5
#: Temperatures a profile may hold.
MIN_TEMPERATURE = 0.05
MAX_TEMPERATURE = 20.0
#: How far above 1 the listed probabilities may add up before the list is refused: servers send
#: float32 log-probabilities, some rounded (to two decimals: at most 0.5% over); a list that claims
#: more is not a distribution. Within it the reading is at most 1% off, under the answer's 0.02.
MASS_TOLERANCE = 0.01
#: How far above 0 a log-probability may be (rounding of a probability of 1) before it is refused.
POSITIVE_TOLERANCE = 1e-6

#: Code points that render as nothing, removed from a token wherever they are: Unicode's
#: Default_Ignorable_Code_Point (zero-width space and joiners, the byte order mark, the soft
#: hyphen, bidirectional marks, variation selectors, the combining grapheme joiner, Hangul fillers,
#: tag characters), with the rest of category Cf (format) and the control characters (Cc) that
#: are not whitespace: `_invisible` adds those two by category.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")


class NoValidLabel(AnswerInvalid):
    """None of a question's labels was among the next tokens (or the samples)."""

    reason: SampledReason = "no_label"


class DistributionRefused(AnswerInvalid):
    """The next tokens a server listed are not a distribution: a log-probability that is NaN,
    infinite or positive, or probabilities that add up to more than 1. `reason` says which."""

    def __init__(self, message: str, reason: SampledReason) -> None:
        super().__init__(message)
        self.reason: SampledReason = reason


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


def _invisible(text: str) -> str:
    text = _IGNORABLE.sub("", text)
    if any(unicodedata.category(c) in ("Cf", "Cc") for c in text):
        text = "".join(c for c in text if c.isspace() or unicodedata.category(c) not in ("Cf", "Cc"))
    return text


def spelling(token: str) -> str:
    """The form in which spellings of one label meet: invisible code points removed anywhere
    (see `_IGNORABLE`), compatibility forms folded (NFKC: fullwidth ``Ｎｏ``, mathematical and
    circled letters, superscript digits), no surrounding whitespace, case-folded (then NFKC
    again, as Unicode's caseless matching does)."""
    if token.isascii() and token.isprintable():
        return token.strip().lower()  # nothing to fold: the common case, a plain token
    text = unicodedata.normalize("NFKC", _invisible(token))
    text = _invisible(text).strip().casefold()
    return unicodedata.normalize("NFKC", text).strip()


def rounds(options: int) -> list[range]:
    """A choice's options cut into rounds of at most 26, in criteria order (one round up to 26)."""
    if options <= MAX_ROUND:
        return [range(options)]
    count = math.ceil(options / MAX_ROUND)
    size = math.ceil(options / count)  # even rounds: 27 options are 14 + 13, not 26 + 1
    return [range(start, min(start + size, options)) for start in range(0, options, size)]


def logsumexp(logs: Sequence[float]) -> float:
    """log Σ exp(x), without overflow or underflow; -inf for no terms."""
    if not logs:
        return -math.inf
    top = max(logs)
    if top == -math.inf:
        return top
    return top + math.log(math.fsum(math.exp(x - top) for x in logs))


def checked_logprobs(candidates: Sequence[tuple[str, float]], where: str) -> list[float]:
    """The candidates' log-probabilities, once they are known to be a distribution (module doc)."""
    logs: list[float] = []
    for _, logprob in candidates:
        if not math.isfinite(logprob):
            raise DistributionRefused(f"{where}: a next-token log-probability is not a finite number; "
                                      "the server's logprobs are not a distribution", "not_finite")
        if logprob > POSITIVE_TOLERANCE:
            raise DistributionRefused(f"{where}: a next-token log-probability is positive ({logprob:.4g}): "
                                      "the server's logprobs are not a distribution", "positive_logprob")
        logs.append(min(0.0, float(logprob)))
    listed = logsumexp(logs)
    if listed > math.log1p(MASS_TOLERANCE):
        raise DistributionRefused(f"{where}: the {len(logs)} next tokens the server listed add up to a "
                                  f"probability of {math.exp(min(listed, 700.0)):.4g}, more than 1: "
                                  "they are not a distribution", "mass_above_one")
    return logs


def read_logprobs(labels: Sequence[str], candidates: Sequence[tuple[str, float]], where: str) -> Reading:
    """`candidates`: the server's top next tokens as (text, log-probability). Refuses a list that is
    not a distribution (`DistributionRefused`) or names no label (`NoValidLabel`)."""
    logs = checked_logprobs(candidates, where)
    index = {spelling(label): i for i, label in enumerate(labels)}
    spellings: list[list[float]] = [[] for _ in labels]
    for (token, _), logprob in zip(candidates, logs, strict=True):
        i = index.get(spelling(token))
        if i is not None:
            spellings[i].append(logprob)
    if not any(spellings):
        raise NoValidLabel(f"{where}: none of the labels {', '.join(labels)} is among the model's "
                           f"{len(candidates)} most likely next tokens (it does not answer in the labels)")
    merged = [logsumexp(found) for found in spellings]  # -inf for a label not listed
    valid = logsumexp([m for m in merged if m > -math.inf])
    missing = sum(1 for m in merged if m == -math.inf)
    if missing:
        left = -math.expm1(min(0.0, logsumexp(logs)))  # what the list leaves of the mass
        floor = min(min(logs), math.log(left / missing) if left > 0 else -math.inf)
        floor = max(floor, valid + math.log(1e-9))  # never 0: a temperature takes its logarithm
        merged = [floor if m == -math.inf else m for m in merged]
    total = logsumexp(merged)
    return Reading(tuple(math.exp(m - total) for m in merged), min(1.0, math.exp(valid)))


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

    The one door to an LLM route's answer, its confidence included (each kind's `readout`, in
    questions/): the route builds every answer with it, and `learn`'s report builds the
    tempered answers it measures with it too (calibration.learn_temperatures.tempered)."""
    return kind_of(qtype).readout(keys, list(probabilities))


__all__ = ["LETTERS", "LOW_MASS", "MASS_TOLERANCE", "MAX_ROUND", "NOUL_LABELS", "POSITIVE_TOLERANCE", "SAMPLE_PRIOR",
           "TOP_LOGPROBS", "DistributionRefused", "NoValidLabel", "Reading", "answer", "checked_logprobs",
           "combine_rounds", "logsumexp", "read_logprobs", "read_samples", "rounds", "score_labels", "spelling",
           "temper"]
