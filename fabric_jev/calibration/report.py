"""Reliability diagram and coverage curve as PNG files (matplotlib, from the `report` extra).

One figure per kind, one panel per question type, drawn with the
non-interactive Agg backend so no display is ever needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import ConfigError
from .metrics import BINS, Outcome, accuracy, coverage_curve, ece, reliability

TYPE_TITLES = {"noul": "noul (yes/no)", "choice": "choice", "score": "score (rounded level)"}


def _use_agg() -> None:
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("PNG reports need matplotlib: pip install 'fabric-jev[report]'") from None
    matplotlib.use("Agg", force=True)


def write_pngs(by_type: Mapping[str, Sequence[Outcome]], folder: Path, *, title: str) -> list[Path]:
    """reliability.png and coverage.png in `folder`; returns their paths."""
    _use_agg()
    kinds = [t for t in ("noul", "choice", "score") if by_type.get(t)]
    if not kinds:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    return [_reliability(by_type, kinds, folder / "reliability.png", title),
            _coverage(by_type, kinds, folder / "coverage.png", title)]


def _reliability(by_type: Mapping[str, Sequence[Outcome]], kinds: list[str],
                 path: Path, title: str) -> Path:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(kinds), figsize=(4.6 * len(kinds), 4.6), squeeze=False)
    for ax, kind in zip(axes[0], kinds, strict=True):
        outs = by_type[kind]
        bins = [b for b in reliability(outs) if b.count]
        ax.plot([0, 1], [0, 1], linestyle="--", color="0.45", linewidth=1.2, label="perfectly calibrated")
        ax.bar([(b.low + b.high) / 2 for b in bins], [b.accuracy for b in bins], width=1 / BINS * 0.9,
               color="#4878d0", alpha=0.75, edgecolor="#1f3f8a", label="accuracy in bin")
        ax.plot([b.confidence for b in bins], [b.accuracy for b in bins], "o", color="#d65f00",
                markersize=5, label="bin mean confidence")
        for b in bins:
            ax.annotate(str(b.count), ((b.low + b.high) / 2, min(b.accuracy + 0.02, 0.96)),
                        ha="center", fontsize=8, color="0.25")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_aspect("equal")
        ax.set_xlabel("confidence (probability of the picked answer)")
        ax.set_ylabel("accuracy")
        ax.set_title(f"{TYPE_TITLES[kind]}\n{len(outs)} examples · accuracy {accuracy(outs):.0%} · "
                     f"ECE {ece(outs):.3f}", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    fig.suptitle(f"Reliability — {title} (numbers: examples per bin)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _coverage(by_type: Mapping[str, Sequence[Outcome]], kinds: list[str],
              path: Path, title: str) -> Path:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(kinds), figsize=(4.6 * len(kinds), 4.2), squeeze=False)
    for ax, kind in zip(axes[0], kinds, strict=True):
        outs = by_type[kind]
        curve = coverage_curve(outs)
        xs = [0.0] + [p.coverage for p in curve]
        ys = [curve[0].accuracy] + [p.accuracy for p in curve]
        ax.step(xs, ys, where="post", color="#4878d0", linewidth=2, label="accuracy of kept answers")
        ax.axhline(accuracy(outs), linestyle="--", color="0.45", linewidth=1.2,
                   label=f"accuracy of all answers ({accuracy(outs):.0%})")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("coverage (share of answers kept, most confident first)")
        ax.set_ylabel("accuracy")
        ax.set_title(f"{TYPE_TITLES[kind]} · {len(outs)} examples", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower left", fontsize=8)
    fig.suptitle(f"Confidence vs accuracy — {title}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
