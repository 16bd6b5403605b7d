"""Batch records without I/O: an input line, its outcome line, and the tally.

One output line per input::

    {"line": 3, "id": 3, "state": "completed", "result": {...},
     "evaluations": 1, "toolCalls": 1, "usage": {"input_tokens": 10, "output_tokens": 2},
     "evaluator": {"route": "ollama", "model": "qwen3:8b", "readout": "logprobs", "calibration": "none"}}

`line` is the 1-based line number in the inputs file; `id` is the input's own
id (`id_field`) or the line number. `state` is a run state, or `rejected` when
the input never became a run (not JSON, off-schema, a duplicate id). A failed,
timed-out or rejected line carries `error` instead of `result`. `evaluator` (who
answered the run's evaluations, as in its envelope) is there when it asked any.

An outcome also knows when its run started and how long it took, and, when the
batch was asked to keep them (`fabric-jev eval` does), the judgments its program
received; neither is part of the output line.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from pydantic import ConfigDict, Field, SerializerFunctionWrapHandler, SkipValidation, model_serializer
from pydantic import JsonValue as Json  # a model field's JSON: pydantic's own recursive alias

from .._json import JSONInputError, loads_bounded
from ..contract.envelope import Envelope, RunState
from ..contract.values import JsonValue
from ..contract.wire_model import WireModel, omit_none

if TYPE_CHECKING:
    from ..contract.evaluation import Evaluation, EvaluationRequest

#: An input line longer than this is refused without parsing (a run's input is ≤ 32,768 bytes).
MAX_LINE_BYTES = 65_536
#: The state of an input that never became a run.
REJECTED = "rejected"
STATES = (*(s.value for s in RunState if s.terminal), REJECTED)

Key = int | str


@dataclass(frozen=True)
class BatchItem:
    """One input: its line number, its key, and either a value or why it cannot run."""

    line: int
    key: Key
    value: JsonValue = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Judgment:
    """One answer a run's program received from `jev.evaluate`, with the request it answered."""

    request: EvaluationRequest
    evaluation: Evaluation


if TYPE_CHECKING:
    Judgments = tuple[Judgment, ...]
else:  # kept as given, never validated nor written (the requests load with the first evaluation)
    Judgments = tuple


class BatchOutcome(WireModel):
    """What one input came to; `to_json()` is its output line (camelCase keys: ``toolCalls``).

    Two outcomes are equal when their lines are: the start, the wall time and the judgments
    are not part of the line."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    line: int
    id: Key
    state: str
    #: Written only when the run completed (a completed run's result may be null).
    result: SkipValidation[Json] = None  # the envelope's, or a line's read back: JSON already
    error: str | None = Field(default=None, exclude_if=omit_none)
    evaluations: int = 0
    tool_calls: int = 0
    usage: dict[str, int] = Field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})
    #: When the run started (`time.time()`) and its wall time in seconds; 0 for an input never run.
    started: float = Field(default=0.0, exclude=True)
    seconds: float = Field(default=0.0, exclude=True)
    #: The judgments the program received, in order, when the batch keeps them.
    judgments: Judgments = Field(default=(), exclude=True)
    #: Who answered the run's evaluations (the envelope's ``evaluator``), when it asked any.
    evaluator: dict[str, Any] | None = Field(default=None, exclude_if=omit_none)

    @model_serializer(mode="wrap")
    def _result_if_completed(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self.completed:
            del data["result"]
        return data

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BatchOutcome):
            return NotImplemented
        return self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]  # its usage and evaluator are dicts

    @property
    def completed(self) -> bool:
        return self.state == RunState.COMPLETED.value

    @classmethod
    def from_envelope(cls, item: BatchItem, envelope: Envelope, *, started: float = 0.0,
                      seconds: float = 0.0, judgments: tuple[Judgment, ...] = ()) -> BatchOutcome:
        return cls(line=item.line, id=item.key, state=envelope.state.value,
                   result=envelope.result if envelope.state is RunState.COMPLETED else None,
                   error=envelope.error, evaluations=envelope.evaluations,
                   tool_calls=envelope.tool_calls, usage=envelope.usage.model_dump(),
                   started=started, seconds=seconds, judgments=judgments,
                   evaluator=None if envelope.evaluator is None else envelope.evaluator.to_json())

    @classmethod
    def rejected(cls, item: BatchItem, error: str) -> BatchOutcome:
        return cls(line=item.line, id=item.key, state=REJECTED, error=error)

    @classmethod
    def failed(cls, item: BatchItem, error: str) -> BatchOutcome:
        return cls(line=item.line, id=item.key, state=RunState.FAILED.value, error=error)

    @classmethod
    def from_json(cls, data: object) -> BatchOutcome:
        """Read an output line back (resume); raises ValueError, naming the field, for anything else.

        A record is checked as strictly as it was written: exact keys, integers
        that are not booleans, counts within what one run can reach.
        """
        if not isinstance(data, dict):
            raise ValueError("not a batch output record")
        unknown = sorted(set(data) - _RECORD_KEYS)
        if unknown:
            raise ValueError(f"unknown field {unknown[0]!r}")
        line, key, state = data.get("line"), data.get("id"), data.get("state")
        if not _is_int(line) or not 1 <= line <= MAX_COUNT:
            raise ValueError("line must be a positive integer")
        if not _is_int(key) and not isinstance(key, str):
            raise ValueError("id must be a string or an integer")
        if state not in STATES:
            raise ValueError(f"state must be one of {', '.join(STATES)}")
        if "result" in data and state != RunState.COMPLETED.value:
            raise ValueError("only a completed record has a result")
        error = data.get("error")
        if error is not None and not isinstance(error, str):
            raise ValueError("error must be a string")
        usage = data.get("usage", {})
        if not isinstance(usage, dict) or set(usage) - {"input_tokens", "output_tokens"}:
            raise ValueError("usage must be {input_tokens, output_tokens}")
        evaluator = data.get("evaluator")
        if evaluator is not None:
            from ..contract.provenance import Provenance

            try:  # read back as it was written: a provenance, whole
                evaluator = Provenance.model_validate(evaluator, by_alias=True, by_name=False).to_json()
            except ValueError:
                raise ValueError("evaluator must be a provenance {route, model, readout, ...}") from None
        return cls(line=line, id=key, state=state, result=data.get("result"), error=error, evaluator=evaluator,
                   evaluations=_count(data, "evaluations", MAX_EVALUATIONS),
                   tool_calls=_count(data, "toolCalls", MAX_TOOL_CALLS),
                   usage={name: _count(usage, name, MAX_COUNT) for name in ("input_tokens", "output_tokens")})


_RECORD_KEYS = frozenset({"line", "id", "state", "result", "error", "evaluations", "toolCalls", "usage",
                          "evaluator"})
#: The highest ceilings a host config allows (contract §7): no run can count more.
MAX_EVALUATIONS = 100_000
MAX_TOOL_CALLS = 1_000_000
#: Line numbers, integer ids and token counts: JSON's exact integers.
MAX_COUNT = 2**53 - 1


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(data: dict[str, Any], name: str, high: int) -> int:
    value = data.get(name, 0)
    if not _is_int(value) or not 0 <= value <= high:
        raise ValueError(f"{name} must be an integer from 0 to {high}")
    return int(value)


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
