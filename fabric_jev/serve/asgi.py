"""The ASGI application around `JevServer`: bounded body reading and a JSON
answer for everything, an unexpected exception included.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .._bearer import authorization_of
from .handler import JevServer, Response, error

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

log = logging.getLogger("fabric_jev.serve")


class JevApp:
    """ASGI 3 application serving one `JevServer`."""

    def __init__(self, server: JevServer) -> None:
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is off; nothing else is served
        close = False
        try:
            answer = await self._answer(scope, receive)
            if answer is None:
                return
            (status, payload), close = answer
            raw = _encode(payload)
        except Exception as exc:  # any bug inside one request must not end the server
            # The type only: an exception's text could carry request content or a key.
            log.error("fabric-jev serve: internal error in %s %s (%s)", scope.get("method"),
                      scope.get("path"), type(exc).__name__)
            status, raw = 500, _encode(error(500, "internal_error", "Internal error; the server keeps serving")[1])
        await _send_json(send, status, raw, close=close)

    async def _answer(self, scope: Scope, receive: Receive) -> tuple[Response, bool] | None:
        limits = self.server.limits
        if _head_bytes(scope) > limits.max_header_bytes:
            # h11 bounds headers that arrive in pieces; one read can bring a whole larger block.
            return error(400, "request_header_too_large",
                         f"Request line and headers exceed {limits.max_header_bytes} bytes"), True
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self.server.keys and "authorization" in headers:
            # One credential or none: with two headers, the dict keeps the last, the per-client
            # limit would read another (_bearer.authorization_of).
            authorization = authorization_of(scope["headers"])
            if authorization is None:
                del headers["authorization"]
        query = scope.get("query_string", b"").decode("latin-1")
        path = scope["path"] + (f"?{query}" if query else "")
        refused = self.server.refusal(scope["method"], path, headers)
        if refused is not None:
            return refused, True  # the body is not read: the connection cannot be reused
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limits.max_body_bytes:
            return _too_large(limits.max_body_bytes), True
        body = bytearray()
        try:
            # asyncio's own timeout (serve runs on asyncio): an anyio cancel scope costs several
            # times more, on every request.
            async with asyncio.timeout(limits.body_timeout_s):
                more = True
                while more:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None
                    body += message.get("body", b"")
                    if len(body) > limits.max_body_bytes:
                        return _too_large(limits.max_body_bytes), True
                    more = bool(message.get("more_body", False))
        except TimeoutError:
            return error(408, "request_timeout",
                         f"Request body not received within {limits.body_timeout_s:g} s"), True
        return await self.server.handle(scope["method"], path, headers, bytes(body), admitted=True), False


def _head_bytes(scope: Scope) -> int:
    """The size of the request line and headers as sent (`NAME: value` lines, CRLF ends)."""
    query = scope.get("query_string", b"")
    line = (len(scope["method"]) + len(scope.get("raw_path") or scope["path"].encode())
            + (1 + len(query) if query else 0) + len(" HTTP/1.1\r\n") + 1)
    return line + sum(len(k) + len(v) + 4 for k, v in scope["headers"]) + 2


def _too_large(limit: int) -> Response:
    return error(413, "request_too_large", f"Request body exceeds {limit} bytes")


#: Made once: `json.dumps` with a keyword builds a new encoder per call. No check for cycles: every
#: payload is a tree built here from parsed JSON and checked values.
_ENCODER = json.JSONEncoder(allow_nan=False, check_circular=False)


def _encode(payload: dict[str, Any]) -> bytes:
    # ASCII escapes (the encoder's default): a lone surrogate echoed from a request stays valid JSON.
    return _ENCODER.encode(payload).encode("ascii")


_JSON_TYPE = (b"content-type", b"application/json")


async def _send_json(send: Send, status: int, raw: bytes, *, close: bool) -> None:
    headers = [_JSON_TYPE, (b"content-length", b"%d" % len(raw))]
    if close:  # the rest of the request is not read: the connection cannot be reused
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": raw, "more_body": False})
