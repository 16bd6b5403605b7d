"""How a batch shows itself: a live rich bar on a terminal, plain lines elsewhere, then a summary."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, TextIO

from ..terminal import one_line
from .records import REJECTED, STATES, BatchOutcome, Tally


class Display(Protocol):
    def start(self) -> None: ...
    def update(self, outcome: BatchOutcome) -> None: ...
    def finish(self, *, interrupted: bool, show_summary: bool = True) -> None: ...
    def paused(self) -> AbstractContextManager[None]:
        """Nothing is drawn meanwhile (a question is on the terminal); what happened shows after."""
        ...


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


def _eta(tally: Tally, seconds: float) -> str:
    """Time left at this session's pace: inputs done earlier (--resume) took no time now."""
    rate = _rate(tally.done, seconds)
    if tally.total is None or rate <= 0:
        return "-:--:--"
    left = max(0, tally.total - tally.skipped - tally.done) / rate
    whole = int(left + 0.5)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


class PlainDisplay:
    """One line per outcome (for logs and pipes), then a plain summary table."""

    def __init__(self, tally: Tally, stream: TextIO, *, quiet: bool = False, name: str = "batch") -> None:
        self.tally, self.stream, self.quiet, self.name = tally, stream, quiet, name
        self.started = time.perf_counter()
        self._held: list[str] | None = None

    @contextmanager
    def paused(self) -> Iterator[None]:
        self._held = []
        try:
            yield
        finally:
            held, self._held = self._held, None
            for text in held:
                self._write(text)

    def start(self) -> None:
        self.started = time.perf_counter()
        if self.tally.skipped:
            self._write(f"{self.name}: resuming; {self.tally.skipped} inputs already in the output are skipped")

    def update(self, outcome: BatchOutcome) -> None:
        if self.quiet:
            return
        t = self.tally
        total = "?" if t.total is None else str(t.total)
        # Counted as a resumed bar should: what is done, this time and earlier, of the whole file.
        # An id comes from the inputs: made terminal-safe, it cannot act on a terminal or break the line.
        self._write(f"{self.name}: [{t.skipped + t.done}/{total}] line {outcome.line} id {one_line(str(outcome.id))}: "
                    f"{outcome.state}"
                    f" ({t.not_completed} not completed, "
                    f"{_rate(t.done, time.perf_counter() - self.started):.1f}/s)")

    def finish(self, *, interrupted: bool, show_summary: bool = True) -> None:
        if not show_summary:
            return
        wall = time.perf_counter() - self.started
        width = max(len(s) for s in (*STATES, "evaluations", "resumed"))
        lines = [f"{self.name} summary" + (" (interrupted: rerun with --resume)" if interrupted else "")]
        for state, count in summary_rows(self.tally):
            lines.append(f"  {state:<{width}}  {count}")
        for label, value in summary_totals(self.tally, wall):
            lines.append(f"  {label:<{width}}  {value}")
        self._write("\n".join(lines))

    def _write(self, text: str) -> None:
        if self._held is not None:
            self._held.append(text)
            return
        self.stream.write(text + "\n")
        self.stream.flush()


def summary_rows(tally: Tally) -> list[tuple[str, str]]:
    rows = [(state, str(tally.states[state])) for state in STATES if tally.states[state] or state in
            ("completed", "failed")]
    if tally.skipped:
        earlier = ", ".join(f"{s} {n}" for s, n in sorted(tally.earlier.items()))
        rows.append(("resumed", f"{tally.skipped} already done ({earlier})"))
    return rows


def summary_totals(tally: Tally, wall: float) -> list[tuple[str, str]]:
    return [("evaluations", str(tally.evaluations)),
            ("tokens", f"{tally.input_tokens} in / {tally.output_tokens} out"),
            ("wall time", f"{wall:.2f} s ({_rate(tally.done, wall):.1f} inputs/s)")]


class RichDisplay:
    """A live bar (done / not completed / rate / ETA) and a summary table, both from rich."""

    def __init__(self, tally: Tally, stream: TextIO, *, name: str = "batch") -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.tally, self.name = tally, name
        self.console = Console(file=stream)
        self.progress = Progress(
            TextColumn(f"[bold]{name}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("[red]{task.fields[failed]} not completed"),
            TextColumn("{task.fields[rate]}/s"), TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}"),
            console=self.console, redirect_stdout=False, redirect_stderr=False)
        # The bar counts inputs done earlier (--resume) as done; rich's own ETA would read
        # them as speed, so the ETA column is this session's pace over what is left.
        self.task = self.progress.add_task(name, total=tally.total, completed=tally.skipped,
                                           failed=0, rate="0.0", eta="-:--:--")
        self.started = time.perf_counter()

    def start(self) -> None:
        self.started = time.perf_counter()
        if self.tally.skipped:
            self.console.print(f"resuming: {self.tally.skipped} inputs already in the output are skipped")
        self.progress.start()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """rich's documented way: stop the live display, start it again after."""
        running = self.progress.live.is_started
        if running:
            self.progress.stop()
        try:
            yield
        finally:
            if running:
                self.progress.start()

    def update(self, outcome: BatchOutcome) -> None:
        elapsed = time.perf_counter() - self.started
        rate = _rate(self.tally.done, elapsed)
        self.progress.update(self.task, completed=self.tally.skipped + self.tally.done,
                             failed=self.tally.not_completed, rate=f"{rate:.1f}", eta=_eta(self.tally, elapsed))

    def finish(self, *, interrupted: bool, show_summary: bool = True) -> None:
        from rich.table import Table

        self.progress.stop()
        if not show_summary:
            return
        wall = time.perf_counter() - self.started
        table = Table(title=f"{self.name} summary" + (" (interrupted: rerun with --resume)" if interrupted else ""))
        table.add_column("")
        table.add_column("", justify="right")
        for state, count in summary_rows(self.tally):
            style = "green" if state == "completed" else "red" if state in ("failed", REJECTED) else ""
            table.add_row(state, count, style=style)
        for label, value in summary_totals(self.tally, wall):
            table.add_row(label, value)
        self.console.print(table)


def make_display(tally: Tally, stream: TextIO, *, quiet: bool = False,
                 name: str = "batch") -> RichDisplay | PlainDisplay:
    """Rich on a terminal, plain lines otherwise; `name` is the command each line starts with."""
    if stream.isatty() and not quiet:
        return RichDisplay(tally, stream, name=name)
    return PlainDisplay(tally, stream, quiet=quiet, name=name)
