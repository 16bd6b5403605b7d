"""Batch records without I/O: an input line, its outcome line, and the tally.

One output line per input::

    {"line": 3, "id": 3, "state": "completed", "result": {...},
     "evaluations": 1, "toolCalls": 1, "usage": {"input_tokens": 10, "output_tokens": 2}}

`line` is the 1-based line number in the inputs file; `id` is the input's own
id (`id_field`) or the line number. `state` is a run state, or `rejected` when
the input never became a run (not JSON, off-schema, a duplicate id). A failed,
timed-out or rejected line carries `error` instead of `result`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .._json import JSONInputError, loads_bounded
from ..contract.envelope import Envelope, RunState

#: An input line longer than this is refused without parsing (a run's input is ≤ 32,768 bytes).
MAX_LINE_BYTES = 65_536
#: The state of an input that never became a run.
REJECTED = "rejected"
STATES = (*(s.value for s in RunState if s is not RunState.RUNNING), REJECTED)

Key = int | str


@dataclass(frozen=True)
class BatchItem:
    """One input: its line number, its key, and either a value or why it cannot run."""

    line: int
    key: Key
    value: Any = None
    error: str | None = None


@dataclass(frozen=True)
class BatchOutcome:
    """What one input came to; `to_json()` is its output line."""

    line: int
    id: Key
    state: str
    result: Any = None
    error: str | None = None
    evaluations: int = 0
    toolCalls: int = 0
    usage: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})

    @property
    def completed(self) -> bool:
        return self.state == RunState.COMPLETED.value

    @classmethod
    def from_envelope(cls, item: BatchItem, envelope: Envelope) -> BatchOutcome:
        return cls(line=item.line, id=item.key, state=envelope.state.value,
                   result=envelope.result if envelope.state is RunState.COMPLETED else None,
                   error=envelope.error, evaluations=envelope.evaluations,
                   toolCalls=envelope.toolCalls, usage=envelope.usage.model_dump())

    @classmethod
    def rejected(cls, item: BatchItem, error: str) -> BatchOutcome:
        return cls(line=item.line, id=item.key, state=REJECTED, error=error)

    @classmethod
    def failed(cls, item: BatchItem, error: str) -> BatchOutcome:
        return cls(line=item.line, id=item.key, state=RunState.FAILED.value, error=error)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"line": self.line, "id": self.id, "state": self.state}
        if self.completed:
            data["result"] = self.result
        if self.error is not None:
            data["error"] = self.error
        data.update(evaluations=self.evaluations, toolCalls=self.toolCalls, usage=dict(self.usage))
        return data

    @classmethod
    def from_json(cls, data: Any) -> BatchOutcome:
        """Read an output line back (resume); raises ValueError for anything else."""
        if not isinstance(data, dict) or not isinstance(data.get("line"), int) \
                or not isinstance(data.get("id"), int | str) or data.get("state") not in STATES:
            raise ValueError("not a batch output record")
        usage = data.get("usage") or {}
        return cls(line=data["line"], id=data["id"], state=data["state"], result=data.get("result"),
                   error=data.get("error"), evaluations=int(data.get("evaluations", 0)),
                   toolCalls=int(data.get("toolCalls", 0)),
                   usage={"input_tokens": int(usage.get("input_tokens", 0)),
                          "output_tokens": int(usage.get("output_tokens", 0))})


def parse_input_line(raw: bytes, line: int, id_field: str | None) -> BatchItem:
    """One line of the inputs file → a runnable item, or a rejected one that says why."""
    try:
        value = loads_bounded(raw, what=f"input line {line}", max_bytes=MAX_LINE_BYTES)
    except JSONInputError as exc:
        return BatchItem(line=line, key=line, error=str(exc))
    if id_field is None:
        return BatchItem(line=line, key=line, value=value)
    key = value.get(id_field) if isinstance(value, dict) else None
    if isinstance(key, bool) or not isinstance(key, int | str):
        return BatchItem(line=line, key=line,
                         error=f"input line {line} has no {id_field!r} (a string or an integer)")
    return BatchItem(line=line, key=key, value=value)


@dataclass
class Tally:
    """Counts for the progress bar and the summary table."""

    total: int | None = None
    #: Inputs skipped because the output already had them (--resume), and their states then.
    skipped: int = 0
    earlier: Counter[str] = field(default_factory=Counter)
    states: Counter[str] = field(default_factory=Counter)
    evaluations: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def done(self) -> int:
        return sum(self.states.values())

    @property
    def not_completed(self) -> int:
        return self.done - self.states[RunState.COMPLETED.value]

    @property
    def all_completed(self) -> bool:
        """Every input seen, this time or earlier, completed."""
        return self.not_completed == 0 and sum(self.earlier.values()) == self.earlier["completed"]

    def skip(self, earlier: BatchOutcome) -> None:
        self.skipped += 1
        self.earlier[earlier.state] += 1

    def add(self, outcome: BatchOutcome) -> None:
        self.states[outcome.state] += 1
        self.evaluations += outcome.evaluations
        self.input_tokens += outcome.usage.get("input_tokens", 0)
        self.output_tokens += outcome.usage.get("output_tokens", 0)
