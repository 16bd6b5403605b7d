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

import threading
from collections import OrderedDict
from functools import cache, partial
from typing import TYPE_CHECKING, Any

import anyio.lowlevel
import anyio.to_thread

from .._patterns import LazyPattern
from ..contract.values import JsonValue
from .base import NO_CREDENTIALS_NEEDED, EvaluatorStatus, ProfileStatus, evaluation_deadline, known_status
from .local_model import weights_problem

# The heuristic's constants and pure helpers live with their kinds, in questions/; their old names
# stay importable from here (`__getattr__`), and load with the first answer, not with the evaluator.
_MOVED = {
    "CHOICE_TEMPERATURE": "choice", "NOUL_CENTER": "noul", "NOUL_WIDTH": "noul", "PAIR_TEMPERATURE": "noul",
    "SCORE_SPREAD": "score", "SCORE_TEMPERATURE": "score",
    **dict.fromkeys(("choice_confidence", "declarative", "render", "score_confidence"), "common"),
}


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"..questions.{_MOVED[name]}", __package__), name)


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
_SENTENCE = LazyPattern(r"(?<=[.!?;])\s+|\n+")


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
        from ..questions.common import render

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

    def answer_sync(self, request: EvaluationRequest) -> Evaluation:
        return self._answer(request)

    def _adapt(self, q: Question, prior: dict[str, Any], state: np.ndarray[Any, Any],
               terms: Callable[[], Any]) -> dict[str, Any] | None:
        """The profile's answer for `q`, or None when the profile does not know its signature."""
        model = self.profile.model_for(q) if self.profile is not None else None
        if model is None:
            return None
        from ..questions import kind_of
        from .profile import answer_distribution

        probs = model.adapt(answer_distribution(q, prior), state, terms() if model.lexical else None)
        return kind_of(q.type).adapted(q, probs)

    def _answer(self, request: EvaluationRequest) -> Evaluation:
        from ..contract.evaluation import validate_answers
        from ..questions import kind_of
        from ..questions.common import render
        from .lexical import term_ids

        text = render(request.state)
        pieces = self._state_pieces(text)
        terms = cache(partial(term_ids, text))  # word features, once, and only if a profile asks
        answers: dict[str, Any] = {}
        adapted = 0
        for q in request.questions:
            answers[q.id] = {"type": q.type, **kind_of(q.type).heuristic(q, partial(self._evidence, pieces))}
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

