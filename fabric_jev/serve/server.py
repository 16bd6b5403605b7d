"""`serve()`: the ASGI app on uvicorn.

uvicorn's documented settings carry what they can: the HTTP/1.1 protocol
(``http="h11"``), the idle keep-alive timeout, the size of trickled headers,
the backlog and the shutdown grace. The connection cap, the header timeout
and the slicing of large reads sit in front of uvicorn's protocol (guard.py).
Accept failures (out of file descriptors) are left to asyncio, which pauses
accepting for a second and goes on.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import math
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio

from ..errors import JevError
from ..evaluators.base import Evaluator
from .asgi import JevApp, Message, Receive, Scope, Send
from .clients import ClientLimits
from .guard import Connections, guarded
from .handler import JevServer
from .limits import ServeLimits

HOST = "127.0.0.1"
#: Pending connections the kernel holds; asyncio also accepts at most this many per wake-up.
_BACKLOG = 1024
log = logging.getLogger("fabric_jev.serve")


class ListenError(JevError, OSError):
    """The port cannot be listened on (busy, out of range, not permitted); also an OSError, with
    its `errno`."""


class _Tracked:
    """The ASGI app, telling each request's connection when its headers are in, when its body
    is, and when it is done."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], connections: Connections) -> None:
        self.app, self.connections = app, connections

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        guard = self.connections.find(scope.get("client"))
        if guard is None:
            await self.app(scope, receive, send)
            return
        guard.request_started()

        async def receive_body() -> Message:
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                guard.body_received()
            return message

        try:
            await self.app(scope, receive_body, send)
        finally:
            guard.request_finished()


def listen(port: int, host: str = HOST) -> socket.socket:
    """Bind host:port now, so a busy or invalid port is one clear error before anything starts."""
    if not 0 <= port <= 65535:
        raise ListenError(errno.EINVAL, f"port must be 0-65535, not {port}")
    try:
        # The first address the name gives (`localhost` is 127.0.0.1; `::` and `[::1]` are IPv6).
        family, _, _, _, address = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM,
                                                      flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise ListenError(errno.EINVAL, f"cannot listen on {host}:{port}: {exc.strerror}") from None
    # IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm off only on sockets made with it (the
    # guard sets TCP_NODELAY on each connection too, for sockets a caller made).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(_BACKLOG)
    except OSError as exc:
        sock.close()
        raise ListenError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
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


#: `log_level` values, as uvicorn names them.
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def _log_config() -> dict[str, Any]:
    """uvicorn's own log formats (its access line among them), every line on standard error:
    standard output carries only the base URL, which scripts read."""
    return {
        "version": 1, "disable_existing_loggers": False,
        "formatters": {
            "default": {"()": "uvicorn.logging.DefaultFormatter", "fmt": "%(levelprefix)s %(message)s"},
            "access": {"()": "uvicorn.logging.AccessFormatter",
                       "fmt": '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'},
        },
        "handlers": {
            "default": {"formatter": "default", "class": "logging.StreamHandler", "stream": "ext://sys.stderr"},
            "access": {"formatter": "access", "class": "logging.StreamHandler", "stream": "ext://sys.stderr"},
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "propagate": False},
            "uvicorn.access": {"handlers": ["access"], "propagate": False},
            "fabric_jev": {"handlers": ["default"], "propagate": False},
        },
    }


async def serve(evaluator: Evaluator | str, *, port: int = 0, key: str | Sequence[str] | None = None,
                ready: Callable[[int], None] | None = None, limits: ServeLimits | None = None,
                sock: socket.socket | None = None, log_level: str | None = None,
                access_log: bool = False, client_requests: int | None = None,
                ssl_certfile: str | None = None, ssl_keyfile: str | None = None,
                ssl_keyfile_password: str | None = None) -> None:
    """Serve until cancelled (asyncio only). `ready(port)` is called once the socket listens.

    `evaluator` is an Evaluator or a spec string (`local`, `fixture:FILE`, ...;
    one built from a spec is closed when serving ends). `log_level` (one of
    LOG_LEVELS) turns on uvicorn's logging on standard error, with one access
    line per request when `access_log` is set; without it, only our own
    warnings are logged. `key`: the bearer key, or several (one per client).
    `client_requests`: requests in flight per client (clients.py), None for no
    such limit. `ssl_*`: TLS, as uvicorn's options of those names. Raises
    ListenError when the port cannot be listened on.
    """
    if isinstance(evaluator, str):
        from ..evaluators.select import evaluator_for

        async with evaluator_for(evaluator) as built:
            await serve(built, port=port, key=key, ready=ready, limits=limits, sock=sock,
                        log_level=log_level, access_log=access_log, client_requests=client_requests,
                        ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile,
                        ssl_keyfile_password=ssl_keyfile_password)
        return
    import uvicorn

    if log_level is not None and log_level not in LOG_LEVELS:
        raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}")
    limits = limits or ServeLimits()
    sock = sock or listen(port)
    connections = Connections(limits)
    jev = JevServer(evaluator, key=key, limits=limits)
    app: Callable[[Scope, Receive, Send], Awaitable[None]] = JevApp(jev)
    if client_requests is not None:
        app = ClientLimits(JevApp(jev), client_requests, jev.keys)
    config = uvicorn.Config(
        _Tracked(app, connections),
        ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile, ssl_keyfile_password=ssl_keyfile_password,
        interface="asgi3", lifespan="off", ws="none", http="h11",
        log_config=None if log_level is None else _log_config(), log_level=log_level or "warning",
        access_log=access_log and log_level is not None, server_header=False,
        proxy_headers=False, backlog=_BACKLOG, h11_max_incomplete_event_size=limits.max_header_bytes,
        # Annotated int, used as a float delay: tests configure fractions of a second.
        timeout_keep_alive=limits.idle_timeout_s,  # type: ignore[arg-type]
        timeout_graceful_shutdown=limits.shutdown_grace_s,  # type: ignore[arg-type]
    )
    config.load()
    # The protocol the `http` setting chose, behind the guard (composition, see guard.py).
    config.http_protocol_class = guarded(config.http_protocol_class, connections)
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
