"""A real headless Chromium (the pytest plugin's session browser) and local pages on 127.0.0.1."""

from __future__ import annotations

import ctypes
import signal
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fabric_jev_browser.testing import SessionBrowser

from tests.upstream import serving

#: The session's Chromium: the plugin's `jev_browser` (`ws_url`, `pid`).
Launched = SessionBrowser


def terminate_with_parent() -> None:
    """Between fork and exec: the launcher gets SIGTERM (and cleans up) if the test run
    is killed, instead of leaving a browser behind for the rest of the machine's life."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG


@pytest.fixture(scope="session")
def chromium(jev_browser: SessionBrowser) -> SessionBrowser:
    """One headless Chromium for the whole session, shared with the plugin's `jev_page`."""
    return jev_browser


@dataclass
class Pages:
    """Serves registered HTML on 127.0.0.1; `add(path, html)` gives the full address.

    `hold(path)` makes requests for that path wait until the returned event is set
    (a frame that is navigating for as long as a test wants)."""

    base: str = ""
    port: int = 0
    content: dict[str, str] = field(default_factory=dict)
    holds: dict[str, threading.Event] = field(default_factory=dict)

    def add(self, path: str, html: str) -> str:
        self.content[path] = html
        return self.base + path

    def hold(self, path: str) -> threading.Event:
        event = self.holds[path] = threading.Event()
        return event


@pytest.fixture(scope="session")
def pages() -> Iterator[Pages]:
    yield from _serve()


@pytest.fixture(scope="session")
def other_pages() -> Iterator[Pages]:
    """A second origin on another loopback port (cross-origin frames)."""
    yield from _serve()


def _serve() -> Iterator[Pages]:
    store = Pages()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            held = store.holds.get(self.path.split("?")[0])
            if held is not None:
                held.wait(30)
            body = store.content.get(self.path.split("?")[0])
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
            raw = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with serving(server) as port:
        store.port = port
        store.base = f"http://127.0.0.1:{port}"
        yield store


@pytest.fixture
async def cdp(chromium: Launched) -> AsyncIterator[Any]:
    from fabric_jev_browser import CDPConnection

    conn = await CDPConnection.connect(chromium.ws_url)
    try:
        yield conn
    finally:
        await conn.aclose()


@pytest.fixture
async def page(cdp: Any) -> AsyncIterator[Any]:
    from fabric_jev_browser import Page

    p = await Page.open(cdp)
    try:
        yield p
    finally:
        await p.close()
