"""`fabric-jev learn`: fit a local-evaluator profile from labeled examples, honestly.

Per question signature the examples are split once, deterministically (by
the digest of each example, so the split never depends on file order): a
held-out share is set aside and never used for fitting. The profile is fitted
on the rest; before/after accuracy, Brier and ECE are measured on the held-out
share only, the "before" being the plain heuristic and the "after" the local
evaluator answering with the new profile through its normal path.

Fitting (see fabric_jev.evaluators.profile for the model): for each signature,
a grid over the word features' share of the similarity, the kernel
temperature, the ridge penalty, the two blend weights and the floor, scored
by the exact leave-one-out log loss of the training examples (ridge
regression gives every example's prediction without itself in closed form).
numpy only; no pickle anywhere.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ProfileInvalid
from ..evaluators.lexical import MAX_PROFILE_IDS, LexicalIndex, term_ids
from ..evaluators.profile import (
    MAX_EXAMPLES,
    MAX_EXAMPLES_PER_SIGNATURE,
    MAX_PROFILE_BYTES,
    MAX_SIGNATURES,
    PRIOR_FLOOR,
    Profile,
    SignatureModel,
    answer_distribution,
    check_profile_name,
    class_count,
    embedding_fingerprint,
    kernel,
)
from ..questions import listed
from ..questions.common import render
from .labels import LabeledExample
from .metrics import AnswerOutcome, outcome, summary

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..evaluators.local import LocalEvaluator

LEXICAL_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)  # λ: 0 is MiniLM alone, 1 the words alone
KERNEL_TEMPERATURES = (0.0, 0.1, 0.2, 0.5)  # 0: plain cosine
RIDGE_PENALTIES = (0.03, 0.1, 0.3, 1.0, 3.0)
READOUT_WEIGHTS = tuple(i * 0.5 for i in range(41))  # 0 … 20
PRIOR_WEIGHTS = tuple(i * 0.25 for i in range(9))  # 0 … 2
FLOORS = (0.0, 0.05, 0.1, 0.2)
MIN_TRAINING = 2  # leave-one-out needs a neighbour
SUPPORT_QUANTILE = 0.1  # the support threshold: this share of training states have a nearer neighbour

Progress = Callable[[int], None]


@dataclass(frozen=True)
class Prepared:
    """An example with the heuristic's answer to it, its state's embedding and its word features."""

    example: LabeledExample
    prior_answer: dict[str, Any]
    vector: npt.NDArray[np.float32]
    terms: npt.NDArray[np.uint32]

    @property
    def prior(self) -> list[float]:
        return answer_distribution(self.example.question, self.prior_answer)


def _rank(example: LabeledExample, seed: int = 0) -> str:
    """A fixed, content-based order: splits and folds never depend on the file's order.

    Another `seed` gives another order (another split), so a user can see how much the
    held-out figures move with the split; seed 0 is the default split.
    """
    salt = f"{seed}:" if seed else ""
    return hashlib.sha256(f"{salt}{example.key}{example.id}".encode()).hexdigest()


def split(examples: Sequence[LabeledExample], holdout: float,
          seed: int = 0) -> tuple[list[LabeledExample], list[LabeledExample]]:
    """(training, held out): per signature, the `holdout` share with the lowest digests is held out."""
    by_signature: dict[str, list[LabeledExample]] = {}
    for e in examples:
        by_signature.setdefault(e.signature, []).append(e)
    train: list[LabeledExample] = []
    test: list[LabeledExample] = []
    for group in by_signature.values():
        ranked = sorted(group, key=lambda e: _rank(e, seed))
        n_test = min(round(len(ranked) * holdout), max(0, len(ranked) - MIN_TRAINING))
        test += ranked[:n_test]
        train += ranked[n_test:]
    return train, test


def check_limits(train: Sequence[LabeledExample], terms: Sequence[npt.NDArray[np.uint32]]) -> None:
    """Refuse, before any embedding or fitting, a training share whose profile could not be saved or loaded.

    `terms`: the word ids of each training state, as the profile would store them.
    """
    counts: dict[str, int] = {}
    for e in train:
        counts[e.signature] = counts.get(e.signature, 0) + 1
    fix = "use fewer examples (or a larger --holdout)"
    if len(counts) > MAX_SIGNATURES:
        raise ProfileInvalid(f"the labels ask {len(counts)} different questions; a profile holds at most "
                             f"{MAX_SIGNATURES}")
    if max(counts.values(), default=0) > MAX_EXAMPLES_PER_SIGNATURE or len(train) > MAX_EXAMPLES:
        raise ProfileInvalid(f"a profile holds at most {MAX_EXAMPLES_PER_SIGNATURE} training examples per "
                             f"question and {MAX_EXAMPLES} in all; these labels would train "
                             f"{max(counts.values())} for one question, {len(train)} in all: {fix}")
    ids = sum(len(t) for t in terms)
    if ids > MAX_PROFILE_IDS:
        raise ProfileInvalid(f"the training states hold {ids} word ids; a profile holds at most "
                             f"{MAX_PROFILE_IDS}: {fix}, or shorter states")
    # Base64 of a float16 vector, of the weights and of the word ids, plus a training digest.
    estimate = len(train) * (1024 + 24 + 19) + ids * 16 // 3
    if estimate > MAX_PROFILE_BYTES:
        raise ProfileInvalid(f"a profile of {len(train)} examples would take about {estimate >> 20} MiB; "
                             f"the limit is {MAX_PROFILE_BYTES >> 20} MiB: {fix}, or shorter states")


def word_ids(examples: Sequence[LabeledExample]) -> list[npt.NDArray[np.uint32]]:
    """Each example's state as word-feature ids (cheap: no model)."""
    return [term_ids(render(e.state)) for e in examples]


