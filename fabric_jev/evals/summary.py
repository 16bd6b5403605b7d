"""What an eval found, computed from its results lines alone. Pure code, no I/O.

Per cell (one evaluator × one variant):

- the pass rate and its 95 % Wilson interval; a line passes when its run
  completed and every field its expected value gives matched;
- per field: accuracy (a line whose run did not complete counts as wrong),
  a confusion matrix for enum and boolean fields (rows expected, columns the
  result's value, ``(none)`` where it had none), the mean absolute error for
  numbers (over the lines where the result had a number);
- per question the program asked: how often, how confident, and where the
  question maps straight to an expected field (same name and a fitting type:
  noul → boolean, choice → enum or string, score → number; or named in the
  settings' `questions`), the agreement of its picks with that field and its
  calibration (reliability bins, ECE and Brier score, as `fabric-jev
  calibrate` computes them);
- cost: evaluations, tool calls, tokens, wall time and the p50/p95 wall time
  of a line;
- the worst lines: failed lines, the most confident first.

Between every two cells, McNemar's paired test on the lines both judged.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, ValidationError
from pydantic import JsonValue as Json  # a model field's JSON: pydantic's own recursive alias
from pydantic_core import PydanticCustomError

from ..calibration.metrics import BINS, AnswerOutcome, brier, ece, outcome, reliability
from ..contract.evaluation import Question
from ..contract.json_basics import JsonNumber
from ..contract.values import JsonValue
from ..contract.wire_model import WireModel, validate_json_object
from ..errors import EvalError
from ..questions import KINDS, kind_of, listed
from . import stats
from .compare import EvalSettings, FieldKind, field_kind, leaves
from .dataset import BadLine, Dataset, DatasetFormat, Unit
from .records import EvalRecord

FORMAT: Literal["fabric-jev-eval"] = "fabric-jev-eval"
#: Worst lines kept per cell in the summary (the report lists every failed line).
WORST_KEPT = 20
#: The confusion matrix's column for a result that has no value for the field.
NONE_LABEL = "(none)"
#: Provenance keys that describe one evaluation rather than its answerer (left out of a cell's list).
PER_EVALUATION = frozenset({"validMass", "lowMass", "sampled", "sampledReasons"})


class _Model(WireModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Interval(_Model):
    low: float
    high: float


class Confusion(_Model):
    """Counts of (expected, actual) labels: `counts[i][j]` is expected `labels[i]`, got `labels[j]`."""

    labels: list[str]
    counts: list[list[int]]


class FieldSummary(_Model):
    field: str
    kind: FieldKind
    lines: int
    correct: int
    accuracy: float
    #: Mean absolute error over the `compared` lines where the result had a number (numbers only).
    mae: float | None = None
    compared: int = 0
    confusion: Confusion | None = None


class Bin(_Model):
    low: float
    high: float
    count: int
    confidence: float
    accuracy: float


def _kind_name(value: object) -> object:
    # Any kind in the table (questions/), as it stands when a summary is read; refused in the words
    # pydantic gives a Literal of the kinds' names.
    if isinstance(value, str) and value in KINDS:
        return value
    names = [repr(name) for name in listed()]
    expected = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})


class QuestionSummary(_Model):
    question: str
    type: Annotated[str, BeforeValidator(_kind_name)]
    answers: int
    #: lines on which it was asked at least once
    lines: int
    mean_confidence: float
    #: The expected field its picks are compared with, if it maps straight to one.
    field: str | None = None
    #: answers whose line's expected field gives a label the question can pick
    labeled: int = 0
    agreement: float | None = None
    ece: float | None = None
    brier: float | None = None
    reliability: list[Bin] = Field(default_factory=list)


class Cost(_Model):
    evaluations: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    #: The union of the lines' run intervals: parallel runs count once, pauses not at all.
    wall_seconds: float
    line_seconds_p50: float
    line_seconds_p95: float
    line_seconds_mean: float
    line_seconds_max: float


class WorstLine(_Model):
    line: int
    id: int | str
    state: str
    #: The highest confidence among the answers behind the wrong fields (else among all its answers).
    confidence: float
    mismatches: list[str]
    input: Json
    expected: Json
    result: Json = None
    error: str | None = None
    #: The answers of each judgment the program received, in order.
    answers: list[dict[str, dict[str, Json]]] = Field(default_factory=list)


class CellSummary(_Model):
    evaluator: str
    variant: str
    #: Who answered: each distinct provenance of the cell's judgments.
    provenance: list[dict[str, Json]] = Field(default_factory=list)
    lines: int
    passed: int
    not_completed: int
    pass_rate: float
    pass_rate_interval: Interval
    fields: dict[str, FieldSummary]
    #: Fields a result had beyond its expected value, and in how many lines (match "whole" only).
    extra_fields: dict[str, int] = Field(default_factory=dict)
    questions: dict[str, QuestionSummary]
    #: ECE over every answer of a question that maps to a field (None when none does).
    ece: float | None = None
    cost: Cost
    worst: list[WorstLine]

    @property
    def name(self) -> str:
        return f"{self.evaluator} × {self.variant}"


class PairedTest(_Model):
    """McNemar's test between cells `first` and `second` (indexes into `cells`) on their shared lines."""

    first: int
    second: int
    lines: int
    both_passed: int
    first_only: int
    second_only: int
    both_failed: int
    #: second's pass rate minus first's, on the shared lines
    difference: float
    p_value: float
    method: stats.McNemarMethod


