"""The lines of results.jsonl: one per dataset line and cell, one per bad line. No I/O.

A run line::

    {"evaluator": "local", "variant": "base", "line": 3, "id": "t3",
     "input": {...}, "expected": {"queue": "billing"},
     "state": "completed", "result": {...}, "passed": false,
     "fields": {"queue": {"ok": false, "actual": "technical"}},
     "evaluations": 1, "toolCalls": 1, "usage": {"input_tokens": 0, "output_tokens": 0},
     "started": 1767225600.123, "seconds": 0.0042,
     "judgments": [{"answers": {"queue": {"type": "choice", ...}},
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                    "provenance": {"route": "local", "model": "...", "readout": "heuristic",
                                   "profile": null, "calibration": null}}]}

`fields` holds one verdict per expected field (`actual` is left out when the
result has no such field); `judgments` every answer the program received, in
order, with who gave it. A bad line is ``{"line": 7, "bad": "dataset line 7: ..."}``.
Everything the summary and the report show is computed from these lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TypeGuard

from pydantic import (
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    SkipValidation,
    model_serializer,
)
from pydantic import JsonValue as Json  # a model field's JSON: pydantic's own recursive alias

from ..contract.envelope import RunState
from ..contract.json_basics import JsonNumber
from ..contract.values import JsonValue
from ..contract.wire_model import WireModel, omit_none
from ..questions import KINDS
from .compare import EvalSettings, FieldVerdict, compare, leaves, passed
from .dataset import BadLine, EvalCase, Key

_RUN_KEYS = frozenset({"evaluator", "variant", "line", "id", "input", "expected", "state", "result", "error",
                       "passed", "fields", "evaluations", "toolCalls", "usage", "started", "seconds",
                       "judgments"})
_STATES = frozenset({*(s.value for s in RunState if s.terminal), "rejected"})
PROVENANCE_KEYS = ("route", "model", "readout", "profile", "calibration")


class _Model(WireModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RecordedJudgment(_Model):
    """One answer a line's program received: the answers by question id, and who gave them."""

    answers: dict[str, dict[str, Any]]
    usage: dict[str, int]
    #: route, model, readout, profile, calibration (None where the evaluator does not say).
    provenance: dict[str, Json]


def _by_field(verdicts: tuple[FieldVerdict, ...]) -> dict[str, dict[str, Any]]:
    return {v.field: v.to_json() for v in verdicts}


