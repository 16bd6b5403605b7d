"""An eval's charts as PNG files, for places that cannot show HTML (matplotlib, the `report` extra).

- pass-rates.png: each cell's pass rate with its 95 % interval;
- reliability-N.png: cell N's reliability diagrams, one panel per question that maps to a field;
- confusion-N.png: cell N's confusion matrices, one panel per enum or boolean field.

Drawn with the non-interactive Agg backend: no display is ever needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._files import atomic_write
from .summary import CellSummary, EvalSummary


def _pyplot() -> Any:
    import matplotlib  # ImportError: the caller says which extra to install

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    import io

    plt = _pyplot()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write(path, buffer.getvalue())
    return path


def write_charts(summary: EvalSummary, folder: Path) -> list[Path]:
    """Every chart of the eval in `folder`; ImportError without matplotlib."""
    plt = _pyplot()
    folder.mkdir(parents=True, exist_ok=True)
    written = [_pass_rates(plt, summary, folder / "pass-rates.png")]
    for i, cell in enumerate(summary.cells):
        if any(q.reliability for q in cell.questions.values()):
            written.append(_reliability(plt, cell, folder / f"reliability-{i}.png"))
        if any(f.confusion is not None for f in cell.fields.values()):
            written.append(_confusions(plt, cell, folder / f"confusion-{i}.png"))
    return written


def _pass_rates(plt: Any, summary: EvalSummary, path: Path) -> Path:
    cells = summary.cells
    fig, ax = plt.subplots(figsize=(7.5, 0.55 * len(cells) + 1.4), layout="constrained")
    ys = list(range(len(cells)))[::-1]
    rates = [c.pass_rate for c in cells]
    low = [c.pass_rate - c.pass_rate_interval.low for c in cells]
    high = [c.pass_rate_interval.high - c.pass_rate for c in cells]
    ax.barh(ys, rates, color="#4878d0", alpha=0.8, height=0.6)
    ax.errorbar(rates, ys, xerr=[low, high], fmt="none", ecolor="#1f2f4f", capsize=4, linewidth=1.2)
    for y, cell in zip(ys, cells, strict=True):
        text = f"{cell.pass_rate:.1%} ({cell.passed}/{cell.lines})"
        low_end, high_end = cell.pass_rate_interval.low, cell.pass_rate_interval.high
        if high_end < 0.78:  # right of the interval
            ax.annotate(text, (high_end + 0.015, y), va="center", fontsize=8.5)
        else:  # no room there: inside the bar, left of the interval
            ax.annotate(text, (max(low_end - 0.015, 0.01), y), va="center", ha="right" if low_end > 0.2 else "left",
                        fontsize=8.5, color="white" if low_end > 0.2 else "black")
    ax.set_yticks(ys, [c.name for c in cells], fontsize=8.5)
    ax.set_xlim(0, 1)
    ax.set_xlabel("pass rate, with its 95% Wilson interval")
    ax.set_title(f"{summary.program}: {summary.dataset.cases} lines", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    return _save(fig, path)


def _reliability(plt: Any, cell: CellSummary, path: Path) -> Path:
    questions = [q for q in cell.questions.values() if q.reliability]
    fig, axes = plt.subplots(1, len(questions), figsize=(3.6 * len(questions), 3.9), squeeze=False,
                             layout="constrained")
    for ax, q in zip(axes[0], questions, strict=True):
        bins = [b for b in q.reliability if b.count]
        ax.plot([0, 1], [0, 1], linestyle="--", color="0.4", linewidth=1.1)
        ax.bar([(b.low + b.high) / 2 for b in bins], [b.accuracy for b in bins], width=0.09, color="#4878d0",
               alpha=0.75, edgecolor="#1f3f8a")
        ax.plot([b.confidence for b in bins], [b.accuracy for b in bins], "o", color="#d65f00", markersize=4)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("confidence")
        ax.set_ylabel("accuracy")
        ece = "-" if q.ece is None else f"{q.ece:.3f}"
        ax.set_title(f"{q.question} → {q.field}\n{q.labeled} answers, ECE {ece}", fontsize=9)
        ax.grid(True, alpha=0.3)
    fig.suptitle(f"Reliability: {cell.name}", fontsize=10)
    return _save(fig, path)


def _confusions(plt: Any, cell: CellSummary, path: Path) -> Path:
    fields = [f for f in cell.fields.values() if f.confusion is not None]
    fig, axes = plt.subplots(1, len(fields), figsize=(3.4 * len(fields) + 0.6, 3.6), squeeze=False,
                             layout="constrained")
    for ax, f in zip(axes[0], fields, strict=True):
        assert f.confusion is not None
        counts = f.confusion.counts
        labels = f.confusion.labels
        ax.imshow(counts, cmap="Blues")
        for r, row in enumerate(counts):
            for c, n in enumerate(row):
                if n:
                    ax.text(c, r, str(n), ha="center", va="center", fontsize=8,
                            color="white" if n > max(map(max, counts)) / 2 else "black")
        ax.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=8)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.set_xlabel("result")
        ax.set_ylabel("expected")
        ax.set_title(f"{f.field}: {f.accuracy:.1%} right", fontsize=9)
    fig.suptitle(f"Confusion: {cell.name}", fontsize=10)
    return _save(fig, path)
