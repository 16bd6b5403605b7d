"""The embedded offline evaluator: a HEURISTIC, not a decision model.

No decision model ships its weights on the package index, so this evaluator
turns sentence-embedding similarity (all-MiniLM-L6-v2, see minilm.py) into
Jev-shaped answers. Its confidence is NOT calibrated and its accuracy is
modest (docs/evaluators.md has the measured figures); it exists so programs
run offline, in CI and on a fresh machine. Every answer it gives names it:
the model is ``fabric-jev-local-minilm (heuristic, uncalibrated)``.

How answers are formed (all per question, independent of the question id,
of the other questions and of their order):

* the state is rendered to text and split into sentences; evidence for a
  hypothesis is the best of the whole-text and per-sentence similarities;
* noul: a "yes" hypothesis (the `true` criterion, or the question turned
  declarative) is compared with a "no" hypothesis (the `false` criterion),
  or, without one, with a fixed similarity threshold;
* choice: a softmax over the options' evidence;
* score: an ordinal position from the level evidence and the first→last
  axis, spread over the levels so that score is the expectation.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import OrderedDict
from functools import cache, partial
from typing import TYPE_CHECKING, Any

import anyio.lowlevel
import anyio.to_thread

from ..contract.values import JsonValue
from .base import NO_CREDENTIALS_NEEDED, EvaluatorStatus, ProfileStatus, evaluation_deadline, known_status
from .local_model import weights_problem

if TYPE_CHECKING:
    # numpy and the encoder load on the first answer, not when a command merely builds the
    # evaluator; so do the request's models, the word features and the profile's code.
    from collections.abc import Callable

    import numpy as np

    from ..contract.evaluation import Evaluation, EvaluationRequest, Question
    from ..contract.provenance import Provenance
    from .minilm import MiniLM
    from .profile import Profile

MODEL_NAME = "fabric-jev-local-minilm (heuristic, uncalibrated)"
ADAPTED_MODEL = "fabric-jev-local-minilm+profile:{name}"
# Chosen by hand on the labeled set in tests/data/local_eval_set.json.
NOUL_CENTER = 0.38
NOUL_WIDTH = 0.06
PAIR_TEMPERATURE = 0.04
CHOICE_TEMPERATURE = 0.03
SCORE_TEMPERATURE = 0.03
SCORE_SPREAD = 0.6
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_AUX = re.compile(r"^(does|do|did|is|are|was|were|has|have|had|can|could|will|would|should|"
                  r"may|might|must)\s+", re.IGNORECASE)


def render(value: object) -> str:
    """Text for a state, an instruction or a description (strings stay as they are)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(render(v) for v in value)
    if isinstance(value, dict):
        return "\n".join(f"{k}: {render(v)}" for k, v in value.items())
    return json.dumps(value)


def declarative(question: str) -> str:
    """'Does the text ask for a refund?' → 'the text ask for a refund'."""
    text = question.strip().rstrip("?").strip()
    return _AUX.sub("", text, count=1) or text


def _softmax(xs: list[float], temperature: float) -> list[float]:
    m = max(xs)
    es = [math.exp((x - m) / temperature) for x in xs]
    total = sum(es)
    return [e / total for e in es]


def choice_confidence(probs: list[float]) -> float:
    n = len(probs)
    return 1.0 if n <= 1 else max(0.0, (max(probs) - 1 / n) / (1 - 1 / n))


def score_confidence(probs: list[float]) -> float:
    """1 − (spread around the mode ÷ the spread of a uniform distribution)."""
    n = len(probs)
    if n <= 1:
        return 1.0
    mode = max(range(n), key=lambda i: probs[i])
    spread = sum(p * abs(i - mode) for i, p in enumerate(probs))
    uniform = sum(abs(i - (n - 1) / 2) for i in range(n)) / n
    return max(0.0, min(1.0, 1 - spread / uniform))


