"""Deterministic answers from a JSON file, for tests, examples and offline demos.

Format (docs/evaluators.md)::

    {
      "model": "fixture",                              # optional
      "usage": {"input_tokens": 0, "output_tokens": 0},  # optional, per request
      "answers": {"<question id>": <answer>},          # default answer per id
      "rules": [                                       # optional, first match wins
        {"question": "<id>", "stateContains": "<text>",
         "instructionsContain": "<text>", "answer": <answer>}
      ]
    }

An answer is the wire form (``{"noul": 0.9}``, ``{"choice": "a",
"probabilities": {...}, "confidence": 0.8}``, ``{"score": 1.5,
"probabilities": {...}, "confidence": 0.7}``) or a shorthand: ``{"choice":
"a"}`` or ``{"score": 2}`` expand to a one-hot distribution with confidence 1.
Every answer goes through the same validation as an upstream answer. A rule
matches when every condition it gives holds: its `question` is the id,
`stateContains` appears in the state's JSON, `instructionsContain` in the
question's instructions (their JSON when not a string), so two wordings of one
question can be answered differently.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio.lowlevel

from .._json import copy_tree
from ..contract.evaluation import (
    Evaluation,
    EvaluationRequest,
    Question,
    check_answer,
    checked_evaluation,
    validate_answers,
)
from ..contract.provenance import Provenance
from ..errors import AnswerInvalid, ConfigError
from ..questions import KINDS
from .base import NO_CREDENTIALS_NEEDED, EvaluatorStatus

#: `FixtureEvaluator.requests` keeps this many of the latest requests: a server that
#: answers from a fixture (`fabric-jev serve --evaluator fixture:FILE`) runs for days.
KEPT_REQUESTS = 1000
#: Checked answers a fixture keeps (`FixtureEvaluator._answered`): a server asks the same few
#: questions of it again and again.
KEPT_ANSWERS = 256


def expand_answer(q: Question, answer: object) -> object:
    """An answer with its type filled in and its kind's shorthand expanded (``{"choice": "a"}`` and
    ``{"score": 2}`` to one-hot probabilities with confidence 1)."""
    if not isinstance(answer, dict):
        return answer
    kind = KINDS.get(q.type)
    answer = {"type": q.type, **answer}
    return answer if kind is None else kind.expand_shorthand(q, answer)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


#: A kept answer: the fixture's answer, a copy of it as it was, the checked answer, its `_copier` keys.
_Kept = tuple[Any, Any, dict[str, Any], tuple[str, ...] | None]
#: `_frozen`'s answer for a value it does not freeze: an answer to such a question is not kept.
_UNFROZEN: Any = object()


def _frozen(value: Any) -> Any:
    """A hashable stand-in for text, or a list or object of text, equal only for equal values (the
    tags tell a list from an object); `_UNFROZEN` for anything else: numbers, where 1, 1.0 and True
    are equal keys but not equal JSON, and nested values, whose freezing costs what a check does."""
    if value is None or value.__class__ is str:
        return value
    if value.__class__ is dict:
        if all(v is None or v.__class__ is str for v in value.values()):
            return ("{", *value.items())
    elif value.__class__ is list and all(v.__class__ is str for v in value):
        return ("[", *value)
    return _UNFROZEN


_CONTAINERS = (dict, list)


def _same(a: Any, b: Any) -> bool:
    """JSON values equal and of the same types all the way down (1, 1.0 and True are not the same)."""
    if a.__class__ is not b.__class__:
        return False
    if a.__class__ is dict:
        if len(a) != len(b):
            return False
        for k, v in a.items():
            if k not in b:
                return False
            w = b[k]
            if v.__class__ is not w.__class__ or (v != w if v.__class__ not in _CONTAINERS else not _same(v, w)):
                return False
        return True
    if a.__class__ is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _copier(answer: dict[str, Any]) -> tuple[str, ...] | None:
    """The keys of `answer` whose values are objects or lists of plain values (a shallow copy
    each copies them), or None when one nests deeper (then `copy_tree` copies it)."""
    keys = []
    for k, v in answer.items():
        if v.__class__ in _CONTAINERS:
            if any(x.__class__ in _CONTAINERS for x in (v.values() if v.__class__ is dict else v)):
                return None
            keys.append(k)
    return tuple(keys)


def _handed_out(entry: tuple[Any, Any, dict[str, Any], tuple[str, ...] | None]) -> dict[str, Any]:
    """A copy of a kept checked answer, for one evaluation (its receiver may change it)."""
    answer, flat = entry[2], entry[3]
    if flat is None:
        copied: dict[str, Any] = copy_tree(answer)
        return copied
    out = answer.copy()
    for k in flat:
        out[k] = out[k].copy()
    return out


class FixtureEvaluator:
    def __init__(self, data: dict[str, Any]) -> None:
        if not isinstance(data, dict) or not isinstance(data.get("answers", {}), dict):
            raise ConfigError("fixture must be an object with an 'answers' object")
        self._data = data
        #: Every request asked, counted; `requests` holds the latest KEPT_REQUESTS, oldest first.
        self.calls = 0
        self.requests: list[EvaluationRequest] = []
        #: Checked answers by (question, id of the fixture's answer): (that answer, a copy of it as
        #: it was when checked, the checked answer). A hit needs the same object, unchanged since.
        self._answered: dict[tuple[Any, ...], _Kept] = {}
        self._named: Provenance | None = None
        self._status: EvaluatorStatus | None = None

    @classmethod
    def from_file(cls, path: str | Path) -> FixtureEvaluator:
        from .._json import JSONInputError, read_json_file

        try:
            return cls(read_json_file(path, what="fixture", max_bytes=8 << 20))
        except JSONInputError as exc:
            raise ConfigError(str(exc)) from None

    def _pick(self, q: Question, state_text: str) -> Any:
        for rule in self._data.get("rules", ()):
            if rule.get("question", q.id) != q.id:
                continue
            needle = rule.get("stateContains")
            if needle is not None and needle not in state_text:
                continue
            wording = rule.get("instructionsContain")
            if wording is not None and wording not in _text(q.instructions):
                continue
            return rule["answer"]
        if q.id in self._data.get("answers", {}):
            return self._data["answers"][q.id]
        raise AnswerInvalid(f"fixture has no answer for question {q.id!r}")

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        await anyio.lowlevel.checkpoint_if_cancelled()  # a cancelled caller is not counted
        self.calls += 1
        self.requests.append(request)
        if len(self.requests) > KEPT_REQUESTS:
            del self.requests[0]
        # The state as text only for rules that look into it (a server answers many requests).
        rules = self._data.get("rules", ())
        state_text = json.dumps(request.state, ensure_ascii=False) if rules else ""
        body: dict[str, Any] = {"model": self._data.get("model", "fixture")}
        if len({q.id for q in request.questions}) < len(request.questions):
            # Two questions of one id share one answer: checked as an upstream's would be.
            body["answers"] = {q.id: expand_answer(q, self._pick(q, state_text)) for q in request.questions}
            body["usage"] = self._data.get("usage", {"input_tokens": 0, "output_tokens": 0})
            return validate_answers(request, body, provenance=self._provenance(body["model"]))
        # A checked answer depends on its question and the fixture's answer alone, so it is kept and
        # handed out as a copy. The order is as before: each answer picked and its shorthand expanded
        # (only those not kept), then every answer checked in the order of the questions, then the
        # usage and the model.
        picked = []
        for q in request.questions:
            raw = self._pick(q, state_text)
            key = self._key(q, raw)
            hit = self._kept(key, raw)
            picked.append((q, raw, key, hit, expand_answer(q, raw) if hit is None else None))
        body["usage"] = self._data.get("usage", {"input_tokens": 0, "output_tokens": 0})
        provenance = self._provenance(body["model"])
        answers: dict[str, dict[str, Any]] = {}
        for q, raw, key, hit, expanded in picked:
            if hit is None:
                checked = check_answer(q, expanded)
                answers[q.id] = checked
                if key is not None:
                    self._keep(key, raw, checked)
            else:
                answers[q.id] = _handed_out(hit)
        return checked_evaluation(body, answers, provenance=provenance)

    def _provenance(self, model: Any) -> Provenance:
        name = model[:128] if isinstance(model, str) else "fixture"
        if self._named is None or self._named.model != name:  # immutable: one serves every answer
            self._named = Provenance(route="fixture", model=name, readout="fixture")
        return self._named

    @staticmethod
    def _key(q: Question, raw: Any) -> tuple[Any, ...] | None:
        instructions, criteria = q.instructions, q.criteria
        if instructions.__class__ is not str:
            instructions = _frozen(instructions)
        if criteria is not None:
            criteria = _frozen(criteria)
        if instructions is _UNFROZEN or criteria is _UNFROZEN:
            return None
        return (q.id, q.type, instructions, criteria, id(raw))

    def _kept(self, key: tuple[Any, ...] | None, raw: Any) -> _Kept | None:
        entry = None if key is None else self._answered.get(key)
        if entry is None or entry[0] is not raw or not _same(entry[1], raw):
            return None  # not checked yet, or the fixture's data was changed in place since
        return entry

    def _keep(self, key: tuple[Any, ...], raw: Any, checked: dict[str, Any]) -> None:
        if len(self._answered) >= KEPT_ANSWERS:
            del self._answered[next(iter(self._answered))]  # the oldest
        # `raw` itself is held too: while it is, its id() names no other object.
        kept = copy_tree(checked)
        self._answered[key] = (raw, copy_tree(raw), kept, _copier(kept))

    def status(self) -> EvaluatorStatus:
        model = str(self._data.get("model", "fixture"))
        if self._status is None or self._status.model != model:  # immutable: one serves every call
            self._status = EvaluatorStatus("fixture", model, NO_CREDENTIALS_NEEDED)
        return self._status

    async def aclose(self) -> None:
        return None
