"""The logprob readout refuses nonsense (issue 39), fuzzed: every spelling of a label is that label
(NFKC, invisible code points anywhere, case, surrounding whitespace) and nothing visible is; a list
that is a distribution reads as one, however its tokens are split among spellings and ordered; a list
that is not one (NaN, infinities, positive log-probabilities, a mass over 1) is refused with its
reason, whatever else it holds.

The invisible code points are found here from Unicode's own data (category Cf, the control
characters that are not whitespace, and the default-ignorable code points outside Cf), not from the
readout's list.
"""

from __future__ import annotations

import math
import random
import unicodedata
from functools import cache

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fabric_jev.evaluators.readout import (
    LETTERS,
    MASS_TOLERANCE,
    NOUL_LABELS,
    DistributionRefused,
    NoValidLabel,
    read_logprobs,
    spelling,
)

# Default_Ignorable_Code_Point outside category Cf (Unicode's DerivedCoreProperties.txt, assigned ones).
_IGNORABLE_NOT_CF = ["\u034f", "\u115f", "\u1160", "\u17b4", "\u17b5", "\u180b", "\u180c", "\u180d", "\u180f",
                     "\u3164", "\uffa0", *map(chr, range(0xFE00, 0xFE10)), *map(chr, range(0xE0100, 0xE01F0))]
LABEL_SETS = [NOUL_LABELS, LETTERS[:5], tuple(str(i) for i in range(10))]
ALL_LABELS = sorted({label for labels in LABEL_SETS for label in labels})
SPACES = [" ", "\n", "\t", "\r\n", "\u00a0", "\u2002", "\u3000", "\u202f"]


@cache
def invisible() -> list[str]:
    found = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) in ("Cf", "Cc")
             and not chr(c).isspace()]
    return found + _IGNORABLE_NOT_CF


def _forms(c: str) -> list[str]:
    """Ways to write one character of a label that NFKC and case folding read as it."""
    forms = [c, c.lower(), c.upper()]
    if "!" <= c <= "~":
        forms.append(chr(ord(c) + 0xFEE0))  # fullwidth
    if "A" <= c <= "Z":
        forms += [chr(0x1D400 + ord(c) - 65), chr(0x24B6 + ord(c) - 65)]  # mathematical bold, circled
    elif "a" <= c <= "z":
        forms += [chr(0x1D41A + ord(c) - 97), chr(0x24D0 + ord(c) - 97)]
    elif "0" <= c <= "9":
        forms += [chr(0x1D7CE + ord(c) - 48), chr(0x1D7EC + ord(c) - 48)]  # mathematical bold, sans-serif bold
    return forms


@st.composite
def spelled(draw: st.DrawFn, label: str) -> str:
    """`label` as a tokenizer or a hostile server might write it."""
    hidden = st.lists(st.sampled_from(invisible()), max_size=2).map("".join)
    text = draw(st.lists(st.sampled_from(SPACES), max_size=2).map("".join)) + draw(hidden)
    for c in label:
        text += draw(st.sampled_from(_forms(c))) + draw(hidden)
    return text + draw(st.lists(st.sampled_from(SPACES), max_size=2).map("".join))


@st.composite
def a_label_spelled(draw: st.DrawFn) -> tuple[str, str]:
    label = draw(st.sampled_from(ALL_LABELS))
    return label, draw(spelled(label))


# ------------------------------------------------------------------ spellings

@given(a_label_spelled())
@example(("No", "Ｎｏ"))
@example(("No", "No\u200b"))
@example(("Yes", "\ufeffY\u00ades\u2060"))
@example(("A", "\u202eA\u202c"))
def test_every_spelling_of_a_label_is_that_label(case: tuple[str, str]) -> None:
    label, text = case
    assert spelling(text) == spelling(label)


@given(st.sampled_from(ALL_LABELS), st.characters(exclude_categories=("Cs", "Cn", "Cf", "Cc")))
@example("No", "x")
@example("No", "\u0301")  # a combining accent makes another letter: "Nó" is not "No"
def test_a_visible_character_more_is_another_token(label: str, extra: str) -> None:
    if extra.isspace() or extra in invisible():
        return
    assert spelling(label + extra) != spelling(label)
    assert spelling(extra + label) != spelling(label)


