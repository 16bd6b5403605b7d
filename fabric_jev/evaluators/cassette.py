"""Record real answers from any evaluator once; replay them offline by request digest.

File format (JSON)::

    {"version": 1,
     "entries": {"<sha256 of the canonical request>": {
         "request": {...the wire request...},
         "evaluation": {"answers": {...}, "usage": {...}, "model": "..."}}}}

The canonical request is the wire request (state, questions, model) as JSON
with sorted keys, no whitespace and UTF-8 text; its SHA-256 is the key. A
replayed evaluation is validated again against the request, like any answer.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import anyio.lowlevel

from .._files import atomic_write
from ..contract.evaluation import Evaluation, EvaluationRequest, validate_answers
from ..errors import AnswerInvalid, ConfigError
from .base import NO_CREDENTIALS_NEEDED, Evaluator, EvaluatorStatus

#: The largest cassette read back (each entry holds a request and its answer, ≤ 1 MiB each).
MAX_CASSETTE_BYTES = 256 * 1024 * 1024


def request_digest(request: EvaluationRequest, model: str) -> str:
    canonical = json.dumps(request.to_wire(request.model or model), sort_keys=True,
                           separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class CassetteEvaluator:
    """Replays recorded evaluations; with `record_from`, records what it misses."""

    def __init__(self, path: str | Path, *, record_from: Evaluator | None = None,
                 model: str = "jev-latest") -> None:
        self.path = Path(path)
        self._inner = record_from
        self._model = model
        self._entries: dict[str, Any] = {}
        if self.path.exists():
            from .._json import JSONInputError, read_json_file

            try:
                data = read_json_file(self.path, what="cassette", max_bytes=MAX_CASSETTE_BYTES)
            except JSONInputError as exc:
                raise ConfigError(f"cassette {self.path} is not readable JSON: {exc}") from None
            if not isinstance(data, dict) or data.get("version") != 1 \
                    or not isinstance(data.get("entries"), dict):
                raise ConfigError(f"cassette {self.path} is not a version-1 cassette")
            self._entries = data["entries"]
        elif record_from is None:
            raise ConfigError(f"cassette {self.path} does not exist (record it first)")
        self.replayed = 0
        self.recorded = 0

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        await anyio.lowlevel.checkpoint_if_cancelled()
        digest = request_digest(request, self._model)
        entry = self._entries.get(digest)
        if entry is not None:
            self.replayed += 1
            await anyio.lowlevel.checkpoint()
            return validate_answers(request, entry["evaluation"])
        if self._inner is None:
            raise AnswerInvalid(f"cassette has no recording for this request (digest {digest[:12]})")
        evaluation = await self._inner.evaluate(request, timeout=timeout)
        self._entries[digest] = {"request": request.to_wire(request.model or self._model),
                                 "evaluation": evaluation.to_json()}
        self._save()
        self.recorded += 1
        return evaluation

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps({"version": 1, "entries": self._entries}, indent=1,
                                           ensure_ascii=False))

    def status(self) -> EvaluatorStatus:
        if self._inner is None:  # replay only: never leaves the host
            return EvaluatorStatus("cassette", self._model, NO_CREDENTIALS_NEEDED)
        # Recording: misses go to the inner route, so its readiness is this one's.
        inner = self._inner.status()
        return EvaluatorStatus("cassette", inner.model, inner.credentials, inner.problem, inner.profile,
                               mode=inner.mode)

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()
