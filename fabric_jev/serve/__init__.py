"""`fabric-jev serve`: a Jev-compatible HTTP server, on 127.0.0.1 unless told otherwise.

Answers ``POST /v1/systemone`` and ``GET /v1/models`` with TypeSafe's System
One shapes, so any TypeSafe SDK client can talk to the local evaluator, a
fixture, a cassette or a route. An ASGI app (asgi.py) around the request
logic (handler.py), served by uvicorn with the limits of limits.py
(server.py). uvicorn is imported only when serving starts.

With ``FABRIC_JEV_SERVE_KEY`` set, requests must carry ``Authorization:
Bearer <that key>``; without it, authentication is off and any Authorization
header is ignored. The key is read from the environment, never from argv.
Beyond loopback (``--host``), a key from ``--token-file`` is required
(_bearer.py); per-client limits are in clients.py.
"""

from __future__ import annotations

import os
import sys

from .handler import MODELS, JevServer
from .limits import ServeLimits
from .server import ListenError, listen, serve

__all__ = ["MODELS", "JevServer", "ListenError", "ServeLimits", "announce", "listen", "serve",
           "serve_key_from_env"]


def serve_key_from_env() -> str | None:
    key = os.environ.get("FABRIC_JEV_SERVE_KEY", "").strip()
    return key or None


def announce(port: int, host: str = "127.0.0.1", scheme: str = "http") -> None:
    host = f"[{host.strip('[]')}]" if ":" in host else host
    sys.stdout.write(f"{scheme}://{host}:{port}\n")
    sys.stdout.flush()