@given(st.text(max_size=12) | a_label_spelled().map(lambda case: case[1]))
def test_spelling_is_idempotent(text: str) -> None:
    once = spelling(text)
    assert spelling(once) == once


# ------------------------------------------------------------------ distributions

JUNK = ["The", " I", "Sure", "\n", "<think>", "Yes,", "Nope", "A.", "10"]


@st.composite
def honest(draw: st.DrawFn, complete: bool = False) -> tuple[tuple[str, ...], list[tuple[str, int | None, float]]]:
    """Labels, and listed tokens as (text, the label it spells or None, probability), a mass ≤ 1;
    `complete`: every label among them."""
    labels = draw(st.sampled_from(LABEL_SETS))
    count = draw(st.integers(1, 20))
    entries: list[tuple[str, int | None]] = []
    for _ in range(count):
        i = draw(st.none() | st.integers(0, len(labels) - 1))
        text = draw(st.sampled_from(JUNK)) if i is None else draw(spelled(labels[i]))
        entries.append((text, None if i is None else i))
    if all(i is None for _, i in entries):
        entries[0] = (labels[0], 0)
    if complete:
        entries += [(draw(spelled(label)), i) for i, label in enumerate(labels) if i not in {j for _, j in entries}]
        count = len(entries)
    weights = draw(st.lists(st.floats(0.001, 1.0), min_size=count, max_size=count))
    mass = draw(st.floats(0.05, 1.0))
    total = sum(weights)
    return labels, [(t, i, w / total * mass) for (t, i), w in zip(entries, weights, strict=True)]


def reference(labels: tuple[str, ...], listed: list[tuple[str, int | None, float]]) -> tuple[list[float], float]:
    """The readout's rule in probabilities, written out again: each label's mass, an unlisted label
    the smaller of the smallest listed probability and its share of what the list leaves."""
    mass = [0.0] * len(labels)
    seen = [False] * len(labels)
    for _, i, p in listed:
        if i is not None:
            mass[i] += p
            seen[i] = True
    valid = sum(mass)
    missing = seen.count(False)
    if missing:
        floor = min(min(p for _, _, p in listed), max(0.0, 1 - sum(p for _, _, p in listed)) / missing)
        floor = max(floor, valid * 1e-9)
        mass = [m if s else floor for m, s in zip(mass, seen, strict=True)]
    return [m / sum(mass) for m in mass], valid


def candidates(listed: list[tuple[str, int | None, float]]) -> list[tuple[str, float]]:
    return [(t, math.log(p)) for t, _, p in listed]


@given(honest(), st.randoms(use_true_random=False))
def test_a_distribution_reads_as_one_whatever_its_order(case: tuple[tuple[str, ...], list[tuple[str, int | None, float]]],
                                                        rng: random.Random) -> None:
    labels, listed = case
    reading = read_logprobs(labels, candidates(listed), "q")
    probabilities, valid = reference(labels, listed)
    assert reading.probabilities == pytest.approx(probabilities, rel=1e-9, abs=1e-12)
    assert math.fsum(reading.probabilities) == pytest.approx(1.0, abs=1e-12)
    assert all(0 < p <= 1 for p in reading.probabilities)
    assert reading.valid_mass == pytest.approx(valid, rel=1e-9) and 0 < reading.valid_mass <= 1
    shuffled = list(listed)
    rng.shuffle(shuffled)
    assert read_logprobs(labels, candidates(shuffled), "q").probabilities == pytest.approx(reading.probabilities)


