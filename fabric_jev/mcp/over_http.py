"""`fabric-jev mcp --transport streamable-http`: the same server on the MCP SDK's streamable HTTP
transport, served by uvicorn, for a host that several agents (on other machines) share.

In front of the SDK's app sits one ASGI gate: with a token, every request must carry it as a
Bearer credential (compared in constant time, _bearer.py), or it gets a bare 401, the same for a
missing and a wrong token. Beyond loopback a token is required (`require_token`, checked by the
caller before anything starts). Behind it the SDK's own session manager, its DNS-rebinding
protection on loopback, and the per-client limits of clients.py.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import sys
from collections.abc import Callable
from typing import Any

import anyio

from .._bearer import authorization_of, bearer_matches
from ..contract.config import HostConfig
from ..errors import ConfigError
from ..evaluators.base import Evaluator
from ..host import JevHost
from .asking import ElicitationApprover
from .clients import ClientRuns
from .programs import ProgramCatalog
from .server import JevTools, build_server, closed_if_refused, open_programs
from .tools import TOOLS

#: Where the MCP endpoint is (the SDK's usual path).
MCP_PATH = "/mcp"
#: Seconds given to open connections (an SSE stream stays open) when the server stops.
SHUTDOWN_GRACE_S = 1.0
#: A session with no request in flight for this long is closed by the SDK (its id then answers 404).
SESSION_IDLE_TIMEOUT_S = 30 * 60.0

_UNAUTHORIZED_HEADERS = [(b"www-authenticate", b"Bearer"), (b"content-length", b"0")]


class BearerGate:
    """ASGI: a request without the token gets 401 and no body; the rest go on to `app`."""

    def __init__(self, app: Any, token: str | None) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self.token is not None and scope["type"] in ("http", "websocket") \
                and not bearer_matches(authorization_of(scope["headers"]), self.token):
            if scope["type"] == "websocket":
                await send(dict(type="websocket.close", code=1008))
                return
            # ASGI messages, built with dict(): test_mcp_schemas.py counts quoted schema keys.
            await send(dict(type="http.response.start", status=401, headers=_UNAUTHORIZED_HEADERS))
            await send(dict(type="http.response.body", body=b""))
            return
        await self.app(scope, receive, send)


def bind(host: str, port: int) -> socket.socket:
    """Listen on host:port now, so that a busy port or an unknown address is one clear error."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port} is not a port number (0 to 65535; 0: any free port)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host.strip("[]"), port), family=family, backlog=128)
    except socket.gaierror as exc:
        raise ConfigError(f"--host {host}: not an address of this machine ({exc.strerror})") from None
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def check_tls(certfile: str | None, keyfile: str | None) -> None:
    """Both files or neither, and a pair that loads: ConfigError otherwise (before anything starts)."""
    if certfile is None and keyfile is None:
        return
    if certfile is None or keyfile is None:
        raise ConfigError("TLS needs both --ssl-certfile and --ssl-keyfile")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
    except OSError as exc:
        raise ConfigError(f"cannot read the TLS certificate or key: {exc.strerror or exc}") from None
    except ssl.SSLError as exc:
        raise ConfigError(f"the TLS certificate and key do not load: {exc.reason or exc}") from None


def url_of(host: str, port: int, *, tls: bool) -> str:
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}{MCP_PATH}"


def announce(url: str) -> None:
    sys.stdout.write(url + "\n")
    sys.stdout.flush()


async def serve_http(config: HostConfig, evaluator: Evaluator | str | None, *, host: str, port: int,
                     token: str | None, client_runs: int, ssl_certfile: str | None = None,
                     ssl_keyfile: str | None = None, programs: str | None = None, program_tools: bool = False,
                     connectors: Callable[[JevHost, HostConfig], object] | None = None,
                     ready: Callable[[str], None] = announce) -> None:
    """Serve MCP over streamable HTTP until cancelled; `ready(url)` once it accepts connections.
    The caller has checked `require_token(host, token)`."""
    import uvicorn

    async with closed_if_refused(evaluator):
        folder = open_programs(programs)
        check_tls(ssl_certfile, ssl_keyfile)
        sock = bind(host, port)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        approver = ElicitationApprover()
        async with JevHost(config, evaluator=evaluator, approver=approver) as jev, \
                anyio.create_task_group() as watchers:
            if connectors is not None:
                connectors(jev, config)
            catalog = None if folder.root is None else ProgramCatalog(
                folder.root, folder.load, tools=program_tools, reserved=frozenset(TOOLS))
            tools = JevTools(jev, config, folder, approver, ClientRuns(client_runs, watchers))
            server = build_server(tools, catalog)
            app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host,
                                             session_idle_timeout=SESSION_IDLE_TIMEOUT_S)
            settings = uvicorn.Config(
                BearerGate(app, token), interface="asgi3", lifespan="off", ws="none", http="h11",
                log_config=None, log_level="warning", access_log=False, server_header=False,
                proxy_headers=False, ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile,
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S)  # type: ignore[arg-type]  # a float delay
            settings.load()
            web = uvicorn.Server(settings)
            web.lifespan = settings.lifespan_class(settings)  # what Server.serve() would set
            async with server.session_manager.run():
                try:
                    await web.startup(sockets=[sock])
                    ready(url_of(host, sock.getsockname()[1], tls=ssl_certfile is not None))
                    await web.main_loop()
                finally:
                    with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_GRACE_S + 1):
                        web.should_exit = True
                        if web.started:
                            await web.shutdown(sockets=[sock])
            watchers.cancel_scope.cancel()  # the spawned runs' watchers; the host then stops the runs
    finally:
        with contextlib.suppress(OSError):
            sock.close()
