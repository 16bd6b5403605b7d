"""Standard input for the MCP SDK, read in lines of bounded length.

The SDK's stdio transport reads a whole line before parsing it, however long,
and its parser holds several copies: a 100 MB line took a gigabyte, and a
larger one ended the server with MemoryError, every run with it. Here a line
longer than MAX_LINE_BYTES is read to its end in pieces and replaced by its
first bytes plus a marker that no JSON text contains, so the SDK refuses it
and the refusal is answered (unreadable.py) with the request's id, when it
is among those first bytes, and "Parse error: the message is longer than …".
A line within that length but holding more than MAX_LINE_VALUES JSON values
(16 MiB of `[],` is 5.6 million lists, a gigabyte once parsed) is cut the
same way before anything parses it, counted by bytes (`_json.values_at_most`).

Standard input is claimed as the SDK claims it when it reads it itself: the
wire is read from a private duplicate and fd 0 points at the null device
while serving, so a child process cannot read the client's messages.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from typing import BinaryIO, TextIO, cast

from .._json import values_at_most

#: The longest message read: inline programs and evaluation states are at most 1 MiB each.
MAX_LINE_BYTES = 16 * 1024 * 1024
#: What is kept of a longer line: enough for the id and the method, which clients send first.
HEAD_BYTES = 4096
#: Ends a cut line: a NUL character is invalid anywhere in a JSON text.
CUT_MARK = "\x00fabric-jev: cut\x00"
#: The most JSON values one message may hold. The largest real one is a jev_evaluate request
#: (at most 100,000 nodes); parsing is what costs memory (each value a Python object, several
#: copies in the SDK), so a line holding more is refused before it is parsed.
MAX_LINE_VALUES = 250_000
#: Ends a line cut because it holds too many values.
CROWDED_MARK = "\x00fabric-jev: crowded\x00"


class BoundedLines:
    """Lines of a binary stream as text (UTF-8, bad bytes replaced, as the SDK reads them), each
    at most `limit` bytes; a longer one becomes its head and CUT_MARK. Only `readline`, which
    is all the SDK's reader (anyio's AsyncFile iteration) calls."""

    def __init__(self, raw: BinaryIO, limit: int = MAX_LINE_BYTES) -> None:
        self._raw, self.limit = raw, limit

    def readline(self) -> str:
        line = self._raw.readline(self.limit + 1)
        if len(line) <= self.limit or line.endswith(b"\n"):
            if values_at_most(line, MAX_LINE_VALUES) > MAX_LINE_VALUES:
                return line[:HEAD_BYTES].decode("utf-8", errors="replace") + CROWDED_MARK + "\n"
            return line.decode("utf-8", errors="replace")
        head = line[:HEAD_BYTES]
        while line and not line.endswith(b"\n"):
            line = self._raw.readline(65_536)  # the rest, in pieces, never held
        return head.decode("utf-8", errors="replace") + CUT_MARK + "\n"


@contextlib.contextmanager
def claimed_stdin() -> Iterator[TextIO]:
    """Standard input's wire as BoundedLines, with fd 0 on the null device until the end."""
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        # Never closed: the SDK's reading thread may still wait on it after serving ends, and a
        # number closed under it could be reused by another file.
        yield cast(TextIO, BoundedLines(os.fdopen(private, "rb", closefd=False)))
    finally:
        os.dup2(private, 0)