def prepare(evaluator: LocalEvaluator, examples: Sequence[LabeledExample],
            progress: Progress | None = None,
            terms: Sequence[npt.NDArray[np.uint32]] | None = None) -> list[Prepared]:
    """The heuristic's answer, the state vector and the word ids for each example (no profile).

    `terms`, when given, are the examples' word ids already computed (see word_ids).
    """
    plain = evaluator.adapted(None)
    terms = word_ids(examples) if terms is None else terms
    out = []
    for e, ids in zip(examples, terms, strict=True):
        answer = plain.answer_sync(e.request()).answers["q"]
        out.append(Prepared(e, answer, plain.state_vector(e.state), ids))
        if progress is not None:
            progress(1)
    return out


def _ridge_path(k: Any, targets: Any, penalties: Sequence[float]) -> Iterator[tuple[float, Any, Any]]:
    """(penalty, weights, leave-one-out read-outs) of kernel ridge regression for each penalty.

    One eigendecomposition of the (symmetric) kernel serves every penalty: with
    K = V·diag(s)·Vᵀ, the hat matrix is V·diag(s / (s + p))·Vᵀ, and each example's
    read-out without itself follows in closed form from the hat matrix's diagonal.
    """
    import numpy as np

    s, v = np.linalg.eigh(k)
    s = np.clip(s, 0.0, None)  # a kernel is positive semi-definite; rounding can dip below 0
    projected = v.T @ targets
    for penalty in penalties:
        shrink = s / (s + penalty)
        fitted = v @ (shrink[:, None] * projected)
        leverage = np.clip(1.0 - (v**2) @ shrink, 1e-9, None)[:, None]
        weights = v @ (projected / (s + penalty)[:, None])
        yield penalty, weights, targets - (targets - fitted) / leverage


def _blend_loss(readout: Any, log_prior: Any, labels: Any, classes: int) -> tuple[float, float, float, float]:
    """(loss, a, b, ε) minimising the mean log loss of (1 − ε)·softmax(a·r + b·log prior) + ε/classes."""
    import numpy as np

    a = np.asarray(READOUT_WEIGHTS)[:, None, None, None]
    b = np.asarray(PRIOR_WEIGHTS)[None, :, None, None]
    z = a * readout[None, None] + b * log_prior[None, None]  # (A, B, n, classes)
    z = z - z.max(axis=-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=-1, keepdims=True)
    right = p[..., np.arange(len(labels)), labels]  # (A, B, n)
    best: tuple[float, float, float, float] | None = None
    for floor in FLOORS:
        loss = -np.log((1 - floor) * right + floor / classes).mean(axis=-1)
        i, j = np.unravel_index(int(np.argmin(loss)), loss.shape)
        if best is None or loss[i, j] < best[0] - 1e-12:
            best = (float(loss[i, j]), READOUT_WEIGHTS[i], PRIOR_WEIGHTS[j], floor)
    assert best is not None
    return best


