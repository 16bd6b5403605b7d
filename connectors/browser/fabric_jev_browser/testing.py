"""What the page fixtures (`pytest_plugin.py`) are made of.

- `session_browser`: one headless Chromium for a whole test session, started by
  `fabric-jev browser launch` in its own process. It is synchronous, so it can
  be a session-scoped fixture whatever event loop each test runs on; the
  launcher process drains Chromium's output and kills its process group when
  it is told to stop, or when the test process dies.
- `open_page`: a fresh page (its own CDP connection) on that browser.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from .cdp import CDPConnection
from .errors import LaunchError
from .page import Page


@dataclass(frozen=True)
class SessionBrowser:
    ws_url: str
    #: the launcher process (Chromium runs in its own process group below it)
    pid: int


def _terminate_with_parent() -> None:
    """Between fork and exec: the launcher gets SIGTERM (and cleans up) if the test
    process is killed, so no browser outlives the run."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


@contextlib.contextmanager
def session_browser(*, width: int = 1280, height: int = 800) -> Iterator[SessionBrowser]:
    """Start Chromium through `fabric-jev browser launch`; stop it (and wait) on exit."""
    argv = [sys.executable, "-m", "fabric_jev.cli", "browser", "launch",
            "--width", str(width), "--height", str(height)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=_terminate_with_parent if sys.platform == "linux" else None)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        url = proc.stdout.readline().strip()
        if not url.startswith("ws://127.0.0.1:"):
            proc.kill()
            _, err = proc.communicate(timeout=30)
            raise LaunchError("Chromium did not start: " + (err.strip().splitlines() or ["no output"])[-1])
        yield SessionBrowser(url, proc.pid)
    finally:
        if proc.poll() is None:
            proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=30)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@contextlib.asynccontextmanager
async def open_page(ws_url: str, *, width: int = 1280, height: int = 800) -> AsyncIterator[Page]:
    """A new page with its own CDP connection; closed (and the connection with it) on exit."""
    cdp = await CDPConnection.connect(ws_url)
    try:
        page = await Page.open(cdp, width=width, height=height)
        try:
            yield page
        finally:
            if not cdp.closed:
                await page.close()
    finally:
        await cdp.aclose()


__all__ = ["SessionBrowser", "open_page", "session_browser"]
