"""An eval as one self-contained HTML page (and PNG charts beside it, from the `report` extra).

The page needs nothing but itself: styles, script and data are inline, the
charts are inline SVG, and its Content-Security-Policy forbids every fetch, so
it opens the same from a CI artifact, an e-mail or a laptop without network.
Every number in it is a number of summary.json, marked with the JSON pointer
it comes from (``data-k="/cells/0/passRate"``) and how it is written
(``data-f``), so a test can hold the page to the summary. The worst-lines
table lists every failed line of the results (a filter narrows it by cell,
field or text); the page draws the first rows that match and more on request,
which keeps a report of ten thousand lines as quick to open as one of a
hundred.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._files import atomic_write
from ..errors import EvalError
from .dataset import BadLine
from .records import EvalRecord
from .summary import CellSummary, EvalSummary, QuestionSummary, worst_lines

PAGE = "index.html"
#: Rows of the worst-lines table drawn at first, and at each "show more".
ROWS_SHOWN = 100


@dataclass
class ReportFiles:
    """What `write_report` wrote, and what it could not (a missing extra)."""

    page: Path
    charts: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def pointer(*parts: str | int) -> str:
    """A JSON pointer (RFC 6901) into summary.json."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def fmt(value: float | int | None, kind: str) -> str:
    """A number as the page writes it (the browser test reads it back with the same rules)."""
    if value is None:
        return "–"
    if kind == "pct":
        return f"{value * 100:.1f}%"
    if kind == "int":
        return f"{int(value)}"
    if kind == "f3":
        return f"{value:.3f}"
    if kind == "ms":
        return f"{value * 1000:.1f} ms"
    if kind == "s":
        return f"{value:.2f} s"
    if kind == "p":
        return "< 0.001" if value < 0.001 else f"{value:.3f}"
    if kind == "pts":
        return f"{value * 100:+.1f} pts"
    if kind == "g":
        return f"{value:g}"
    raise ValueError(f"unknown number format {kind!r}")


def num(value: float | int | None, kind: str, *path: str | int) -> str:
    return (f'<span class="n" data-k="{html.escape(pointer(*path))}" data-f="{kind}">'
            f"{html.escape(fmt(value, kind))}</span>")


def esc(text: object) -> str:
    return html.escape(str(text))


def _json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


# ---------------------------------------------------------------- sections

