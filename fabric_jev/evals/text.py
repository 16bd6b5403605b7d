"""An eval's summary and a diff of two evals as plain text for a terminal. Pure code, no I/O."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..terminal import terminal_safe
from .diff import Change, EvalDiff
from .summary import EvalSummary

#: Worst lines and bad lines shown per table (the report and the JSON have them all).
SHOWN = 5


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def p_text(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, indent: str = "  ") -> list[str]:
    """Columns padded to their widest cell; the first left-aligned, the others right-aligned."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        parts = [str(c).ljust(widths[0]) if i == 0 else str(c).rjust(widths[i]) for i, c in enumerate(cells)]
        return (indent + "  ".join(parts)).rstrip()

    return [line(header), indent + "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def _short(value: object, limit: int = 70) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_summary(summary: EvalSummary) -> str:
    d = summary.dataset
    out = [f"eval of {summary.program} on {d.path}: {d.cases} lines run"
           + (f", {d.bad} bad lines not run" if d.bad else "")]
    fields = sorted({name for cell in summary.cells for name in cell.fields})
    header = ["evaluator × variant", "pass rate", "95% interval", *fields, "ECE", "evals", "tokens in/out",
              "wall", "p50/line", "p95/line"]
    rows = []
    for cell in summary.cells:
        cost, interval = cell.cost, cell.pass_rate_interval
        rows.append([cell.name, f"{pct(cell.pass_rate)} ({cell.passed}/{cell.lines})",
                     f"{pct(interval.low)}–{pct(interval.high)}",
                     *(pct(cell.fields[f].accuracy) if f in cell.fields else "-" for f in fields),
                     "-" if cell.ece is None else f"{cell.ece:.3f}", str(cost.evaluations),
                     f"{cost.input_tokens}/{cost.output_tokens}", seconds(cost.wall_seconds),
                     seconds(cost.line_seconds_p50), seconds(cost.line_seconds_p95)])
    out += ["", "matrix (field columns: accuracy)", *table(header, rows)]
    if summary.pairs:
        rows = [[f"{summary.cells[p.first].name} → {summary.cells[p.second].name}", f"{p.lines}",
                 f"{p.difference * 100:+.1f} pts", f"{p.first_only}/{p.second_only}", p_text(p.p_value), p.method,
                 "real difference" if p.p_value < 0.05 else "could be noise"]
                for p in summary.pairs]
        out += ["", "paired tests (McNemar, on the lines both judged)",
                *table(["cells", "lines", "pass rate", "only first/only second", "p", "test", "at 0.05"], rows)]
    for cell in summary.cells:
        out += ["", f"{cell.name}"]
        rows = [[f.field, f.kind, f"{f.correct}/{f.lines}", pct(f.accuracy),
                 "-" if f.mae is None else f"{f.mae:.3f}"] for f in cell.fields.values()]
        out += table(["field", "kind", "right", "accuracy", "MAE"], rows)
        if cell.questions:
            rows = [[q.question, q.type, str(q.answers), f"{q.mean_confidence:.2f}", q.field or "-",
                     pct(q.agreement), "-" if q.ece is None else f"{q.ece:.3f}"] for q in cell.questions.values()]
            out += ["", *table(["question", "type", "answers", "confidence", "field", "agreement", "ECE"], rows)]
        if cell.worst:
            out += ["", f"  worst lines ({cell.lines - cell.passed} failed; most confident first)"]
            for w in cell.worst[:SHOWN]:
                got = w.error if w.result is None and w.error else _short(w.result)
                wrong = ", ".join(w.mismatches) or w.state
                out.append(f"    line {w.line} id {w.id} ({w.confidence:.2f}): wrong {wrong}"
                           f"; expected {_short(w.expected)}; got {got}")
    if d.bad_lines:
        out += ["", f"bad lines ({d.bad})"]
        out += [f"  {b.error}" for b in d.bad_lines[:SHOWN]]
        if d.bad > SHOWN:
            out.append(f"  … and {d.bad - SHOWN} more (summary.json and the report list them all)")
    return _safe(out)


def _safe(lines: list[str]) -> str:
    """The lines for a terminal: names and values come from the dataset and the program, so each line
    is made terminal-safe (an escape sequence or a newline in a label cannot act or forge a row)."""
    return "\n".join(terminal_safe(line) for line in lines)


def _delta(change: Change, *, percent: bool = False, digits: int = 3) -> str:
    def one(v: float | None) -> str:
        if v is None:
            return "-"
        return pct(v) if percent else (f"{v:.{digits}f}" if isinstance(v, float) and not v.is_integer() else f"{v:g}")

    delta = change.delta
    if delta is None:
        return f"{one(change.before)} → {one(change.after)}"
    sign = f"{delta * 100:+.1f} pts" if percent else f"{delta:+.{digits}g}"
    return f"{one(change.before)} → {one(change.after)} ({sign})"


def format_diff(diff: EvalDiff) -> str:
    out = [f"compare {diff.before} → {diff.after}"]
    for cell in diff.cells:
        name = f"{cell.evaluator} × {cell.variant}" + (f" (with {cell.matched_with})" if cell.matched_with else "")
        out += ["", name, f"  pass rate      {_delta(cell.pass_rate, percent=True)}"]
        for field, change in cell.fields.items():
            out.append(f"  {field:<14} {_delta(change, percent=True)}")
        out += [f"  ECE            {_delta(cell.ece)}", f"  evaluations    {_delta(cell.evaluations)}",
                f"  tokens in      {_delta(cell.input_tokens)}", f"  tokens out     {_delta(cell.output_tokens)}",
                f"  wall seconds   {_delta(cell.wall_seconds)}", f"  p95 per line   {_delta(cell.line_seconds_p95)}"]
        if cell.shared_lines is not None:
            verdict = "a real difference" if (cell.p_value or 1) < 0.05 else "could be noise"
            out.append(f"  lines: {cell.shared_lines} in both, {cell.fixed} fixed, {cell.broken} broken "
                       f"(McNemar p = {p_text(cell.p_value or 1.0)}, {verdict})")
            for line in cell.changes[:20]:
                out.append(f"    line {line.line} id {line.id}: {line.change}"
                           f" (wrong before: {', '.join(line.mismatches_before) or '-'};"
                           f" wrong after: {', '.join(line.mismatches_after) or '-'})")
            if len(cell.changes) > 20:
                out.append(f"    … and {len(cell.changes) - 20} more (--json lists them all)")
    if not diff.line_by_line:
        out += ["", "line by line needs the results.jsonl written beside each summary.json"]
    for side, names in (("only in " + diff.before, diff.only_before), ("only in " + diff.after, diff.only_after)):
        if names:
            out += ["", f"{side}: {', '.join(names)}"]
    return _safe(out)
