"""The terminal approver: an `ask` shown on standard error, answered by one line on standard input.

Deno's convention: a prompt on a TTY, a denial without one. The question shows
the facts every approver gets (`CapabilityCall.facts`); the answer is `y` (yes,
this once), `a` (always for this ref in this run), `n` (no) or `N` (no to every
later question of the run). Enter alone denies, and so does the approver
timeout (`approverTimeoutMs`). An unrecognised answer asks again.

Before each question, input typed ahead is discarded (as Deno does): a key
pressed before the question was on screen must not answer it. After a question
that ended unanswered, lines arriving within a short guard of the next
question do not count: they were typed for the question before. Whatever else
writes to the terminal (progress lines, a rich progress bar) is paused while
a question is open, through the `pause` hook.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, TextIO

import anyio

from ..terminal import terminal_safe

if TYPE_CHECKING:  # loaded by whoever asks: a run that asks nothing never loads it
    from ..approval.question import CapabilityCall, Reply, Unavailable

_CONFIRM: dict[Reply, str] = {
    "allow": "allowed this once",
    "always": "allowed, and every call matching {ref} for the rest of this run",
    "deny": "denied",
    "deny_all": "denied, and every later question of this run",
}
#: A line read this soon after its question was shown was typed before the question was on screen.
DEFAULT_ANSWER_GUARD_S = 0.4
NO_TERMINAL = "there is no terminal to ask on (standard input or standard error is not a TTY)"


class TerminalApprover:
    """Asks the person at the terminal. One question on screen at a time."""

    name = "terminal"

    def __init__(self, *, timeout_s: float, input_fd: int = 0, output: TextIO | None = None,
                 pause: Callable[[], AbstractContextManager[object]] | None = None,
                 save_rule: Callable[[str, str], str] | None = None,
                 answer_guard_s: float | None = None) -> None:
        """`save_rule(pattern, "project" | "user")` keeps a confirmed `a` pattern in that
        settings file and says where; without it, `a` holds for the run only.
        `answer_guard_s`: a line that arrives this soon after the question was shown was typed
        before it (for the question before, most likely) and does not count."""
        self.timeout_s = timeout_s
        self.save_rule = save_rule
        self.answer_guard_s = answer_guard_s if answer_guard_s is not None else _guard_from_env()
        self.input_fd = input_fd
        self.output = output if output is not None else sys.stderr
        self.pause = pause or nullcontext
        self._one_at_a_time = anyio.Lock()
        self._held: list[str] = []
        self._unanswered = False  # the last question ended without an answer
        self.asking = False
        self.closed = False

    async def __call__(self, call: CapabilityCall) -> Reply | Unavailable:
        from ..approval.question import Unavailable

        async with self._one_at_a_time:
            if self.closed:
                return Unavailable("standard input is closed")
            self.asking = True
            try:
                with self.pause():
                    return await self._ask(call)
            finally:
                self.asking = False
                self._release_held()

    # ------------------------------------------------------------------ other output

    def say(self, line: str) -> None:
        """Write a line to the terminal, or hold it until the open question is answered.

        The caller escapes a program's text with `printable` first (`run` does, for its
        progress lines), or a one-byte CSI in it could hide the next question.
        """
        if self.asking:
            self._held.append(line)
            return
        self._write(line + "\n")

    def _release_held(self) -> None:
        held, self._held = self._held, []
        if held:
            self._write("".join(line + "\n" for line in held))

    def _write(self, text: str) -> None:
        self.output.write(text)
        self.output.flush()

    # ------------------------------------------------------------------ the question

    async def _ask(self, call: CapabilityCall) -> Reply | Unavailable:
        import time

        from ..approval.question import parse_typed_reply

        # Keys typed before the question do not answer it. The question's own prompt must be on
        # screen before an answer counts: when the question before ended unanswered (it timed
        # out, or its run stopped), an answer typed for it may still be on its way, so lines that
        # arrive within a short guard of this question being shown do not count either.
        _discard_typeahead(self.input_fd)
        self._write(question(call, self.timeout_s, self._columns()))
        _drain(self.output)
        shown_at = time.monotonic()
        guard = self.answer_guard_s if self._unanswered else 0.0
        answered = False
        try:
            while True:
                line = await self._read_line()
                if line is None:
                    self.closed = True
                    answered = True
                    self._write("\n  → denied (standard input closed)\n")
                    return "deny"
                if time.monotonic() - shown_at < guard:
                    self._write("  (typed before this question was on screen: it does not count) "
                                "[y/a/n/N] ")
                    continue
                reply = parse_typed_reply(line)
                if reply is None:
                    self._write("  answer y, a, n or N (Enter: no): ")
                    continue
                if reply == "always" and call.always is not None and not await self._confirm_always(call):
                    self._write("  [y/a/n/N] ")
                    continue
                answered = True
                self._write(f"  → {_CONFIRM[reply].format(ref=_always_of(call))}\n")
                return reply
        finally:
            self._unanswered = not answered
            if not answered:  # the approver timeout, or the run stopped
                self._write("\n  → no answer: denied\n")

    async def _confirm_always(self, call: CapabilityCall) -> bool:
        """The person sees the pattern `a` stands for and confirms it (and where it is kept)."""
        assert call.always is not None
        pattern = terminal_safe(call.always)
        choices = "r = this run" + (", p = save in the project's settings, u = save in your user settings"
                                    if self.save_rule is not None else "")
        self._write(f"  always allow {pattern}?\n  {choices}, Enter = back to the question "
                    f"[{'r/p/u' if self.save_rule is not None else 'r'}] ")
        line = await self._read_line()
        answer = (line or "").strip().lower()
        if answer in ("r", "run"):
            return True
        if self.save_rule is not None and answer in ("p", "project", "u", "user"):
            scope = "project" if answer.startswith("p") else "user"
            try:
                where = self.save_rule(call.always, scope)
            except Exception as exc:  # a settings file that cannot be written: say so, keep asking
                self._write(f"  (not saved: {terminal_safe(' '.join(str(exc).split()))})\n")
                return False
            self._write(f"  (saved in {terminal_safe(where)})\n")
            return True
        return False

    def _columns(self) -> int:
        """The terminal's width (80 when it does not say)."""
        try:
            columns = os.get_terminal_size(self.output.fileno()).columns
        except (OSError, ValueError, AttributeError):  # not a terminal, or no descriptor behind it
            return 80
        return columns if columns > 0 else 80

    async def _read_line(self) -> str | None:
        """One line from the terminal (canonical mode hands over whole lines); None at end of input."""
        await anyio.wait_readable(self.input_fd)
        data = os.read(self.input_fd, 4096)
        if not data:
            return None
        return data.decode(errors="replace").split("\n", 1)[0]