def _matrix(summary: EvalSummary) -> str:
    fields = sorted({name for cell in summary.cells for name in cell.fields})
    head = "".join(f"<th>{esc(f)}</th>" for f in fields)
    rows = []
    for i, cell in enumerate(summary.cells):
        c = ("cells", i)
        field_cells = "".join(
            f"<td>{num(cell.fields[f].accuracy, 'pct', *c, 'fields', f, 'accuracy')}</td>" if f in cell.fields
            else "<td>–</td>" for f in fields)
        interval = cell.pass_rate_interval
        baseline = next((p for p in summary.pairs if p.first == 0 and p.second == i), None)
        versus = "<td>baseline</td><td></td>" if i == 0 else "<td></td><td></td>"
        if baseline is not None:
            at = ("pairs", summary.pairs.index(baseline))
            versus = (f"<td>{num(baseline.difference, 'pts', *at, 'difference')}</td>"
                      f"<td>{num(baseline.p_value, 'p', *at, 'pValue')}"
                      f"{' <b class=sig>real</b>' if baseline.p_value < 0.05 else ' <i>noise?</i>'}</td>")
        rows.append(
            f'<tr><th scope="row"><a href="#cell-{i}">{esc(cell.evaluator)}</a> × {esc(cell.variant)}</th>'
            f"<td>{num(cell.pass_rate, 'pct', *c, 'passRate')} "
            f"<small>({num(cell.passed, 'int', *c, 'passed')}/{num(cell.lines, 'int', *c, 'lines')})</small></td>"
            f"<td>{num(interval.low, 'pct', *c, 'passRateInterval', 'low')}–"
            f"{num(interval.high, 'pct', *c, 'passRateInterval', 'high')}</td>{field_cells}"
            f"<td>{num(cell.ece, 'f3', *c, 'ece')}</td>"
            f"<td>{num(cell.cost.evaluations, 'int', *c, 'cost', 'evaluations')}</td>"
            f"<td>{num(cell.cost.input_tokens, 'int', *c, 'cost', 'inputTokens')} / "
            f"{num(cell.cost.output_tokens, 'int', *c, 'cost', 'outputTokens')}</td>"
            f"<td>{num(cell.cost.wall_seconds, 's', *c, 'cost', 'wallSeconds')}</td>"
            f"<td>{num(cell.cost.line_seconds_p50, 'ms', *c, 'cost', 'lineSecondsP50')} / "
            f"{num(cell.cost.line_seconds_p95, 'ms', *c, 'cost', 'lineSecondsP95')}</td>{versus}</tr>")
    table = (f'<div class=wide><table id="matrix-table"><thead><tr><th>evaluator × variant</th><th>pass rate</th>'
             f"<th>95% interval</th>{head}<th>ECE</th><th>evaluations</th><th>tokens in / out</th><th>wall</th>"
             f"<th>line p50 / p95</th><th>vs base</th><th>p</th></tr></thead>"
             f"<tbody>{''.join(rows)}</tbody></table></div>")
    pairs = ""
    if summary.pairs:
        prow = []
        for k, p in enumerate(summary.pairs):
            pk = ("pairs", k)
            prow.append(
                f"<tr><th scope=row>{esc(summary.cells[p.first].name)} → {esc(summary.cells[p.second].name)}</th>"
                f"<td>{num(p.lines, 'int', *pk, 'lines')}</td><td>{num(p.both_passed, 'int', *pk, 'bothPassed')}</td>"
                f"<td>{num(p.first_only, 'int', *pk, 'firstOnly')}</td>"
                f"<td>{num(p.second_only, 'int', *pk, 'secondOnly')}</td>"
                f"<td>{num(p.both_failed, 'int', *pk, 'bothFailed')}</td>"
                f"<td>{num(p.difference, 'pts', *pk, 'difference')}</td><td>{num(p.p_value, 'p', *pk, 'pValue')}</td>"
                f"<td>{esc(p.method)}</td><td>{'real difference' if p.p_value < 0.05 else 'could be noise'}</td></tr>")
        pairs = ("<h3>Paired tests</h3><p class=note>McNemar's test on the lines both cells judged: only the lines "
                 "where they disagree count. Exact (binomial) under 25 such lines, chi-square with continuity "
                 "correction from there. p under 0.05: unlikely to be noise.</p>"
                 '<table id="pairs-table"><thead><tr><th>first → second</th><th>lines</th><th>both pass</th>'
                 "<th>only first</th><th>only second</th><th>both fail</th><th>pass rate</th><th>p</th><th>test</th>"
                 f"<th>at 0.05</th></tr></thead><tbody>{''.join(prow)}</tbody></table>")
    return (f'<section id="matrix"><h2>Matrix</h2><p class=note>Rows are evaluator × variant; field columns are '
            f"accuracy. A line passes when its run completed and every field its expected value gives matched. "
            f"The interval is Wilson's 95% score interval.</p>{table}{pairs}</section>")


