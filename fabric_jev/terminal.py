"""The one terminal-safe renderer: text from a program, a file name or a compiler, made fit for a terminal.

Pure code. Everything fabric-jev prints to a person's terminal that it did not
write itself passes here: progress lines, launch errors, compiler
diagnostics, program and file names, the approval question. A terminal acts
on what it is sent: ESC and the one-byte C1 introducers start sequences that
set the clipboard (OSC 52), clear the screen (CSI 2J) or move the cursor; a
bidirectional override turns the text after it around; a newline or text
padded to the terminal's edge starts a row that reads as a line fabric-jev
wrote (a forged question). So:

- `terminal_safe` escapes every character Python calls unprintable (controls,
  format characters, separators other than the space, unassigned code
  points) as ``\\uXXXX``; a newline too, so one value stays one line;
- `one_line` also folds runs of whitespace into one space (a message made
  of several lines reads as one);
- `fit_row` cuts a line to one row of a terminal `columns` cells wide, so
  nothing a program wrote can wrap into a row of its own.
"""

from __future__ import annotations

__all__ = ["fit_row", "one_line", "terminal_safe"]


def terminal_safe(text: str) -> str:
    """`text` with every unprintable character escaped as ``\\uXXXX`` (``\\UXXXXXXXX`` past U+FFFF).

    JSON already escapes C0 controls; this also catches ESC in raw text, DEL,
    the C1 controls (U+009B is a one-byte CSI on many terminals), line and
    paragraph separators and bidirectional overrides (U+202E).
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def one_line(text: str, empty: str = "") -> str:
    """`text` on one terminal-safe line: whitespace runs (newlines included) become one space."""
    return terminal_safe(" ".join(text.split())) or empty


def fit_row(text: str, columns: int) -> str:
    """`text` (already terminal-safe, one line) cut to fit one row of `columns` cells, with "…" at the cut.

    Wide characters count two cells (rich's cell widths). A row one cell short of
    the terminal's width never wraps, whatever the terminal does at its last column.
    """
    room = max(columns - 1, 8)
    if len(text) <= room // 2:  # no character is wider than two cells: it fits
        return text
    from rich.cells import cell_len, set_cell_size

    if cell_len(text) <= room:
        return text
    return set_cell_size(text, room - 1).rstrip() + "…"


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