def question(call: CapabilityCall, timeout_s: float, columns: int = 80) -> str:
    """The question as shown: the facts, how to skip it next time, the answers.

    Each fact is laid out here, in rows narrower than the terminal's `columns`,
    later rows under the value column: left to the terminal, a long argument
    would wrap where the program chose, and text padded to the edge would start
    a row of its own and read as another fact ("user asked ...").
    """
    ref = terminal_safe(call.ref)  # a ref is a program's text too ("kv.get\n" must not end a row)
    facts = call.facts()
    width = max(len(label) for label, _ in facts)
    indent = " " * (width + 4)
    room = max(columns - len(indent) - 1, 20)
    lines = ["", "fabric-jev: a program asks to use a capability"]
    for label, text in facts:
        first, *rest = wrap_cells(text, room) or [""]
        lines.append(f"  {label:<{width}}  {first}")
        lines += [indent + row for row in rest]
    plain = max(columns - 1, 20)
    hint = (f"(--allow {ref} or --allow {call.risk} allows it without asking; "
            f"fabric-jev settings rules adds a rule)")
    lines += ["  " + row for row in wrap_cells(hint, plain - 2)]
    always = (f"a = always for {terminal_safe(call.always)} in this run (you confirm it next)"
              if call.always is not None else f"a = always for {ref} in this run")
    answers = (f"Allow? y = yes once, {always}, n = no, N = no to every later question of this run "
               f"(Enter or {timeout_s:g} s: no) [y/a/n/N] ")
    lines += wrap_cells(answers, plain)
    return "\n".join(lines)


def wrap_cells(text: str, room: int) -> list[str]:
    """`text` on rows of at most `room` cells, broken after a space where one is near; a word
    longer than a row is cut. Spaces stay at the end of their row, so the rows joined give back
    `text` (nothing is hidden, and a run of spaces cannot start a row of its own)."""
    import re

    from rich.cells import cell_len, chop_cells

    rows: list[str] = []
    row = ""
    used = 0
    for token in re.findall(r"\S+\s*|\s+", text):
        size = cell_len(token)
        if used + size <= room:
            row += token
            used += size
            continue
        bare = token.rstrip(" ")
        if row and used + cell_len(bare) <= room:  # the word fits; its trailing spaces start the next row
            row += bare
            rows.append(row)
            row, used = token[len(bare):], cell_len(token) - cell_len(bare)
            if used > room:
                pieces = chop_cells(row, room)
                rows += pieces[:-1]
                row, used = pieces[-1], cell_len(pieces[-1])
            continue
        if row:
            rows.append(row)
            row, used = "", 0
        pieces = chop_cells(token, room)
        rows += pieces[:-1]
        row, used = pieces[-1], cell_len(pieces[-1])
    if row or not rows:
        rows.append(row)
    return rows


def _always_of(call: CapabilityCall) -> str:
    return terminal_safe(call.always if call.always is not None else call.ref)


def _guard_from_env() -> float:
    """FABRIC_JEV_ANSWER_GUARD_MS (default 400 ms): a slow terminal may need more."""
    raw = os.environ.get("FABRIC_JEV_ANSWER_GUARD_MS", "")
    try:
        return min(max(float(raw), 0.0), 10_000.0) / 1000 if raw else DEFAULT_ANSWER_GUARD_S
    except ValueError:
        return DEFAULT_ANSWER_GUARD_S


def _drain(output: TextIO) -> None:
    """Wait until the terminal has been sent what was written (not a terminal: nothing to wait for)."""
    import termios

    with contextlib.suppress(termios.error, OSError, ValueError, AttributeError):
        termios.tcdrain(output.fileno())


def _discard_typeahead(fd: int) -> None:
    import termios

    with contextlib.suppress(termios.error):  # not a terminal after all: nothing was typed ahead
        termios.tcflush(fd, termios.TCIFLUSH)


class NoTerminal:
    """The approver when there is no terminal: every question is refused, and the audit trail says why."""

    name = "terminal"

    async def __call__(self, call: CapabilityCall) -> Unavailable:
        from ..approval.question import Unavailable

        return Unavailable(NO_TERMINAL)


def terminal_approver(timeout_s: float, *,
                      pause: Callable[[], AbstractContextManager[object]] | None = None,
                      save_rule: Callable[[str, str], str] | None = None,
                      ) -> TerminalApprover | NoTerminal:
    """A prompt when standard input and standard error are both a TTY, else a refusal that says so."""
    if os.isatty(0) and os.isatty(2):
        return TerminalApprover(timeout_s=timeout_s, pause=pause, save_rule=save_rule)
    return NoTerminal()
