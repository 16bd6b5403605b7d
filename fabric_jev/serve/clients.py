"""Per-client limits of `fabric-jev serve`: one client cannot take every place.

A client is the token it sends when the server has tokens (one per `--token-file`), else its
peer address. Past `per_client` requests in flight, a client's next request is answered 429
with `Retry-After` at once, before its body is read, while the others go on being served. A
request whose token matches none is passed on: the app answers it 401 without reading its body.

The counts live in one process: with `--workers N`, each worker counts its own connections.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .._bearer import authorization_of, bearer_matches
from .asgi import JevApp, Receive, Scope, Send
from .handler import error

#: Seconds a refused client is told to wait: requests of a fast evaluator end within it.
RETRY_AFTER_S = 1


def client_of(scope: Scope, keys: Sequence[str]) -> str | None:
    """Who sent the request of `scope`: `token:I` (the I-th key, never the key itself), or
    `peer:ADDRESS` without keys; None for a request that carries none of the keys."""
    if keys:
        authorization = authorization_of(scope.get("headers", ()))
        # Every key is compared, so the time does not tell which matched.
        matches = [bearer_matches(authorization, key) for key in keys]
        return f"token:{matches.index(True)}" if True in matches else None
    peer = scope.get("client")
    return f"peer:{peer[0]}" if peer else "peer:unknown"


class ClientLimits:
    """ASGI middleware: at most `per_client` requests in flight per client."""

    def __init__(self, app: JevApp, per_client: int, keys: Sequence[str] = ()) -> None:
        if per_client < 1:
            raise ValueError("per_client must be at least 1")
        self.app, self.per_client, self.keys = app, per_client, tuple(keys)
        self.in_flight: dict[str, int] = {}
        #: Requests refused 429 since the start, per client (what a test or an operator reads).
        self.refused: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        who = client_of(scope, self.keys) if scope["type"] == "http" else None
        if who is None:
            await self.app(scope, receive, send)
            return
        count = self.in_flight.get(who, 0)
        if count >= self.per_client:
            self.refused[who] = self.refused.get(who, 0) + 1
            await _too_many(send, self.per_client)
            return
        self.in_flight[who] = count + 1
        try:
            await self.app(scope, receive, send)
        finally:
            left = self.in_flight[who] - 1
            if left:
                self.in_flight[who] = left
            else:
                del self.in_flight[who]


async def _too_many(send: Send, limit: int) -> None:
    raw = json.dumps(error(429, "rate_limit_error",
                           f"More than {limit} requests in flight from this client; retry after "
                           f"{RETRY_AFTER_S} s")[1]).encode()
    # The body is not read: the connection cannot be reused.
    await send({"type": "http.response.start", "status": 429, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()),
        (b"retry-after", str(RETRY_AFTER_S).encode()), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": raw, "more_body": False})