def _reliability_svg(q: QuestionSummary, at: tuple[str | int, ...]) -> str:
    """Bars: accuracy per confidence bin; the dashed diagonal is perfect calibration."""
    size, pad = 160, 22
    parts = [f'<svg class="rel" viewBox="0 0 {size + pad + 4} {size + pad + 4}" width="{size + pad + 4}" '
             f'height="{size + pad + 4}" role="img" aria-label="reliability of {esc(q.question)}">',
             f'<rect x="{pad}" y="2" width="{size}" height="{size}" class="frame"/>',
             f'<line x1="{pad}" y1="{size + 2}" x2="{pad + size}" y2="2" class="diag"/>']
    width = size / max(1, len(q.reliability))
    for b_index, b in enumerate(q.reliability):
        if not b.count:
            continue
        height = b.accuracy * size
        parts.append(
            f'<rect class="bar" x="{pad + b_index * width + 1:.2f}" y="{2 + size - height:.2f}" '
            f'width="{width - 2:.2f}" height="{height:.2f}" '
            f'data-k="{pointer(*at, "reliability", b_index, "accuracy")}" '
            f'data-f="bar" data-scale="{size}"><title>confidence {b.low:.1f}–{b.high:.1f}: {b.count} answers, '
            f"accuracy {b.accuracy * 100:.1f}%, mean confidence {b.confidence * 100:.1f}%</title></rect>")
    parts.append(f'<text x="{pad + size / 2}" y="{size + pad}" class="axis">confidence</text>'
                 f'<text x="4" y="{2 + size / 2}" class="axis" transform="rotate(-90 8 {2 + size / 2})">accuracy</text>'
                 "</svg>")
    return "".join(parts)


def _cell(summary: EvalSummary, i: int, cell: CellSummary) -> str:
    c: tuple[str | int, ...] = ("cells", i)
    rows = []
    confusions = []
    for name, f in cell.fields.items():
        fk = (*c, "fields", name)
        rows.append(f"<tr><th scope=row>{esc(name)}</th><td>{esc(f.kind)}</td>"
                    f"<td>{num(f.correct, 'int', *fk, 'correct')}/{num(f.lines, 'int', *fk, 'lines')}</td>"
                    f"<td>{num(f.accuracy, 'pct', *fk, 'accuracy')}</td>"
                    f"<td>{num(f.mae, 'f3', *fk, 'mae') if f.kind == 'number' else '–'}</td></tr>")
        if f.confusion is not None:
            labels = f.confusion.labels
            head = "".join(f"<th>{esc(label)}</th>" for label in labels)
            body = []
            for r, label in enumerate(labels):
                total = sum(f.confusion.counts[r]) or 1
                cells = "".join(
                    f'<td style="--share:{count / total:.3f}" class="{"hit" if r == col else "miss"}">'
                    f"{num(count, 'int', *fk, 'confusion', 'counts', r, col)}</td>"
                    for col, count in enumerate(f.confusion.counts[r]))
                body.append(f"<tr><th scope=row>{esc(label)}</th>{cells}</tr>")
            confusions.append(f'<figure class="confusion"><figcaption>{esc(name)}: rows expected, columns the '
                              f"result</figcaption><table><thead><tr><th></th>{head}</tr></thead>"
                              f"<tbody>{''.join(body)}</tbody></table></figure>")
    extra = ""
    if cell.extra_fields:
        extra = "<p class=note>Fields beyond the expected value (match whole): " + ", ".join(
            f"{esc(k)} in {num(v, 'int', *c, 'extraFields', k)} lines" for k, v in cell.extra_fields.items()) + "</p>"
    questions = []
    for qid, q in cell.questions.items():
        qk = (*c, "questions", qid)
        questions.append(
            f"<tr><th scope=row>{esc(qid)}</th><td>{esc(q.type)}</td><td>{num(q.answers, 'int', *qk, 'answers')}</td>"
            f"<td>{num(q.mean_confidence, 'f3', *qk, 'meanConfidence')}</td><td>{esc(q.field or '–')}</td>"
            f"<td>{num(q.labeled, 'int', *qk, 'labeled')}</td><td>{num(q.agreement, 'pct', *qk, 'agreement')}</td>"
            f"<td>{num(q.ece, 'f3', *qk, 'ece')}</td><td>{num(q.brier, 'f3', *qk, 'brier')}</td></tr>")
    diagrams = "".join(f'<figure class="diagram"><figcaption>{esc(qid)} → {esc(q.field)}</figcaption>'
                       f"{_reliability_svg(q, (*c, 'questions', qid))}</figure>"
                       for qid, q in cell.questions.items() if q.reliability)
    provenance = "; ".join(", ".join(f"{k} {esc(v)}" for k, v in p.items() if v is not None)
                           for p in cell.provenance) or "no judgment was asked"
    cost = cell.cost
    ck = (*c, "cost")
    return (
        f'<details class="cell" id="cell-{i}"{" open" if i == 0 else ""}><summary><h2>{esc(cell.name)}</h2> '
        f"{num(cell.pass_rate, 'pct', *c, 'passRate')} pass</summary>"
        f"<p class=note>Answered by: {provenance}. Runs that did not complete: "
        f"{num(cell.not_completed, 'int', *c, 'notCompleted')}.</p>"
        f"<h3>Fields</h3><table class=fields><thead><tr><th>field</th><th>kind</th><th>right</th><th>accuracy</th>"
        f"<th>MAE</th></tr></thead><tbody>{''.join(rows)}</tbody></table>{extra}"
        f"<div class=confusions>{''.join(confusions)}</div>"
        + (f"<h3>Questions</h3><table class=questions><thead><tr><th>question</th><th>type</th><th>answers</th>"
           f"<th>mean confidence</th><th>field</th><th>labeled</th><th>agreement</th><th>ECE</th><th>Brier</th></tr>"
           f"</thead><tbody>{''.join(questions)}</tbody></table><div class=diagrams>{diagrams}</div>"
           if questions else "")
        + f"<h3>Cost</h3><p>{num(cost.evaluations, 'int', *ck, 'evaluations')} evaluations, "
        f"{num(cost.tool_calls, 'int', *ck, 'toolCalls')} tool calls, "
        f"{num(cost.input_tokens, 'int', *ck, 'inputTokens')} tokens in, "
        f"{num(cost.output_tokens, 'int', *ck, 'outputTokens')} out; wall time "
        f"{num(cost.wall_seconds, 's', *ck, 'wallSeconds')}; per line p50 "
        f"{num(cost.line_seconds_p50, 'ms', *ck, 'lineSecondsP50')}, p95 "
        f"{num(cost.line_seconds_p95, 'ms', *ck, 'lineSecondsP95')}, mean "
        f"{num(cost.line_seconds_mean, 'ms', *ck, 'lineSecondsMean')}, max "
        f"{num(cost.line_seconds_max, 'ms', *ck, 'lineSecondsMax')}.</p></details>")