class LocalEvaluator:
    """Answers offline from sentence embeddings. Heuristic; uncalibrated confidence.

    With a `profile` (see profile.py), questions whose signature it knows are
    answered from the user's labeled neighbours blended with the heuristic,
    with fitted confidence; the answer's model names the profile.
    """

    #: The auto-approval classifier asks a person instead of trusting this evaluator's judgment
    #: on execute, write and network actions, unless a profile learned the approval questions.
    offline_heuristic = True

    def __init__(self, model: MiniLM | None = None, *, cache_size: int = 4096,
                 profile: Profile | None = None) -> None:
        self._model = model
        self._cache: OrderedDict[str, np.ndarray[Any, Any]] = OrderedDict()
        self._cache_size = cache_size
        # Guards the shared cache only: encoding runs unlocked, so a small request is not
        # held behind a large one (tokenizers and numpy release the GIL while they work).
        self._lock = threading.Lock()
        self.profile = profile
        self.calls = 0

    def adapted(self, profile: Profile | None) -> LocalEvaluator:
        """The same encoder and embedding cache, answering with `profile` (None: the plain heuristic)."""
        other = LocalEvaluator(self._model, cache_size=self._cache_size, profile=profile)
        other._cache = self._cache
        other._lock = self._lock
        return other

    def state_vector(self, state: JsonValue) -> np.ndarray[Any, Any]:
        """The whole state's embedding: what a profile compares with its labeled states."""
        return self._vec(render(state))

    # ------------------------------------------------------------------ embeddings

    def _vec(self, text: str) -> np.ndarray[Any, Any]:
        text = text.strip() or "(empty)"
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
            if self._model is None:
                from .minilm import shared_model

                self._model = shared_model()
            model = self._model
        vec = model.encode_one(text)
        with self._lock:
            self._cache[text] = vec
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return vec

    def _evidence(self, pieces: list[np.ndarray[Any, Any]], hypothesis: str) -> float:
        h = self._vec(hypothesis)
        return max(float(p @ h) for p in pieces)

    def _state_pieces(self, state_text: str) -> list[np.ndarray[Any, Any]]:
        sentences = [s for s in _SENTENCE.split(state_text) if len(s.strip()) > 2]
        texts = [state_text, *sentences] if len(sentences) > 1 else [state_text]
        return [self._vec(t) for t in texts[:33]]

    # ------------------------------------------------------------------ answers

    def _noul(self, pieces: list[np.ndarray[Any, Any]], q: Question) -> dict[str, Any]:
        criteria = q.criteria or {}
        question = render(q.instructions)
        yes_text = render(criteria.get("true")) or declarative(question)
        if not yes_text:
            return {"noul": 0.5}
        yes = self._evidence(pieces, yes_text)
        no_text = render(criteria.get("false"))
        if no_text:
            p = _softmax([yes, self._evidence(pieces, no_text)], PAIR_TEMPERATURE)[0]
        else:
            p = 1 / (1 + math.exp(-(yes - NOUL_CENTER) / NOUL_WIDTH))
        return {"noul": min(1.0, max(0.0, p))}

    def _choice(self, pieces: list[np.ndarray[Any, Any]], q: Question) -> dict[str, Any]:
        names = list(q.criteria)
        sims = []
        for name in names:
            desc = render(q.criteria[name])
            sims.append(self._evidence(pieces, f"{name}: {desc}" if desc else name))
        probs = _softmax(sims, CHOICE_TEMPERATURE)
        best = max(range(len(names)), key=lambda i: probs[i])
        return {"choice": names[best], "probabilities": dict(zip(names, probs, strict=True)),
                "confidence": choice_confidence(probs)}

    def _score(self, pieces: list[np.ndarray[Any, Any]], q: Question) -> dict[str, Any]:
        levels = [render(level) for level in q.criteria]
        n = len(levels)
        sims = [self._evidence(pieces, level) for level in levels]
        by_level = _softmax(sims, SCORE_TEMPERATURE)
        from_levels = sum(i * p for i, p in enumerate(by_level))
        # The ordinal axis: how much closer the state is to the top level than the bottom one.
        axis = (n - 1) / (1 + math.exp(-(sims[-1] - sims[0]) / SCORE_TEMPERATURE))
        position = (from_levels + axis) / 2
        weights = [math.exp(-((i - position) ** 2) / (2 * SCORE_SPREAD ** 2)) for i in range(n)]
        total = sum(weights)
        probs = [w / total for w in weights]
        score = sum(i * p for i, p in enumerate(probs))
        return {"score": min(float(n - 1), max(0.0, score)),
                "probabilities": {str(i): p for i, p in enumerate(probs)},
                "confidence": score_confidence(probs)}

    def answer_sync(self, request: EvaluationRequest) -> Evaluation:
        return self._answer(request)

    def _adapt(self, q: Question, prior: dict[str, Any], state: np.ndarray[Any, Any],
               terms: Callable[[], Any]) -> dict[str, Any] | None:
        """The profile's answer for `q`, or None when the profile does not know its signature."""
        model = self.profile.model_for(q) if self.profile is not None else None
        if model is None:
            return None
        from .profile import answer_distribution

        probs = model.adapt(answer_distribution(q, prior), state, terms() if model.lexical else None)
        if q.type == "noul":
            return {"type": "noul", "noul": min(1.0, max(0.0, probs[1]))}
        if q.type == "choice":
            names = list(q.criteria)
            best = max(range(len(names)), key=lambda i: probs[i])
            return {"type": "choice", "choice": names[best],
                    "probabilities": dict(zip(names, probs, strict=True)),
                    "confidence": choice_confidence(probs)}
        # The expected level, kept within half a level of the most probable one so that rounding
        # the score names the level the profile believes in (an expectation alone can land between
        # two likely levels on a third, unlikely one).
        mode = max(range(len(probs)), key=lambda i: probs[i])
        expected = sum(i * p for i, p in enumerate(probs))
        score = mode + min(0.49, max(-0.49, expected - mode))
        return {"type": "score", "score": min(float(len(probs) - 1), max(0.0, score)),
                "probabilities": {str(i): p for i, p in enumerate(probs)},
                "confidence": score_confidence(probs)}

    def _answer(self, request: EvaluationRequest) -> Evaluation:
        from ..contract.evaluation import validate_answers
        from .lexical import term_ids

        text = render(request.state)
        pieces = self._state_pieces(text)
        terms = cache(partial(term_ids, text))  # word features, once, and only if a profile asks
        answers: dict[str, Any] = {}
        adapted = 0
        for q in request.questions:
            if q.type == "noul":
                answers[q.id] = {"type": "noul", **self._noul(pieces, q)}
            elif q.type == "choice":
                answers[q.id] = {"type": "choice", **self._choice(pieces, q)}
            else:
                answers[q.id] = {"type": "score", **self._score(pieces, q)}
            better = self._adapt(q, answers[q.id], pieces[0], terms)
            if better is not None:
                answers[q.id] = better
                adapted += 1
        tokens_in = sum(len(render(x)) for x in (request.state,)) // 4 + sum(
            len(render(q.instructions)) // 4 + len(render(q.criteria)) // 4 for q in request.questions)
        model = self._model_name(adapted, len(request.questions))
        body = {"model": model, "answers": answers, "usage": {"input_tokens": tokens_in, "output_tokens": 0}}
        return validate_answers(request, body, provenance=self._provenance(model, adapted))

    def _provenance(self, model: str, adapted: int) -> Provenance:
        from ..contract.provenance import Provenance

        if self.profile is None or adapted == 0:
            return Provenance(route="local", model=model, readout="heuristic")
        return Provenance(route="local", model=model[:128], readout="heuristic", calibration="learned",
                          profile=self.profile.name)

    def _model_name(self, adapted: int, asked: int) -> str:
        """Says which answered: the plain heuristic, the profile, or the profile for some questions."""
        if self.profile is None or adapted == 0:
            return MODEL_NAME
        name = ADAPTED_MODEL.format(name=self.profile.name)
        if adapted == asked:
            return f"{name} (adapted from labels)"
        return f"{name} (adapted {adapted} of {asked} questions; the rest heuristic)"

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        await anyio.lowlevel.checkpoint_if_cancelled()  # a cancelled caller is not counted
        self.calls += 1
        with evaluation_deadline(timeout):
            evaluation = await anyio.to_thread.run_sync(self.answer_sync, request)
        return evaluation

    def status(self) -> EvaluatorStatus:
        profile = None if self.profile is None else ProfileStatus(
            name=self.profile.name, signatures=len(self.profile.models), examples=self.profile.examples)
        problem = None if self._model is not None else weights_problem()
        return known_status("local", MODEL_NAME, NO_CREDENTIALS_NEEDED, problem=problem, profile=profile)

    async def aclose(self) -> None:
        return None