class EvalRecord(_Model):
    """One dataset line run in one cell (evaluator × variant), compared with its expected value.

    Its JSON is a line of results.jsonl (the module doc): `result` only when the run
    completed, `error` only when there is one, `fields` by field name."""

    evaluator: str
    variant: str
    line: int
    id: Key
    #: JSON already (a screened dataset line, a run's result, a line read back): not walked again.
    input: SkipValidation[Json]
    expected: SkipValidation[Json]
    state: str
    result: SkipValidation[Json] = None
    error: str | None = Field(default=None, exclude_if=omit_none)
    passed: bool = False
    fields: Annotated[tuple[FieldVerdict, ...], PlainSerializer(_by_field)] = ()
    evaluations: int = 0
    tool_calls: int = 0
    usage: dict[str, int] = Field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})
    started: JsonNumber = 0.0
    seconds: JsonNumber = 0.0
    judgments: tuple[RecordedJudgment, ...] = ()

    @model_serializer(mode="wrap")
    def _result_if_completed(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self.completed:  # a completed run's result may be null: the state tells
            del data["result"]
        return data

    @property
    def cell(self) -> tuple[str, str]:
        return self.evaluator, self.variant

    @property
    def completed(self) -> bool:
        return self.state == RunState.COMPLETED.value

    @classmethod
    def judged(cls, cell: tuple[str, str], case: EvalCase, *, state: str, result: JsonValue,
               error: str | None, settings: EvalSettings, evaluations: int = 0, tool_calls: int = 0,
               usage: Mapping[str, int] | None = None, started: float = 0.0, seconds: float = 0.0,
               judgments: tuple[RecordedJudgment, ...] = ()) -> EvalRecord:
        """A run's outcome compared with its case's expected value."""
        completed = state == RunState.COMPLETED.value
        verdicts = compare(case.expected, result, completed=completed, settings=settings)
        return cls(evaluator=cell[0], variant=cell[1], line=case.line, id=case.key, input=case.input,
                   expected=case.expected, state=state, result=result if completed else None, error=error,
                   passed=passed(verdicts, completed=completed), fields=verdicts, evaluations=evaluations,
                   tool_calls=tool_calls, usage=dict(usage or {"input_tokens": 0, "output_tokens": 0}),
                   started=started, seconds=seconds, judgments=judgments)

    @classmethod
    def from_json(cls, data: object) -> EvalRecord:
        """A run line read back; ValueError names what is wrong with it."""
        if not isinstance(data, dict):
            raise ValueError("not an eval record")
        unknown = sorted(set(data) - _RUN_KEYS)
        if unknown:
            raise ValueError(f"unknown field {unknown[0]!r}")
        for name in ("evaluator", "variant", "state"):
            if not isinstance(data.get(name), str):
                raise ValueError(f"{name} must be a string")
        if data["state"] not in _STATES:
            raise ValueError(f"state must be one of {', '.join(sorted(_STATES))}")
        line, key = data.get("line"), data.get("id")
        if not _is_int(line) or line < 1:
            raise ValueError("line must be a positive integer")
        if not (_is_int(key) or isinstance(key, str)):
            raise ValueError("id must be a string or an integer")
        if "input" not in data or "expected" not in data:
            raise ValueError("a record holds its input and expected value")
        error = data.get("error")
        if error is not None and not isinstance(error, str):
            raise ValueError("error must be a string")
        if not isinstance(data.get("passed"), bool):
            raise ValueError("passed must be true or false")
        usage = data.get("usage", {})
        if not isinstance(usage, dict) or set(usage) != {"input_tokens", "output_tokens"} \
                or not all(_is_int(v) and v >= 0 for v in usage.values()):
            raise ValueError("usage must be {input_tokens, output_tokens}")
        for name in ("evaluations", "toolCalls"):
            if not _is_int(data.get(name)) or data[name] < 0:
                raise ValueError(f"{name} must be a non-negative integer")
        for name in ("started", "seconds"):
            if not _is_number(data.get(name)) or data[name] < 0:
                raise ValueError(f"{name} must be a non-negative number")
        completed = data["state"] == RunState.COMPLETED.value
        result = data.get("result")
        return cls(evaluator=data["evaluator"], variant=data["variant"], line=line, id=key, input=data["input"],
                   expected=data["expected"], state=data["state"], result=result if completed else None,
                   error=error, passed=data["passed"], fields=_verdicts(data.get("fields"), data["expected"]),
                   evaluations=data["evaluations"], tool_calls=data["toolCalls"], usage=usage,
                   started=data["started"], seconds=data["seconds"],  # as written: 0 is written back 0
                   judgments=_judgments(data.get("judgments")))


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _verdicts(raw: object, expected: JsonValue) -> tuple[FieldVerdict, ...]:
    if not isinstance(raw, dict):
        raise ValueError("fields must be an object of field → verdict")
    wanted = dict(leaves(expected))
    out: list[FieldVerdict] = []
    for name, verdict in raw.items():
        if not isinstance(verdict, dict) or not isinstance(verdict.get("ok"), bool) \
                or set(verdict) - {"ok", "actual", "extra"}:
            raise ValueError(f"the verdict of {name!r} must be {{ok, actual?, extra?}}")
        present = "actual" in verdict
        actual = verdict.get("actual")
        want = wanted.get(name)
        error = abs(float(actual) - float(want)) if _is_number(actual) and _is_number(want) else None
        out.append(FieldVerdict(field=name, ok=verdict["ok"], actual=actual, present=present,
                                extra=bool(verdict.get("extra")), error=error))
    return tuple(out)


def _judgments(raw: object) -> tuple[RecordedJudgment, ...]:
    if not isinstance(raw, list):
        raise ValueError("judgments must be a list")
    out: list[RecordedJudgment] = []
    for item in raw:
        if not isinstance(item, dict) or set(item) != {"answers", "usage", "provenance"}:
            raise ValueError("a judgment is {answers, usage, provenance}")
        answers, usage, provenance = item["answers"], item["usage"], item["provenance"]
        if not isinstance(answers, dict) or not all(isinstance(a, dict) and a.get("type") in
                                                    KINDS for a in answers.values()):
            raise ValueError("a judgment's answers are typed answers by question id")
        if not isinstance(usage, dict) or not isinstance(provenance, dict):
            raise ValueError("a judgment's usage and provenance are objects")
        out.append(RecordedJudgment(answers=answers, usage=usage, provenance=provenance))
    return tuple(out)


def bad_from_json(data: object) -> BadLine:
    if not isinstance(data, dict) or set(data) != {"line", "bad"} or not _is_int(data["line"]) \
            or not isinstance(data["bad"], str):
        raise ValueError("a bad line is {line, bad}")
    return BadLine(line=data["line"], error=data["bad"])


def read_line(data: object) -> EvalRecord | BadLine:
    """Either kind of results line."""
    if isinstance(data, dict) and "bad" in data:
        return bad_from_json(data)
    return EvalRecord.from_json(data)