def _bad(summary: EvalSummary) -> str:
    d = summary.dataset
    if not d.bad:
        return ""
    rows = "".join(f"<tr><td>{num(b.line, 'int', 'dataset', 'badLines', k, 'line')}</td><td>{esc(b.error)}</td></tr>"
                   for k, b in enumerate(d.bad_lines))
    return (f'<section id="bad"><h2>Bad lines: {num(d.bad, "int", "dataset", "bad")}</h2><p class=note>Lines of '
            f"the dataset that were not run (not JSON, no input, an input off the program's schema, an expected "
            f"value no result could meet, a repeated id). They count in no rate.</p>"
            f'<table id="bad-table"><thead><tr><th>{esc(d.unit)}</th><th>why</th></tr></thead>'
            f"<tbody>{rows}</tbody></table></section>")


def _lines_data(summary: EvalSummary, results: Sequence[EvalRecord | BadLine] | None) -> dict[str, Any]:
    """Every failed line, per cell, most confident first (the summary's first rows, then the rest)."""
    rows: list[dict[str, Any]] = []
    for i, cell in enumerate(summary.cells):
        if results is not None:
            records = [r for r in results if isinstance(r, EvalRecord) and r.cell == (cell.evaluator, cell.variant)]
            worst = worst_lines(records, limit=None)
        else:
            worst = list(cell.worst)
        for rank, w in enumerate(worst):
            rows.append({"cell": i, "rank": rank, "line": w.line, "id": w.id, "confidence": w.confidence,
                         "state": w.state, "wrong": w.mismatches, "input": w.input, "expected": w.expected,
                         "result": w.result, "error": w.error, "answers": w.answers})
    return {"cells": [c.name for c in summary.cells], "complete": results is not None, "rowsShown": ROWS_SHOWN,
            "fields": sorted({f for c in summary.cells for f in c.fields}), "lines": rows}