@given(honest(complete=True), st.data())
def test_a_token_split_among_spellings_merges_back_by_log_sum_exp(
        case: tuple[tuple[str, ...], list[tuple[str, int | None, float]]], data: st.DataObject) -> None:
    """Every label listed: splitting a token lowers the smallest listed probability, and so the
    bound an unlisted label would get, but changes nothing else."""
    labels, listed = case
    at = data.draw(st.sampled_from([k for k, (_, i, _) in enumerate(listed) if i is not None]))
    _, i, p = listed[at]
    assert i is not None
    parts = data.draw(st.integers(2, 5))
    split = [(data.draw(spelled(labels[i])), i, p / parts) for _ in range(parts)]
    whole = read_logprobs(labels, candidates(listed), "q")
    pieces = read_logprobs(labels, candidates(listed[:at] + split + listed[at + 1:]), "q")
    assert pieces.probabilities == pytest.approx(whole.probabilities, rel=1e-9)
    assert pieces.valid_mass == pytest.approx(whole.valid_mass, rel=1e-9)


@given(honest(), st.data())
@example(case=(NOUL_LABELS, [("Yes", 0, 0.99)] + [("No", 1, 1.0)] * 19), data=None)  # the 19.99
def test_a_list_whose_mass_is_over_one_is_refused(
        case: tuple[tuple[str, ...], list[tuple[str, int | None, float]]], data: st.DataObject | None) -> None:
    labels, listed = case
    # Copies of a listed token (the same text, or other spellings of it) until the mass is past 1.
    total = sum(p for _, _, p in listed)
    if total <= 1 + MASS_TOLERANCE:
        likeliest = sorted(range(len(listed)), key=lambda k: -listed[k][2])[:3]  # a few hundred copies at most
        k = data.draw(st.sampled_from(likeliest)) if data else likeliest[0]
        text, i, p = listed[k]
        copies = [data.draw(spelled(labels[i])) if data and i is not None else text for _ in range(2)]
        need = math.floor((1 + MASS_TOLERANCE - total) / p) + 1
        listed = [*listed, *((copies[n % 2], i, p) for n in range(need))]
    assert sum(p for _, _, p in listed) > 1 + MASS_TOLERANCE
    with pytest.raises(DistributionRefused, match=r"^q: the \d+ next tokens the server listed add up to a "
                                                  r"probability of [\d.e+]+, more than 1") as err:
        read_logprobs(labels, candidates(listed), "q")
    assert err.value.reason == "mass_above_one"


@given(honest(), st.data(), st.sampled_from([math.nan, math.inf, -math.inf]) | st.floats(1e-5, 1e300))
def test_a_log_probability_that_is_not_one_is_refused_wherever_it_is(
        case: tuple[tuple[str, ...], list[tuple[str, int | None, float]]], data: st.DataObject, bad: float) -> None:
    labels, listed = case
    at = data.draw(st.integers(0, len(listed)))
    token = data.draw(st.sampled_from([*labels, *JUNK]))
    bad_list = candidates(listed)
    bad_list.insert(at, (token, bad))
    with pytest.raises(DistributionRefused, match=r"^q: a next-token log-probability is") as err:
        read_logprobs(labels, bad_list, "q")
    assert err.value.reason == ("positive_logprob" if math.isfinite(bad) else "not_finite")


def test_rounding_is_not_refused() -> None:
    # A probability of 1 written with a float32 rounding error, and a list 0.5% over its mass.
    assert read_logprobs(NOUL_LABELS, [("Yes", 5e-7), ("No", -20.0)], "q").probabilities[0] == pytest.approx(1)
    over = read_logprobs(NOUL_LABELS, [("Yes", math.log(0.705)), ("No", math.log(0.3))], "q")
    assert over.probabilities == pytest.approx((0.705 / 1.005, 0.3 / 1.005)) and over.valid_mass == 1.0


def test_labels_listed_far_below_every_float_still_read() -> None:
    """Log-sum-exp, not a sum of probabilities: labels at -800 (e^-800 is 0 as a float) still read."""
    reading = read_logprobs(NOUL_LABELS, [("The", -0.01), ("Yes", -800.0), ("No", -801.0)], "q")
    assert reading.probabilities == pytest.approx((1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1))))
    assert reading.valid_mass == 0.0 and reading.low
    with pytest.raises(NoValidLabel):
        read_logprobs(NOUL_LABELS, [("The", -0.01)], "q")
