"""Ask an evaluator every labeled example: bounded concurrency and a resumable answer cache.

The cache is an append-only JSONL file, one answered example a line, keyed by
the evaluator's identity and the example (state + question, not the label or
id). A run that is interrupted loses at most the line being written; the next
run answers only what is missing. Cached answers are validated again against
their question before they are used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio

from .._json import JSONInputError, loads_bounded
from ..contract.evaluation import validate_answers
from ..errors import CredentialError, EvaluationError, LabelsInvalid
from ..evaluators.base import Evaluator
from .labels import LabeledExample

MAX_CACHE_LINE = 1 << 20
#: An answer cache over this is refused before it is read (answers are a few KiB each).
MAX_CACHE_BYTES = 1 << 30


@dataclass(frozen=True)
class Asked:
    example: LabeledExample
    answer: dict[str, Any] | None  # None when the evaluator failed on it
    model: str
    error: str | None = None
    cached: bool = False


class AnswerCache:
    """Answers already given by one evaluator, persisted as JSONL (or only in memory without a path)."""

    def __init__(self, path: Path | None, identity: str) -> None:
        self.path = path
        self._identity = identity
        self._entries: dict[str, dict[str, Any]] = {}
        self._file: TextIO | None = None
        if path is not None and path.exists():
            self._load(path)

    def key(self, example: LabeledExample) -> str:
        return hashlib.sha256(f"{self._identity}\n{example.key}".encode()).hexdigest()[:32]

    def _load(self, path: Path) -> None:
        from .._files import read_regular

        raw = read_regular(path, label=f"answer cache {path}", max_bytes=MAX_CACHE_BYTES, error=LabelsInvalid)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LabelsInvalid(f"cannot read answer cache {path}: {exc}") from None
        lines = text.split("\n")
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            last = number == len(lines)  # no newline after it: cut off by an interruption
            try:
                entry = loads_bounded(line, what=f"answer cache {path} line {number}",
                                      max_bytes=MAX_CACHE_LINE)
            except JSONInputError as exc:
                if last:
                    continue
                raise LabelsInvalid(f"{exc} (delete the file to start over)") from None
            if (isinstance(entry, dict) and isinstance(entry.get("key"), str)
                    and isinstance(entry.get("answer"), dict)):
                self._entries[entry["key"]] = entry
            elif not last:
                raise LabelsInvalid(f"answer cache {path} line {number} is not a cached answer "
                                    "(delete the file to start over)")

    def get(self, example: LabeledExample) -> tuple[dict[str, Any], str] | None:
        entry = self._entries.get(self.key(example))
        if entry is None:
            return None
        try:
            evaluation = validate_answers(example.request(), {
                "answers": {"q": entry["answer"]}, "usage": {"input_tokens": 0, "output_tokens": 0},
                "model": entry.get("model", "")})
        except EvaluationError:
            return None  # stale or edited: ask again
        return evaluation.answers["q"], evaluation.model

    def put(self, example: LabeledExample, answer: Mapping[str, object], model: str) -> None:
        key = self.key(example)
        entry = {"key": key, "id": example.id, "answer": answer, "model": model}
        self._entries[key] = entry
        if self.path is None:
            return
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())
        self._file.write(json.dumps(entry, ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


async def ask_all(evaluator: Evaluator, examples: Sequence[LabeledExample], *, cache: AnswerCache,
                  concurrency: int = 4, timeout: float = 30.0,
                  on_done: Callable[[Asked], None] | None = None) -> list[Asked]:
    """Answers in the examples' order. A failed example is recorded, not fatal — except a missing key."""
    results: list[Asked | None] = [None] * len(examples)
    todo = iter(range(len(examples)))

    def finish(i: int, asked: Asked) -> None:
        results[i] = asked
        if on_done is not None:
            on_done(asked)

    for i, example in enumerate(examples):
        hit = cache.get(example)
        if hit is not None:
            finish(i, Asked(example, hit[0], hit[1], cached=True))

    async def worker() -> None:
        for i in todo:  # one shared iterator: each example goes to exactly one worker
            if results[i] is not None:
                continue
            example = examples[i]
            try:
                evaluation = await evaluator.evaluate(example.request(), timeout=timeout)
            except CredentialError:
                raise  # every other example would fail the same way
            except EvaluationError as exc:
                finish(i, Asked(example, None, "", error=str(exc)))
                continue
            answer = evaluation.answers["q"]
            cache.put(example, answer, evaluation.model)
            finish(i, Asked(example, answer, evaluation.model))

    try:
        async with anyio.create_task_group() as tg:
            for _ in range(max(1, concurrency)):
                tg.start_soon(worker)
    finally:
        cache.close()
    return [r for r in results if r is not None]
