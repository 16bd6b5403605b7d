"""`fabric-jev serve`: a Jev-compatible HTTP server on 127.0.0.1.

Answers ``POST /v1/systemone`` with the same request and response shapes as
TypeSafe's System One, and the same error bodies (422 with ``detail[]`` for
validation, ``detail.error_type`` / ``detail.message`` otherwise), so any
TypeSafe SDK client can talk to the local evaluator, a fixture, a cassette or
a route. HTTP/1.1 with keep-alive, on h11 and anyio.

With ``FABRIC_JEV_SERVE_KEY`` set, requests must carry ``Authorization:
Bearer <that key>``; without it, authentication is off and any Authorization
header is ignored. The key is read from the environment, never from argv.
"""

from __future__ import annotations

import hmac
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import h11

from .contract.evaluation import validate_request
from .errors import EvaluationError, RequestInvalid, UpstreamError
from .evaluators.base import Evaluator

MAX_BODY = 4 * 1024 * 1024
MODELS = ("jev-latest", "jev-1.13", "jev-1.13.0", "jev-preview")
REQUEST_TIMEOUT_S = 60.0


def _error(status: int, error_type: str, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"detail": {"error_type": error_type, "message": message}}


class JevServer:
    """The request logic, separate from sockets so it reads as a function of bytes."""

    def __init__(self, evaluator: Evaluator, *, key: str | None = None) -> None:
        self.evaluator = evaluator
        self.key = key

    def _auth(self, headers: dict[str, str]) -> tuple[int, dict[str, Any]] | None:
        if self.key is None:
            return None
        given = headers.get("authorization", "")
        if not given.startswith("Bearer ") or not given[7:]:
            return _error(401, "authentication_error", "Missing API key: send Authorization: Bearer <key>")
        if not hmac.compare_digest(given[7:].encode(), self.key.encode()):
            return _error(401, "authentication_error", "Invalid API key")
        return None

    async def handle(self, method: str, path: str, headers: dict[str, str],
                     body: bytes) -> tuple[int, dict[str, Any]]:
        path = path.split("?", 1)[0]
        if method == "GET" and path == "/v1/models":
            denied = self._auth(headers)
            if denied:
                return denied
            model = self.evaluator.status().get("model", "")
            return 200, {"models": [{"name": m, "description": f"served by fabric-jev ({model})",
                                     "release_date": "2026-11-29"} for m in MODELS]}
        if path != "/v1/systemone":
            return _error(404, "not_found", f"No route {path}")
        if method != "POST":
            return _error(405, "method_not_allowed", "Use POST /v1/systemone")
        denied = self._auth(headers)
        if denied:
            return denied
        try:
            raw = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return 422, {"detail": [{"loc": ["body"], "msg": "JSON decode error", "type": "json_invalid"}]}
        if not isinstance(raw, dict) or "model" not in raw:
            return 422, {"detail": [{"loc": ["body", "model"], "msg": "Field required", "type": "missing"}]}
        try:
            request = validate_request(raw, max_bytes=MAX_BODY, wire=True)
        except RequestInvalid as exc:
            return 422, {"detail": [{"loc": ["body"], "msg": str(exc), "type": "value_error"}]}
        if request.model not in MODELS:
            return _error(400, "api_usage_error", f"Unknown model: {request.model}")
        # The served evaluator answers with its own model; the requested alias is only checked.
        request = type(request)(state=request.state, questions=request.questions, model=None)
        try:
            evaluation = await self.evaluator.evaluate(request, timeout=REQUEST_TIMEOUT_S)
        except UpstreamError as exc:
            status = 429 if exc.status in (429, 529) else 502
            return _error(status, "upstream_error", str(exc))
        except EvaluationError as exc:
            return _error(502, "evaluator_error", str(exc))
        out = evaluation.to_json()
        out["x_evaluator"] = self.evaluator.status().get("route", "")
        return 200, out


async def _serve_connection(server: JevServer, stream: anyio.abc.ByteStream) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
    async with stream:
        while True:
            try:
                request, body = await _read_request(conn, stream)
            except (h11.RemoteProtocolError, _TooLarge) as exc:
                status = 413 if isinstance(exc, _TooLarge) else 400
                await _respond(conn, stream, *_error(status, "bad_request", "Malformed request"),
                               close=True)
                return
            if request is None:
                return
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.headers}
            status, payload = await server.handle(request.method.decode(), request.target.decode(),
                                                  headers, body)
            await _respond(conn, stream, status, payload, close=False)
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                return
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                return


class _TooLarge(Exception):
    pass


async def _read_request(conn: h11.Connection,
                        stream: anyio.abc.ByteStream) -> tuple[h11.Request | None, bytes]:
    request: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive(65536)
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                data = b""
            conn.receive_data(data)
            if not data and request is None:
                return None, b""
            continue
        if isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > MAX_BODY:
                raise _TooLarge
        elif isinstance(event, h11.EndOfMessage):
            return request, bytes(body)
        elif isinstance(event, h11.ConnectionClosed):
            return None, b""


async def _respond(conn: h11.Connection, stream: anyio.abc.ByteStream, status: int,
                   payload: dict[str, Any], *, close: bool) -> None:
    raw = json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8")
    headers = [("content-type", "application/json"), ("content-length", str(len(raw)))]
    if close:
        headers.append(("connection", "close"))
    try:
        await stream.send(conn.send(h11.Response(status_code=status, headers=headers)) or b"")
        await stream.send(conn.send(h11.Data(data=raw)) or b"")
        await stream.send(conn.send(h11.EndOfMessage()) or b"")
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, h11.LocalProtocolError):
        return


async def serve(evaluator: Evaluator, *, port: int = 0, key: str | None = None,
                ready: Callable[[int], None] | None = None) -> None:
    """Serve until cancelled. `ready(port)` is called once the socket listens."""
    server = JevServer(evaluator, key=key)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
    async with listener:
        bound = listener.extra(anyio.abc.SocketAttribute.local_port)
        if ready is not None:
            ready(bound)

        async def handler(stream: anyio.abc.SocketStream) -> None:
            await _serve_connection(server, stream)

        await listener.serve(handler)


def serve_key_from_env() -> str | None:
    key = os.environ.get("FABRIC_JEV_SERVE_KEY", "").strip()
    return key or None


def announce(port: int) -> None:
    sys.stdout.write(f"http://127.0.0.1:{port}\n")
    sys.stdout.flush()
