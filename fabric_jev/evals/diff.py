"""What changed between two evals, in the totals and line by line. Pure code, no I/O.

Cells are matched by evaluator and variant (two evals of one cell each are
matched whatever their names). Totals come from the two summaries; line by
line, and McNemar's test between the two runs of a cell, from their results
lines when both are at hand, matched by the lines' ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import ConfigDict, Field

from ..contract.wire_model import WireModel
from . import stats
from .records import EvalRecord
from .summary import CellSummary, EvalSummary


class _Model(WireModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Change(_Model):
    """A number before and after."""

    before: float | None
    after: float | None

    @property
    def delta(self) -> float | None:
        return None if self.before is None or self.after is None else self.after - self.before


class LineChange(_Model):
    line: int
    id: int | str
    #: fixed: failed before, passes now; broken: the other way round
    change: Literal["fixed", "broken"]
    mismatches_before: list[str]
    mismatches_after: list[str]


class CellDiff(_Model):
    evaluator: str
    variant: str
    #: the cell's name in the second eval, where it differs
    matched_with: str | None = None
    pass_rate: Change
    lines: Change
    fields: dict[str, Change]
    ece: Change
    evaluations: Change
    input_tokens: Change
    output_tokens: Change
    wall_seconds: Change
    line_seconds_p50: Change
    line_seconds_p95: Change
    #: From the results lines: the lines both runs judged, and McNemar's test on them.
    shared_lines: int | None = None
    fixed: int | None = None
    broken: int | None = None
    p_value: float | None = None
    method: stats.McNemarMethod | None = None
    changes: list[LineChange] = Field(default_factory=list)


class EvalDiff(_Model):
    before: str
    after: str
    cells: list[CellDiff]
    only_before: list[str]
    only_after: list[str]
    #: whether the results lines of both evals were at hand (line by line and the paired test)
    line_by_line: bool


def _change(before: float | None, after: float | None) -> Change:
    return Change(before=before, after=after)


def _cell_diff(a: CellSummary, b: CellSummary, records: tuple[Sequence[EvalRecord], Sequence[EvalRecord]] | None
               ) -> CellDiff:
    fields = {name: _change(a.fields[name].accuracy if name in a.fields else None,
                            b.fields[name].accuracy if name in b.fields else None)
              for name in sorted(set(a.fields) | set(b.fields))}
    out = CellDiff(
        evaluator=a.evaluator, variant=a.variant,
        matched_with=None if (a.evaluator, a.variant) == (b.evaluator, b.variant) else b.name,
        pass_rate=_change(a.pass_rate, b.pass_rate), lines=_change(a.lines, b.lines), fields=fields,
        ece=_change(a.ece, b.ece), evaluations=_change(a.cost.evaluations, b.cost.evaluations),
        input_tokens=_change(a.cost.input_tokens, b.cost.input_tokens),
        output_tokens=_change(a.cost.output_tokens, b.cost.output_tokens),
        wall_seconds=_change(a.cost.wall_seconds, b.cost.wall_seconds),
        line_seconds_p50=_change(a.cost.line_seconds_p50, b.cost.line_seconds_p50),
        line_seconds_p95=_change(a.cost.line_seconds_p95, b.cost.line_seconds_p95))
    if records is None:
        return out
    before = {r.id: r for r in records[0]}
    changes: list[LineChange] = []
    shared = 0
    for record in sorted(records[1], key=lambda r: r.line):
        earlier = before.get(record.id)
        if earlier is None:
            continue
        shared += 1
        if earlier.passed != record.passed:
            changes.append(LineChange(line=record.line, id=record.id, change="fixed" if record.passed else "broken",
                                      mismatches_before=[v.field for v in earlier.fields if not v.ok],
                                      mismatches_after=[v.field for v in record.fields if not v.ok]))
    fixed = sum(c.change == "fixed" for c in changes)
    broken = len(changes) - fixed
    test = stats.mcnemar(broken, fixed)
    return out.model_copy(update={"shared_lines": shared, "fixed": fixed, "broken": broken,
                                  "p_value": test.p_value, "method": test.method, "changes": changes})


def diff_evals(before: EvalSummary, after: EvalSummary, *, names: tuple[str, str] = ("A", "B"),
               records: tuple[Sequence[EvalRecord], Sequence[EvalRecord]] | None = None) -> EvalDiff:
    """The changes from `before` to `after`; `records` are their results lines, if at hand."""
    key_a = {(c.evaluator, c.variant): c for c in before.cells}
    key_b = {(c.evaluator, c.variant): c for c in after.cells}
    pairs = [(key_a[k], key_b[k]) for k in key_a if k in key_b]
    if not pairs and len(before.cells) == 1 and len(after.cells) == 1:
        pairs = [(before.cells[0], after.cells[0])]  # one cell each: the same question, asked of two setups
    matched_a = {id(a) for a, _ in pairs}
    matched_b = {id(b) for _, b in pairs}
    cells = []
    for a, b in pairs:
        cell_records = None
        if records is not None:
            cell_records = ([r for r in records[0] if r.cell == (a.evaluator, a.variant)],
                            [r for r in records[1] if r.cell == (b.evaluator, b.variant)])
        cells.append(_cell_diff(a, b, cell_records))
    return EvalDiff(before=names[0], after=names[1], cells=cells,
                    only_before=[c.name for c in before.cells if id(c) not in matched_a],
                    only_after=[c.name for c in after.cells if id(c) not in matched_b],
                    line_by_line=records is not None)
