"""`serve()`: the ASGI app on uvicorn, with the limits uvicorn lacks added to its
HTTP/1.1 protocol: a connection cap and a header timeout that a client
trickling one byte at a time cannot reset (uvicorn only times out idle
kept-alive connections). Accept failures (out of file descriptors) are left
to asyncio, which pauses accepting for a second and goes on.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import math
import socket
import time
from collections.abc import Callable
from typing import Any

import anyio

from ..evaluators.base import Evaluator
from .asgi import JevApp
from .handler import JevServer
from .limits import ServeLimits

HOST = "127.0.0.1"
#: Pending connections the kernel holds; asyncio also accepts at most this many per wake-up.
_BACKLOG = 128
log = logging.getLogger("fabric_jev.serve")


class ListenError(OSError):
    """The port cannot be listened on (busy, out of range, not permitted)."""


def _busy_response(limits: ServeLimits) -> bytes:
    body = (b'{"detail": {"error_type": "overloaded", "message": "More than '
            + str(limits.max_connections).encode() + b' open connections; retry later"}}')
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)


def _protocol_for(limits: ServeLimits) -> type[Any]:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    busy = _busy_response(limits)

    class GuardedH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                transport.write(busy)
                transport.close()
                return
            self._guard_headers()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._guard_headers()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._guard_headers()  # pipelined bytes may have started the next request

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_header_timer()
            super().connection_lost(exc)

        def _guard_headers(self) -> None:
            """Time the headers from their first byte (or the connection) to their end, once."""
            # Between requests uvicorn's keep-alive timer runs; its first byte stops that timer.
            reading_headers = (self.conn.their_state is h11.IDLE and self.timeout_keep_alive_task is None
                               and not self.transport.is_closing())
            if reading_headers and self._header_timer is None:
                self._header_timer = self.loop.call_later(limits.header_timeout_s, self._headers_too_slow)
            elif not reading_headers:
                self._stop_header_timer()

        def _stop_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                self.transport.close()

    return GuardedH11Protocol


def listen(port: int) -> socket.socket:
    """Bind 127.0.0.1:port now, so a busy or invalid port is one clear error before anything starts."""
    if not 0 <= port <= 65535:
        raise ListenError(errno.EINVAL, f"port must be 0-65535, not {port}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(_BACKLOG)
    except OSError as exc:
        sock.close()
        raise ListenError(exc.errno, f"cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


class _AcceptErrors:
    """asyncio's loop exception handler while serving: out-of-resource accept errors in one line.

    asyncio (3.11) reports such an error once per pending connection in the
    backlog and retries a second later; one line per second is enough.
    """

    def __init__(self) -> None:
        self.last = -math.inf

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
            now = time.monotonic()
            if now - self.last >= 1.0:
                self.last = now
                log.error("fabric-jev serve: %s (%s); accepting again shortly", context.get("message"),
                          exc.strerror)
            return
        loop.default_exception_handler(context)


async def serve(evaluator: Evaluator, *, port: int = 0, key: str | None = None,
                ready: Callable[[int], None] | None = None, limits: ServeLimits | None = None,
                sock: socket.socket | None = None) -> None:
    """Serve until cancelled (asyncio only). `ready(port)` is called once the socket listens.

    Raises ListenError when the port cannot be listened on.
    """
    import uvicorn

    limits = limits or ServeLimits()
    sock = sock or listen(port)
    config = uvicorn.Config(
        JevApp(JevServer(evaluator, key=key, limits=limits)),
        interface="asgi3", lifespan="off", ws="none", http=_protocol_for(limits),
        log_config=None, log_level="warning", access_log=False, server_header=False,
        proxy_headers=False, backlog=_BACKLOG, h11_max_incomplete_event_size=limits.max_header_bytes,
        # Annotated int, used as a float delay: tests configure fractions of a second.
        timeout_keep_alive=limits.idle_timeout_s,  # type: ignore[arg-type]
        timeout_graceful_shutdown=limits.shutdown_grace_s,  # type: ignore[arg-type]
    )
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)  # what Server.serve() would set; lifespan is "off"
    loop = asyncio.get_running_loop()
    previous_handler = loop.get_exception_handler()
    loop.set_exception_handler(_AcceptErrors())
    try:
        await server.startup(sockets=[sock])
        if ready is not None:
            ready(sock.getsockname()[1])
        await server.main_loop()
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(limits.shutdown_grace_s + 1):
            server.should_exit = True
            if server.started:
                await server.shutdown(sockets=[sock])
        sock.close()
        loop.set_exception_handler(previous_handler)