class BadLineInfo(_Model):
    line: int
    error: str


class DatasetInfo(_Model):
    path: str
    format: DatasetFormat
    lines: int
    cases: int
    bad: int
    bad_lines: list[BadLineInfo]
    unit: Unit = "line"


class Settings(_Model):
    match: Literal["partial", "whole"]
    tolerance: dict[str, JsonNumber]
    questions: dict[str, str]


class EvalSummary(_Model):
    """An eval's summary (summary.json). `pass_rate` and `fields` are the first cell's."""

    format: Literal["fabric-jev-eval"] = FORMAT
    version: Literal[1] = 1
    program: str
    dataset: DatasetInfo
    settings: Settings
    cells: list[CellSummary]
    pairs: list[PairedTest]

    @property
    def pass_rate(self) -> float:
        """The first cell's pass rate (the only one, unless evaluators or variants were added)."""
        return self.cells[0].pass_rate if self.cells else 0.0

    @property
    def fields(self) -> dict[str, FieldSummary]:
        return self.cells[0].fields if self.cells else {}

    def cell(self, evaluator: str | None = None, variant: str | None = None) -> CellSummary:
        """The cell of this evaluator and variant (either may be left out when only one fits)."""
        found = [c for c in self.cells if (evaluator is None or c.evaluator == evaluator)
                 and (variant is None or c.variant == variant)]
        if len(found) != 1:
            names = ", ".join(c.name for c in self.cells)
            raise KeyError(f"{len(found)} cells match evaluator={evaluator!r} variant={variant!r} (cells: {names})")
        return found[0]

    @classmethod
    def from_json(cls, raw: object, where: str = "summary") -> EvalSummary:
        try:
            return validate_json_object(cls, raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            place = ".".join(str(p) for p in first["loc"])
            raise EvalError(f"{where} is not an eval summary: {place}: {first['msg']}") from None


# ---------------------------------------------------------------- answers

def question_of(qid: str, answer: Mapping[str, Any]) -> Question:
    """The question an answer answers, as far as the metrics need it (type and classes)."""
    kind = answer["type"]
    return Question(qid, kind, None, kind_of(kind).criteria_of(answer))


def confidence_of(question: Question, answer: Mapping[str, Any]) -> float:
    """The probability an answer gives the class it picks (noul: max(p, 1 − p))."""
    return kind_of(question.type).confidence(question.criteria, answer)


def label_for(question: Question, expected: JsonValue) -> bool | str | int | None:
    """The class an expected field value names for this question, or None if it names none."""
    return kind_of(question.type).label_for(question.criteria, expected)


def label_text(value: JsonValue) -> str:
    """A value as a confusion-matrix label: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


# ---------------------------------------------------------------- one cell

def _field_summaries(records: Sequence[EvalRecord], kinds: Mapping[str, FieldKind],
                     enums: Mapping[str, Sequence[JsonValue]]) -> dict[str, FieldSummary]:
    wanted: dict[str, list[tuple[JsonValue, Any]]] = defaultdict(list)  # field → (expected, verdict)
    for record in records:
        expected = dict(leaves(record.expected))
        for verdict in record.fields:
            if not verdict.extra:
                wanted[verdict.field].append((expected[verdict.field], verdict))
    out: dict[str, FieldSummary] = {}
    for name in sorted(wanted):
        pairs = wanted[name]
        kind = kinds[name]
        correct = sum(v.ok for _, v in pairs)
        errors = [v.error for _, v in pairs if v.error is not None]
        confusion = None
        if kind in ("enum", "boolean"):
            confusion = _confusion(pairs, enums.get(name, ()), kind)
        out[name] = FieldSummary(field=name, kind=kind, lines=len(pairs), correct=correct,
                                 accuracy=correct / len(pairs),
                                 mae=stats.mean(errors) if kind == "number" and errors else None,
                                 compared=len(errors) if kind == "number" else 0, confusion=confusion)
    return out


def _confusion(pairs: list[tuple[JsonValue, Any]], declared: Sequence[JsonValue], kind: str) -> Confusion:
    """Labels: the schema's values in its order (false, true for a boolean), then any other value
    seen in sorted order, then `(none)` if some result had no value."""
    seen = Counter((label_text(e), label_text(v.actual) if v.present else NONE_LABEL) for e, v in pairs)
    first = [label_text(v) for v in (declared or ([False, True] if kind == "boolean" else []))]
    others = sorted({x for pair in seen for x in pair} - set(first) - {NONE_LABEL})
    labels = list(dict.fromkeys(first)) + others
    if any(a == NONE_LABEL for _, a in seen):
        labels.append(NONE_LABEL)
    index = {label: i for i, label in enumerate(labels)}
    counts = [[0] * len(labels) for _ in labels]
    for (expected, actual), n in seen.items():
        counts[index[expected]][index[actual]] += n
    return Confusion(labels=labels, counts=counts)


def _question_summaries(records: Sequence[EvalRecord], kinds: Mapping[str, FieldKind],
                        settings: EvalSettings) -> tuple[dict[str, QuestionSummary], list[AnswerOutcome]]:
    by_question: dict[str, list[tuple[EvalRecord, dict[str, Any]]]] = defaultdict(list)
    for record in records:
        for judgment in record.judgments:
            for qid, answer in judgment.answers.items():
                by_question[qid].append((record, answer))
    out: dict[str, QuestionSummary] = {}
    pooled: list[AnswerOutcome] = []
    for qid in sorted(by_question):
        asked = by_question[qid]
        kind = asked[0][1]["type"]
        asked = [(r, a) for r, a in asked if a["type"] == kind]
        field = settings.questions.get(qid)
        if field is None and qid in kinds and kinds[qid] in kind_of(kind).fits:
            field = qid
        outcomes: list[AnswerOutcome] = []
        confidences: list[float] = []
        for record, answer in asked:
            question = question_of(qid, answer)
            confidences.append(confidence_of(question, answer))
            if field is None:
                continue
            expected = dict(leaves(record.expected)).get(field)
            label = None if expected is None else label_for(question, expected)
            if label is not None:
                outcomes.append(outcome(question, dict(answer), label))
        pooled.extend(outcomes)
        out[qid] = QuestionSummary(
            question=qid, type=kind, answers=len(asked), lines=len({(r.line, r.id) for r, _ in asked}),
            mean_confidence=stats.mean(confidences), field=field, labeled=len(outcomes),
            agreement=sum(o.correct for o in outcomes) / len(outcomes) if outcomes else None,
            ece=ece(outcomes) if outcomes else None, brier=brier(outcomes) if outcomes else None,
            reliability=[Bin(low=b.low, high=b.high, count=b.count, confidence=b.confidence, accuracy=b.accuracy)
                         for b in reliability(outcomes, BINS)] if outcomes else [])
    return out, pooled


def line_confidence(record: EvalRecord) -> float:
    """How sure a line's answers were: of the questions behind its wrong fields if any, else of all."""
    wrong = {v.field for v in record.fields if not v.ok}
    behind: list[float] = []
    every: list[float] = []
    for judgment in record.judgments:
        for qid, answer in judgment.answers.items():
            confidence = confidence_of(question_of(qid, answer), answer)
            every.append(confidence)
            if qid in wrong:
                behind.append(confidence)
    return max(behind or every or [0.0])


def worst_lines(records: Iterable[EvalRecord], limit: int | None = WORST_KEPT) -> list[WorstLine]:
    """Failed lines, the most confident first (then by line number)."""
    failed = [(line_confidence(r), r) for r in records if not r.passed]
    failed.sort(key=lambda pair: (-pair[0], pair[1].line))
    return [WorstLine(line=r.line, id=r.id, state=r.state, confidence=c,
                      mismatches=[v.field for v in r.fields if not v.ok], input=r.input, expected=r.expected,
                      result=r.result, error=r.error,
                      answers=[{k: dict(v) for k, v in j.answers.items()} for j in r.judgments])
            for c, r in (failed if limit is None else failed[:limit])]


def _cost(records: Sequence[EvalRecord]) -> Cost:
    ran = [r for r in records if r.seconds > 0 or r.started > 0]
    seconds = [r.seconds for r in ran]
    return Cost(evaluations=sum(r.evaluations for r in records), tool_calls=sum(r.tool_calls for r in records),
                input_tokens=sum(r.usage.get("input_tokens", 0) for r in records),
                output_tokens=sum(r.usage.get("output_tokens", 0) for r in records),
                wall_seconds=stats.covered_seconds((r.started, r.seconds) for r in ran),
                line_seconds_p50=stats.percentile(seconds, 0.5), line_seconds_p95=stats.percentile(seconds, 0.95),
                line_seconds_mean=stats.mean(seconds), line_seconds_max=max(seconds, default=0.0))


def summarize_cell(records: Sequence[EvalRecord], *, settings: EvalSettings, kinds: Mapping[str, FieldKind],
                   enums: Mapping[str, Sequence[JsonValue]]) -> CellSummary:
    """One cell's summary from its records (all of one evaluator and one variant)."""
    evaluator, variant = records[0].cell if records else ("", "")
    passed_count = sum(r.passed for r in records)
    low, high = stats.wilson(passed_count, len(records))
    questions, pooled = _question_summaries(records, kinds, settings)
    provenance: list[dict[str, JsonValue]] = []
    for record in records:
        for judgment in record.judgments:
            # The answerer, without what differs from one evaluation to the next.
            seen = {k: v for k, v in judgment.provenance.items() if k not in PER_EVALUATION}
            if seen not in provenance:
                provenance.append(seen)
    extras = Counter(v.field for r in records for v in r.fields if v.extra)
    return CellSummary(
        evaluator=evaluator, variant=variant, provenance=provenance, lines=len(records), passed=passed_count,
        not_completed=sum(not r.completed for r in records),
        pass_rate=passed_count / len(records) if records else 0.0, pass_rate_interval=Interval(low=low, high=high),
        fields=_field_summaries(records, kinds, enums), extra_fields=dict(sorted(extras.items())),
        questions=questions, ece=ece(pooled) if pooled else None, cost=_cost(records),
        worst=worst_lines(records))


def paired(first: Sequence[EvalRecord], second: Sequence[EvalRecord], i: int, j: int) -> PairedTest:
    """McNemar's test between two cells on the lines both judged (matched by id)."""
    verdicts = {r.id: r.passed for r in first}
    shared = [(verdicts[r.id], r.passed) for r in second if r.id in verdicts]
    both = sum(a and b for a, b in shared)
    first_only = sum(a and not b for a, b in shared)
    second_only = sum(b and not a for a, b in shared)
    test = stats.mcnemar(first_only, second_only)
    n = len(shared)
    return PairedTest(first=i, second=j, lines=n, both_passed=both, first_only=first_only,
                      second_only=second_only, both_failed=n - both - first_only - second_only,
                      difference=(second_only - first_only) / n if n else 0.0, p_value=test.p_value,
                      method=test.method)


# ---------------------------------------------------------------- the whole eval

def field_kinds(records: Iterable[EvalRecord], output_schema: dict[str, Any]) -> dict[str, FieldKind]:
    """Each expected field's kind, from the output schema and the expected values."""
    values: dict[str, list[JsonValue]] = defaultdict(list)
    for record in records:
        for path, value in leaves(record.expected):
            values[path].append(value)
    return {path: field_kind(path, output_schema, found) for path, found in values.items()}


def declared_values(kinds: Mapping[str, FieldKind], output_schema: dict[str, Any]) -> dict[str, list[JsonValue]]:
    """The enum values the output schema declares for each enum field, in its order."""
    from .compare import schema_at

    out: dict[str, list[JsonValue]] = {}
    for path, kind in kinds.items():
        sub = schema_at(output_schema, path)
        if kind == "enum" and sub is not None and isinstance(sub.get("enum"), list):
            out[path] = list(sub["enum"])
    return out


def summarize(records: Sequence[EvalRecord], *, program: str, dataset: Dataset | DatasetInfo,
              settings: EvalSettings, output_schema: dict[str, Any],
              cells: Sequence[tuple[str, str]] | None = None) -> EvalSummary:
    """The summary of an eval from its records; `cells` gives their order (default: as first seen)."""
    order = list(cells) if cells is not None else list(dict.fromkeys(r.cell for r in records))
    grouped: dict[tuple[str, str], list[EvalRecord]] = {cell: [] for cell in order}
    for record in records:
        grouped.setdefault(record.cell, []).append(record)
    for group in grouped.values():
        group.sort(key=lambda r: r.line)
    kinds = field_kinds(records, output_schema)
    enums = declared_values(kinds, output_schema)
    cell_summaries = [summarize_cell(group, settings=settings, kinds=kinds, enums=enums)
                      for group in grouped.values() if group]
    groups = [group for group in grouped.values() if group]
    pairs = [paired(groups[i], groups[j], i, j) for i in range(len(groups)) for j in range(i + 1, len(groups))]
    info = dataset if isinstance(dataset, DatasetInfo) else dataset_info(dataset)
    return EvalSummary(program=program, dataset=info, settings=Settings.model_validate(settings.to_json()),
                       cells=cell_summaries, pairs=pairs)


def dataset_info(dataset: Dataset) -> DatasetInfo:
    return DatasetInfo(path=dataset.path, format=dataset.format, lines=dataset.lines, cases=len(dataset.cases),
                       bad=len(dataset.bad), bad_lines=bad_infos(dataset.bad), unit=dataset.unit)


def bad_infos(bad: Iterable[BadLine]) -> list[BadLineInfo]:
    return [BadLineInfo(line=b.line, error=b.error) for b in sorted(bad, key=lambda b: b.line)]
