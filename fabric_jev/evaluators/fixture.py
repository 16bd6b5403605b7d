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

from ..contract.evaluation import Evaluation, EvaluationRequest, Question, validate_answers
from ..contract.provenance import Provenance
from ..errors import AnswerInvalid, ConfigError
from ..questions import KINDS
from .base import NO_CREDENTIALS_NEEDED, EvaluatorStatus

#: `FixtureEvaluator.requests` keeps this many of the latest requests: a server that
#: answers from a fixture (`fabric-jev serve --evaluator fixture:FILE`) runs for days.
KEPT_REQUESTS = 1000


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


class FixtureEvaluator:
    def __init__(self, data: dict[str, Any]) -> None:
        if not isinstance(data, dict) or not isinstance(data.get("answers", {}), dict):
            raise ConfigError("fixture must be an object with an 'answers' object")
        self._data = data
        #: Every request asked, counted; `requests` holds the latest KEPT_REQUESTS, oldest first.
        self.calls = 0
        self.requests: list[EvaluationRequest] = []

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
        await anyio.lowlevel.checkpoint()
        # The state as text only for rules that look into it (a server answers many requests).
        rules = self._data.get("rules", ())
        state_text = json.dumps(request.state, ensure_ascii=False) if rules else ""
        body = {
            "model": self._data.get("model", "fixture"),
            "answers": {q.id: expand_answer(q, self._pick(q, state_text))
                        for q in request.questions},
            "usage": self._data.get("usage", {"input_tokens": 0, "output_tokens": 0}),
        }
        model = body["model"] if isinstance(body["model"], str) else "fixture"
        return validate_answers(request, body, provenance=Provenance(route="fixture", model=model[:128],
                                                                     readout="fixture"))

    def status(self) -> EvaluatorStatus:
        return EvaluatorStatus("fixture", str(self._data.get("model", "fixture")), NO_CREDENTIALS_NEEDED)

    async def aclose(self) -> None:
        return None
