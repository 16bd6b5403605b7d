"""The terminal approver: an `ask` shown on standard error, answered by one line on standard input.

Deno's convention: a prompt on a TTY, a denial without one. The question shows
the facts every approver gets (`CapabilityCall.facts`); the answer is `y` (yes,
this once), `a` (always for this ref in this run), `n` (no) or `N` (no to every
later question of the run). Enter alone denies, and so does the approver
timeout (`approverTimeoutMs`). An unrecognised answer asks again.

Before each question, input typed ahead is discarded (as Deno does): a key
pressed before the question was on screen must not answer it. Whatever else
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

from ..contract.terminal import terminal_safe

if TYPE_CHECKING:  # loaded by whoever asks: a run that asks nothing never loads it
    from ..contract.asking import CapabilityCall, Reply, Unavailable

_CONFIRM: dict[Reply, str] = {
    "allow": "allowed this once",
    "always": "allowed, and {ref} for the rest of this run",
    "deny": "denied",
    "deny_all": "denied, and every later question of this run",
}
NO_TERMINAL = "there is no terminal to ask on (standard input or standard error is not a TTY)"


class TerminalApprover:
    """Asks the person at the terminal. One question on screen at a time."""

    name = "terminal"

    def __init__(self, *, timeout_s: float, input_fd: int = 0, output: TextIO | None = None,
                 pause: Callable[[], AbstractContextManager[object]] | None = None) -> None:
        self.timeout_s = timeout_s
        self.input_fd = input_fd
        self.output = output if output is not None else sys.stderr
        self.pause = pause or nullcontext
        self._one_at_a_time = anyio.Lock()
        self._held: list[str] = []
        self.asking = False
        self.closed = False

    async def __call__(self, call: CapabilityCall) -> Reply | Unavailable:
        from ..contract.asking import Unavailable

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
        from ..contract.asking import parse_typed_reply

        _discard_typeahead(self.input_fd)
        self._write(question(call, self.timeout_s, self._columns()))
        answered = False
        try:
            while True:
                line = await self._read_line()
                if line is None:
                    self.closed = True
                    answered = True
                    self._write("\n  → denied (standard input closed)\n")
                    return "deny"
                reply = parse_typed_reply(line)
                if reply is None:
                    self._write("  answer y, a, n or N (Enter: no): ")
                    continue
                answered = True
                self._write(f"  → {_CONFIRM[reply].format(ref=terminal_safe(call.ref))}\n")
                return reply
        finally:
            if not answered:  # the approver timeout, or the run stopped
                self._write("\n  → no answer: denied\n")

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
    from rich.cells import chop_cells

    ref = terminal_safe(call.ref)  # a ref is a program's text too ("kv.get\n" must not end a row)
    facts = call.facts()
    width = max(len(label) for label, _ in facts)
    indent = " " * (width + 4)
    room = max(columns - len(indent) - 1, 20)
    lines = ["", "fabric-jev: a program asks to use a capability"]
    for label, text in facts:
        first, *rest = chop_cells(text, room) or [""]
        lines.append(f"  {label:<{width}}  {first}")
        lines += [indent + row for row in rest]
    lines.append(f"  (--allow {ref} or --allow {call.risk} allows it without asking)")
    lines.append(f"Allow? y = yes once, a = always for {ref} in this run, n = no, "
                 f"N = no to every later question of this run (Enter or {timeout_s:g} s: no) [y/a/n/N] ")
    return "\n".join(lines)


def _discard_typeahead(fd: int) -> None:
    import termios

    with contextlib.suppress(termios.error):  # not a terminal after all: nothing was typed ahead
        termios.tcflush(fd, termios.TCIFLUSH)


class NoTerminal:
    """The approver when there is no terminal: every question is refused, and the audit trail says why."""

    name = "terminal"

    async def __call__(self, call: CapabilityCall) -> Unavailable:
        from ..contract.asking import Unavailable

        return Unavailable(NO_TERMINAL)


def terminal_approver(timeout_s: float, *,
                      pause: Callable[[], AbstractContextManager[object]] | None = None,
                      ) -> TerminalApprover | NoTerminal:
    """A prompt when standard input and standard error are both a TTY, else a refusal that says so."""
    if os.isatty(0) and os.isatty(2):
        return TerminalApprover(timeout_s=timeout_s, pause=pause)
    return NoTerminal()
