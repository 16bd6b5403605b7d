"""Real HTTP servers on loopback for evaluator tests.

`mock(...)` runs the jevcompat reference server (with its fault modes).
`Front` is a recording relay in front of it: it records every request as
received (path, headers, body), can rewrite the model so route-specific ids
reach the mock, and can answer on its own (redirect, stall, huge or failing
body) to exercise what the mock cannot.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from jevcompat.mock import MockConfig, make_server

POLL = 0.01  # serve_forever's shutdown latency; the default 0.5 s adds up over a suite


@contextmanager
def serving(server: Any) -> Iterator[int]:
    """Run a socketserver-style `server` in a daemon thread; yields its port; stops and closes it after."""
    thread = threading.Thread(target=server.serve_forever, args=(POLL,), daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextmanager
def mock(*faults: str, key: str | None = None, busy_every: int = 0) -> Iterator[str]:
    with serving(make_server(MockConfig(key=key, faults=frozenset(faults), busy_every=busy_every))) as port:
        yield f"http://127.0.0.1:{port}"


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Front:
    upstream: str | None = None
    #: answer(recorded) -> (status, headers, body) to answer without the upstream
    answer: Callable[[Recorded], tuple[int, dict[str, str], bytes]] | None = None
    #: rewrite(json_body) -> json_body for the mock (e.g. map route model ids back)
    rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    #: tamper(json_response) -> json_response before it is returned
    tamper: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    #: compress the upstream's 200 body with these codings, in order (Content-Encoding says so)
    encoding: tuple[str, ...] = ()
    requests: list[Recorded] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    #: set once a request has been recorded, so a test can wait for it instead of polling
    arrived: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def stall(self) -> Front:
        """Answer nothing until the server shuts down (for timeout and cancellation tests)."""
        def stalled(rec: Recorded) -> tuple[int, dict[str, str], bytes]:
            self.release.wait(10)
            return 500, {}, b""

        self.answer = stalled
        return self


@contextmanager
def front(spec: Front) -> Iterator[Front]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            rec = Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()},
                           self.rfile.read(length))
            spec.requests.append(rec)
            spec.arrived.set()
            if spec.answer is not None:
                status, headers, body = spec.answer(rec)
            else:
                assert spec.upstream is not None
                payload = json.loads(rec.body)
                if spec.rewrite is not None:
                    payload = spec.rewrite(payload)
                resp = httpx.post(spec.upstream + "/v1/systemone", json=payload,
                                  headers={"Authorization": rec.headers.get("authorization", "")})
                status, body = resp.status_code, resp.content
                headers = {"Content-Type": resp.headers.get("content-type", "application/json")}
                if spec.tamper is not None and status == 200:
                    body = json.dumps(spec.tamper(json.loads(body))).encode()
                if spec.encoding and status == 200:
                    from tests.body_bombs import encode, header

                    body = encode(body, spec.encoding)
                    headers["Content-Encoding"] = header(spec.encoding)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            # A client that gave up (timeout, cancel) closes its end before a stalled answer
            # is written: expected in these tests, so no traceback on stderr for it.
            if not isinstance(sys.exc_info()[1], ConnectionError):
                super().handle_error(request, client_address)

    with serving(Server(("127.0.0.1", 0), Handler)) as port:
        spec.url = f"http://127.0.0.1:{port}"
        try:
            yield spec
        finally:
            spec.release.set()  # before the server stops: a stalled handler would hold shutdown