def _worst() -> str:
    return ('<section id="worst"><h2>Worst lines</h2><p class=note>Failed lines, the most confident first: a '
            "confident wrong answer costs more than an unsure one. Confidence is the highest probability among the "
            "answers behind the wrong fields.</p><div class=filters>"
            '<label>cell <select id="f-cell"><option value="">all</option></select></label> '
            '<label>wrong field <select id="f-field"><option value="">any</option></select></label> '
            '<label>text <input id="f-text" type="search" placeholder="input, expected, result…"></label> '
            '<span id="f-count" aria-live="polite"></span></div>'
            '<table id="worst-table"><thead><tr><th>cell</th><th>line</th><th>id</th><th>confidence</th>'
            "<th>wrong</th><th>expected</th><th>result</th><th></th></tr></thead><tbody></tbody></table>"
            '<button id="more" type="button" hidden>show more</button></section>')


def _asset(name: str) -> str:
    """The page's stylesheet or script, kept beside this module and inlined into every page."""
    return (Path(__file__).parent / name).read_text(encoding="utf-8")







def render(summary: EvalSummary, results: Sequence[EvalRecord | BadLine] | None = None) -> str:
    """The report page's HTML."""
    d = summary.dataset
    data = json.dumps(_lines_data(summary, results), ensure_ascii=False, separators=(",", ":"))
    # Inside a script element only "</script" and "<!--" mean something: no "<" is left to form them.
    data = data.replace("<", "\\u003c")
    cells = "".join(_cell(summary, i, cell) for i, cell in enumerate(summary.cells))
    settings = summary.settings
    tolerance = ", ".join(f"{esc(k)} ± {num(v, 'g', 'settings', 'tolerance', k)}"
                          for k, v in settings.tolerance.items()) or "exact numbers"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>eval: {esc(summary.program)}</title><style>{_asset('report.css')}</style></head><body>"
        f"<header><h1>How well <code>{esc(summary.program)}</code> judges</h1>"
        f"<p class=note>Dataset <code>{esc(d.path)}</code> ({esc(d.format)}): "
        f"{num(d.lines, 'int', 'dataset', 'lines')} lines, {num(d.cases, 'int', 'dataset', 'cases')} run, "
        f"{num(d.bad, 'int', 'dataset', 'bad')} bad. "
        f"Expected values compared {'whole' if settings.match == 'whole' else 'partially'}; {tolerance}.</p>"
        '<nav><a href="#matrix">matrix</a><a href="#cells">cells</a><a href="#worst">worst lines</a>'
        f"{'<a href=#bad>bad lines</a>' if d.bad else ''}</nav></header>"
        f'{_matrix(summary)}<section id="cells">{cells}</section>{_worst()}{_bad(summary)}'
        f'<script type="application/json" id="eval-data">{data}</script><script>{_asset("report.js")}</script>'
        "</body></html>")


def write_report(summary: EvalSummary, folder: str | Path,
                 results: Iterable[EvalRecord | BadLine] | None = None, *, charts: bool = True) -> ReportFiles:
    """index.html in `folder` (made if needed) and, with matplotlib, PNG charts in `folder`/png."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EvalError(f"cannot make report folder {folder}: {exc.strerror}") from None
    listed = None if results is None else list(results)
    page = folder / PAGE
    try:
        atomic_write(page, render(summary, listed))
    except OSError as exc:
        raise EvalError(f"cannot write {page}: {exc.strerror}") from None
    written = ReportFiles(page)
    if charts:
        from .charts import write_charts

        try:
            written.charts = write_charts(summary, folder / "png")
        except ImportError:
            written.notes.append("PNG charts need matplotlib: pip install 'fabric-jev[report]' (the HTML page "
                                 "has every chart)")
    if listed is None:
        written.notes.append("the report lists the summary's worst lines only; write it from an --out folder "
                             "(results.jsonl) for every failed line")
    return written