def fit_signature(items: Sequence[Prepared]) -> SignatureModel:
    """Grid-search λ, τ, the ridge penalty, a, b and ε by leave-one-out log loss on `items` (one signature)."""
    import numpy as np

    question = items[0].example.question
    classes = class_count(question)
    # Fit on the float16 vectors the profile stores, so the saved profile answers exactly as measured.
    vectors = np.stack([p.vector for p in items]).astype("<f2").astype(np.float32)
    labels = np.asarray([p.example.class_index for p in items])
    targets = np.eye(classes)[labels] - 1.0 / classes
    log_prior = np.log(np.clip(np.asarray([p.prior for p in items]), PRIOR_FLOOR, 1.0))
    lexical = LexicalIndex([p.terms for p in items])
    minilm, words = (vectors @ vectors.T).astype(np.float64), lexical.gram()
    best: tuple[float, float, float, float, float, float, float, float] | None = None
    for share in LEXICAL_WEIGHTS:
        sims = (1.0 - share) * minilm + share * words
        # Each training state's nearest *other* labeled state: what a new state's nearest is
        # compared with, and what its read-out is trusted by in the leave-one-out fit too.
        nearest = (sims - 4.0 * np.eye(len(items))).max(axis=1)
        support = max(0.0, float(np.quantile(nearest, SUPPORT_QUANTILE)))
        trust = (np.clip(nearest / support, 0.0, 1.0) if support > 0 else np.ones(len(items)))[:, None]
        for temperature in KERNEL_TEMPERATURES:
            for penalty, _, loo in _ridge_path(kernel(sims, temperature), targets, RIDGE_PENALTIES):
                loss, a, b, floor = _blend_loss(trust * loo, log_prior, labels, classes)
                if best is None or loss < best[0] - 1e-12:
                    best = (loss, share, temperature, penalty, a, b, floor, support)
    assert best is not None
    _, share, temperature, penalty, a, b, floor, support = best
    ((_, weights, _),) = _ridge_path(kernel((1.0 - share) * minilm + share * words, temperature), targets,
                                     (penalty,))
    return SignatureModel(question=question, vectors=vectors, weights=weights.astype(np.float32),
                          labels=tuple(int(y) for y in labels), kernel_temperature=temperature,
                          ridge=penalty, readout_weight=a, prior_weight=b, floor=floor,
                          lexical_weight=share, lexical=lexical, support=support)


def _clip(text: Any, n: int = 80) -> str:
    s = text if isinstance(text, str) else str(text)
    return s if len(s) <= n else s[: n - 1] + "…"


@dataclass(frozen=True)
class LearnResult:
    profile: Profile
    report: dict[str, Any]


def _fit_all(prepared: Sequence[Prepared]) -> tuple[dict[str, SignatureModel], dict[str, list[Prepared]]]:
    groups: dict[str, list[Prepared]] = {}
    for p in prepared:
        groups.setdefault(p.example.signature, []).append(p)
    models = {sig: fit_signature(items) for sig, items in groups.items() if len(items) >= MIN_TRAINING}
    return models, groups


Measured = dict[str, dict[str, list[AnswerOutcome]]]  # signature → {"before": [...], "after": [...]}


def _measure(evaluator: LocalEvaluator, profile: Profile, prepared: Sequence[Prepared],
             into: Measured) -> None:
    """The heuristic's and the profile's outcomes on `prepared`, which the profile never saw."""
    adapted = evaluator.adapted(profile)
    for p in prepared:
        e = p.example
        answer = adapted.answer_sync(e.request()).answers["q"]
        pair = into.setdefault(e.signature, {"before": [], "after": []})
        pair["before"].append(outcome(e.question, p.prior_answer, e.label))
        pair["after"].append(outcome(e.question, answer, e.label))


def _pooled(measured: Measured, key: str, target: float) -> dict[str, Any] | None:
    outs = [o for pair in measured.values() for o in pair[key]]
    return summary(outs, target) if outs else None


