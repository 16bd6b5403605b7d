"""Reliability diagram and coverage curve as PNG files (matplotlib, from the `report` extra).

One figure per kind, one panel per question type, drawn with the
non-interactive Agg backend so no display is ever needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..questions import kind_of, listed
from .metrics import BINS, AnswerOutcome, accuracy, coverage_curve, ece, reliability


def _use_agg() -> None:
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("PNG reports need matplotlib: pip install 'fabric-jev[report]'") from None
    matplotlib.use("Agg", force=True)


def write_pngs(by_type: Mapping[str, Sequence[AnswerOutcome]], folder: Path, *, title: str) -> list[Path]:
    """reliability.png and coverage.png in `folder`; returns their paths."""
    _use_agg()
    kinds = [t for t in listed() if by_type.get(t)]
    if not kinds:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    return [_reliability(by_type, kinds, folder / "reliability.png", title),
            _coverage(by_type, kinds, folder / "coverage.png", title)]


def _finish(fig: Any, axes: Any, path: Path, title: str, *, legend_columns: int) -> Path:
    """One legend for the panels (they share it), the title, the PNG written, the figure freed."""
    import matplotlib.pyplot as plt

    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=legend_columns, fontsize=8.5, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _reliability(by_type: Mapping[str, Sequence[AnswerOutcome]], kinds: list[str],
                 path: Path, title: str) -> Path:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(kinds), figsize=(4.4 * len(kinds), 5.0), squeeze=False,
                             layout="constrained")
    for ax, kind in zip(axes[0], kinds, strict=True):
        outs = by_type[kind]
        bins = [b for b in reliability(outs) if b.count]
        ax.plot([0, 1], [0, 1], linestyle="--", color="0.35", linewidth=1.3, label="perfect calibration")
        ax.bar([(b.low + b.high) / 2 for b in bins], [b.accuracy for b in bins], width=1 / BINS * 0.9,
               color="#4878d0", alpha=0.7, edgecolor="#1f3f8a", label="accuracy in the bin")
        ax.plot([b.confidence for b in bins], [b.accuracy for b in bins], "o", color="#d65f00",
                markersize=5, label="(mean confidence, accuracy)")
        for b in bins:
            # Above the bar and clear of the dot (which sits at the bar's height).
            ax.annotate(f"n={b.count}", ((b.low + b.high) / 2, b.accuracy + 0.035), ha="center",
                        va="bottom", fontsize=7.5, color="0.2")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.1)
        ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        ax.set_aspect(1 / 1.1)
        ax.set_xlabel("confidence of the picked answer")
        ax.set_ylabel("accuracy")
        ax.set_title(f"{kind_of(kind).title()}: {len(outs)} answers\naccuracy {accuracy(outs):.0%}, "
                     f"ECE {ece(outs):.3f}", fontsize=10)
        ax.grid(True, alpha=0.3)
    return _finish(fig, axes, path, f"Reliability: {title}", legend_columns=3)


def _coverage(by_type: Mapping[str, Sequence[AnswerOutcome]], kinds: list[str],
              path: Path, title: str) -> Path:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(kinds), figsize=(4.4 * len(kinds), 4.4), squeeze=False,
                             layout="constrained")
    for ax, kind in zip(axes[0], kinds, strict=True):
        outs = by_type[kind]
        curve = coverage_curve(outs)
        xs = [0.0] + [p.coverage for p in curve]
        ys = [curve[0].accuracy] + [p.accuracy for p in curve]
        ax.step(xs, ys, where="post", color="#4878d0", linewidth=2, label="accuracy of the kept answers")
        ax.axhline(accuracy(outs), linestyle="--", color="0.35", linewidth=1.2,
                   label="accuracy of all answers")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("coverage: share kept, most confident first")
        ax.set_ylabel("accuracy")
        ax.set_title(f"{kind_of(kind).title()}: {len(outs)} answers, all {accuracy(outs):.0%} right",
                     fontsize=10)
        ax.grid(True, alpha=0.3)
    return _finish(fig, axes, path, f"Confidence vs accuracy: {title}", legend_columns=2)
