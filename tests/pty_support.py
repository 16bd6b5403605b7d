"""A command whose standard input and standard error are a real pseudo-terminal.

Standard output stays a pipe (the envelope). The test reads the terminal as a
person would see it and types answers into it. Reads wait on the terminal's
file descriptor; the bound on a read only turns a hang into a clear failure.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import termios
import time
from pathlib import Path
from types import TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: Longer than any wait a correct run needs; reached only when something is broken.
READ_BOUND_S = 45.0


class Terminal:
    def __init__(self, args: list[str], *, env: dict[str, str], cwd: Path = ROOT,
                 columns: int = 160, rows: int = 50) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.master = master
        self.proc = subprocess.Popen(args, stdin=slave, stdout=subprocess.PIPE, stderr=slave, cwd=cwd,
                                     env={"TERM": "xterm", "COLUMNS": str(columns), "LINES": str(rows), **env},
                                     start_new_session=True)
        os.close(slave)
        self.screen = ""
        self._seen = 0  # how much of `screen` earlier `expect` calls consumed
        self._ended = False

    def _read(self, bound: float) -> bool:
        """Append what the terminal shows next; False once the command closed it."""
        ready, _, _ = select.select([self.master], [], [], bound)
        if not ready:
            raise AssertionError(f"the terminal showed nothing new for {bound:g} s; so far:\n{self.screen}")
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every process holding the terminal closed it
            data = b""
        if not data:
            self._ended = True
            return False
        self.screen += data.decode(errors="replace")
        return True

    def expect(self, text: str) -> str:
        """Wait until `text` appears after what earlier calls consumed; returns the screen up to its end."""
        deadline = time.monotonic() + READ_BOUND_S
        while (at := self.screen.find(text, self._seen)) < 0:
            if self._ended or not self._read(max(0.0, deadline - time.monotonic())):
                raise AssertionError(f"{text!r} never appeared; the terminal showed:\n{self.screen}")
        start, self._seen = self._seen, at + len(text)
        return self.screen[start:self._seen]

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def finish(self) -> tuple[int, Any, str]:
        """(exit code, the envelope on standard output, everything the terminal showed)."""
        deadline = time.monotonic() + READ_BOUND_S
        while not self._ended and self._read(max(0.0, deadline - time.monotonic())):
            pass
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        code = self.proc.wait(timeout=READ_BOUND_S)
        return code, json.loads(out) if out.strip() else None, self.screen

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        os.close(self.master)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
