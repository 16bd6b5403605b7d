"""The real llama.cpp server for the tests marked `llm`: one per session, killed at its end.

llama.cpp's server (the prebuilt xllamacpp wheel) with SmolLM2-135M-Instruct (./scripts/setup-llm
installs both; fabric_jev/benchmarks/llama_server.py starts it, through the `gguf:` route's runner). A test that uses the `llama` fixture is
marked `llm` by conftest, so `pytest -m "not llm"` leaves them all out, server included.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from fabric_jev.benchmarks.llama_server import (
    LlamaServer,
    LlamaServerMissing,
    llama_server,
    locate_model,
    locate_server,
)
from tests.upstream import serving


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama.cpp's server on 127.0.0.1 with one slot (its prompt cache is the one a request reuses)."""
    try:
        locate_server()
        locate_model()
    except LlamaServerMissing as exc:
        pytest.fail(f"{exc} (or leave these tests out: -m 'not llm')", pytrace=False)
    log = tmp_path_factory.mktemp("llama") / "llama-server.log"
    with llama_server(log, slots=1, context=4096) as server:
        yield server


@dataclass
class Exchange:
    path: str
    request: dict[str, Any]
    response: dict[str, Any]


@contextmanager
def relay(target: str) -> Iterator[tuple[str, list[Exchange]]]:
    """A loopback relay in front of `target` (the llama.cpp server's URL) that records every JSON
    exchange as sent and as answered: yields (its base URL, the exchanges). It sees exactly what
    a route sends, without knowing how the route builds it."""
    exchanges: list[Exchange] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            resp = httpx.post(target + self.path, content=body, timeout=120,
                              headers={"Content-Type": "application/json"})
            exchanges.append(Exchange(self.path, json.loads(body), resp.json()))
            self.send_response(resp.status_code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(resp.content)))
            self.end_headers()
            self.wfile.write(resp.content)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

    with serving(Server(("127.0.0.1", 0), Handler)) as port:
        yield f"http://127.0.0.1:{port}/v1", exchanges