def cross_validate(evaluator: LocalEvaluator, prepared: Sequence[Prepared], folds: int, *,
                   target: float = 0.95, embedding_sha256: str = "", seed: int = 0) -> dict[str, object]:
    """Every example answered by a profile fitted without it (`folds` folds per signature; `seed` as split's)."""
    by_signature: dict[str, list[Prepared]] = {}
    for p in prepared:
        by_signature.setdefault(p.example.signature, []).append(p)
    ranked = {sig: sorted(items, key=lambda p: _rank(p.example, seed)) for sig, items in by_signature.items()}
    measured: Measured = {}
    for fold in range(folds):
        held = [p for items in ranked.values() for i, p in enumerate(items) if i % folds == fold]
        rest = [p for items in ranked.values() for i, p in enumerate(items) if i % folds != fold]
        models, _ = _fit_all(rest)
        profile = Profile(name="fold", embedding_sha256=embedding_sha256, models=models,
                          training=frozenset(p.example.key for p in rest))
        _measure(evaluator, profile, held, measured)
    return {"folds": folds, "examples": len(prepared),
            "before": _pooled(measured, "before", target), "after": _pooled(measured, "after", target),
            "types": {t: {k: summary([o for pair in measured.values() for o in pair[k] if o.type == t], target)
                          for k in ("before", "after")}
                      for t in listed()
                      if any(o.type == t for pair in measured.values() for o in pair["before"])}}


def learn(evaluator: LocalEvaluator, examples: Sequence[LabeledExample], *, name: str,
          holdout: float = 0.3, folds: int = 5, target: float = 0.95, progress: Progress | None = None,
          embedding_sha256: str | None = None, seed: int = 0) -> LearnResult:
    """Fit a profile on the training share; measure the heuristic and the profile on the held-out share.

    With `folds` ≥ 2, also cross-validate over every example (a larger, less noisy measurement
    than one held-out share; the shipped profile is still the one fitted on the training share).
    """
    check_profile_name(name, "learn")
    sha = embedding_sha256 or embedding_fingerprint()
    train, test = split(examples, holdout, seed)
    terms = word_ids([*train, *test])
    check_limits(train, terms[: len(train)])
    prepared = prepare(evaluator, [*train, *test], progress, terms)
    train_p, test_p = prepared[: len(train)], prepared[len(train):]
    models, groups = _fit_all(train_p)
    skipped = sorted(sig for sig in groups if sig not in models)
    profile = Profile(name=name, embedding_sha256=sha, models=models,
                      training=frozenset(p.example.key for p in train_p))
    measured: Measured = {}
    _measure(evaluator, profile, test_p, measured)
    signatures = []
    for sig, items in groups.items():
        model = models.get(sig)
        q = items[0].example.question
        pair = measured.get(sig, {"before": [], "after": []})
        signatures.append({
            "signature": sig, "type": q.type, "instructions": _clip(q.instructions),
            "trained": len(items), "heldOut": len(pair["before"]),
            "fit": None if model is None else {
                "lexicalWeight": model.lexical_weight, "kernelTemperature": model.kernel_temperature,
                "ridge": model.ridge,
                "readoutWeight": model.readout_weight, "priorWeight": model.prior_weight,
                "floor": model.floor},
            "before": summary(pair["before"], target) if pair["before"] else None,
            "after": summary(pair["after"], target) if pair["after"] else None,
        })
    report: dict[str, Any] = {
        "examples": len(examples), "trained": len(train), "heldOut": len(test), "holdout": holdout,
        "seed": seed,
        "before": _pooled(measured, "before", target), "after": _pooled(measured, "after", target),
        "signatures": signatures, "skipped": skipped,
    }
    if folds >= 2:
        report["crossValidated"] = cross_validate(evaluator, prepared, folds, target=target, seed=seed,
                                                  embedding_sha256=sha)
    return LearnResult(Profile(name=name, embedding_sha256=sha, models=models,
                               training=profile.training, report=_short(report)), report)


def _short(report: dict[str, Any]) -> dict[str, Any]:
    """What the profile file keeps of the report: the headline numbers."""
    def pick(s: dict[str, Any] | None) -> dict[str, float] | None:
        return None if s is None else {k: s[k] for k in ("examples", "accuracy", "brier", "ece")}

    out = {"examples": report["examples"], "trained": report["trained"], "heldOut": report["heldOut"],
           "seed": report["seed"], "before": pick(report["before"]), "after": pick(report["after"])}
    if "crossValidated" in report:
        cv = report["crossValidated"]
        out["crossValidated"] = {"folds": cv["folds"], "before": pick(cv["before"]), "after": pick(cv["after"])}
    return out
