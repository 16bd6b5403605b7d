"""browser.connect and browser.cdp for programs (contract §10).

Nothing connects unless a `wsUrl` is configured, and only that URL is used.
Each run gets its own connection, made only by an explicit `browser.connect`
and closed when the run ends. Only exact method names in `allowedMethods`
pass; methods outside `Browser.` and `Target.` need an explicit `sessionId`
(there is no shared active-tab pointer). Every CDP call is `execute` risk:
cancelling a sent command cannot undo it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

import anyio

from fabric_jev import ConfigError
from fabric_jev.protocol import CallContext, Capability

from .cdp import DEFAULT_TIMEOUT_MS, CDPConnection
from .errors import BrowserPolicyError, ConnectionLost, NotConnected

METHOD_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*\.[a-z][A-Za-z0-9]*$")
BROWSER_SCOPED = ("Browser.", "Target.")


@dataclass(frozen=True)
class BrowserConfig:
    """The connector's settings; `parse` reads the config's camelCase keys (``wsUrl``, ...)."""

    ws_url: str
    allowed_methods: tuple[str, ...]
    call_timeout_ms: int = DEFAULT_TIMEOUT_MS

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> BrowserConfig:
        unknown = set(raw) - {"wsUrl", "allowedMethods", "callTimeoutMs", "autoAllow"}
        if unknown:
            raise ConfigError(f"unknown browser config keys: {', '.join(sorted(unknown))}")
        if raw.get("autoAllow", False) is not False:
            raise ConfigError("browser autoAllow is always false")
        url = raw.get("wsUrl")
        if not isinstance(url, str):
            raise ConfigError("browser wsUrl is required (nothing connects unless configured)")
        parts = urlsplit(url)
        if parts.scheme not in ("ws", "wss") or not parts.hostname:
            raise ConfigError("browser wsUrl must be a ws: or wss: URL")
        if parts.username or parts.password:
            raise ConfigError("browser wsUrl must not carry credentials")
        methods = raw.get("allowedMethods")
        if (not isinstance(methods, list | tuple) or not 1 <= len(methods) <= 128
                or not all(isinstance(m, str) and METHOD_NAME.match(m) for m in methods)):
            raise ConfigError("browser allowedMethods must list 1-128 exact method names "
                              "like Runtime.evaluate")
        timeout = raw.get("callTimeoutMs", DEFAULT_TIMEOUT_MS)
        # An int is finite whatever its size (math.isfinite overflows on one past 1e308).
        finite = isinstance(timeout, int) or (isinstance(timeout, float) and math.isfinite(timeout))
        if isinstance(timeout, bool) or not finite:
            raise ConfigError("browser callTimeoutMs must be a number")
        return cls(ws_url=url, allowed_methods=tuple(dict.fromkeys(methods)),
                   call_timeout_ms=min(max(math.floor(timeout), 100), 60_000))


class BrowserConnector:
    """Offers browser.connect and browser.cdp; register with `JevHost.add_connector`."""

    name = "browser"

    def __init__(self, config: BrowserConfig | Mapping[str, Any]) -> None:
        self.config = config if isinstance(config, BrowserConfig) else BrowserConfig.parse(config)
        self._allowed = frozenset(self.config.allowed_methods)
        self._connections: dict[str, CDPConnection] = {}
        self._ended: set[str] = set()

    @property
    def open_connections(self) -> Mapping[str, CDPConnection]:
        """The CDP connection of each run that called `browser.connect`, by run id, until
        that run ends (a connection that dropped stays here, `closed`, until then).
        A read-only view, for tests and diagnostics."""
        return MappingProxyType(self._connections)

    def capabilities(self) -> Mapping[str, Capability]:
        return {
            "browser.connect": Capability(self._connect, "execute",
                                          "Open this run's CDP connection to the configured browser"),
            "browser.cdp": Capability(self._cdp, "execute",
                                      "Send one allowed CDP command {method, params?, sessionId?}"),
        }

    async def _connect(self, args: Any, ctx: CallContext) -> Any:
        if args not in (None, {}):
            raise BrowserPolicyError("browser.connect takes no arguments: it uses the configured wsUrl")
        current = self._connections.get(ctx.run_id)
        if current is not None and not current.closed:
            return {"connected": True, "reused": True}
        conn = await CDPConnection.connect(self.config.ws_url, timeout_ms=self.config.call_timeout_ms)
        # A connect that completes after its run was cancelled or ended is closed at once.
        try:
            await anyio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            await conn.aclose()
            raise
        if ctx.run_id in self._ended:
            await conn.aclose()
            raise NotConnected("the run ended while browser.connect was in flight")
        self._connections[ctx.run_id] = conn
        return {"connected": True, "reused": False}

    async def _cdp(self, args: Any, ctx: CallContext) -> Any:
        if not isinstance(args, dict) or not isinstance(args.get("method"), str) \
                or set(args) - {"method", "params", "sessionId"}:
            raise BrowserPolicyError("browser.cdp expects {method, params?, sessionId?}")
        method = args["method"]
        params = args.get("params")
        session = args.get("sessionId")
        if method not in self._allowed:
            raise BrowserPolicyError(f"CDP method not allowed: {method}")
        if params is not None and not isinstance(params, dict):
            raise BrowserPolicyError("browser.cdp params must be an object")
        if session is not None and not isinstance(session, str):
            raise BrowserPolicyError("browser.cdp sessionId must be a string")
        if not method.startswith(BROWSER_SCOPED) and not session:
            raise BrowserPolicyError("Page-scoped CDP calls require an explicit sessionId")
        conn = self._connections.get(ctx.run_id)
        if conn is None:
            raise NotConnected("Call browser.connect before browser.cdp")
        if conn.closed:
            raise ConnectionLost("the CDP connection dropped; call browser.connect to reconnect")
        return await conn.call(method, params, session_id=session)

    async def run_ended(self, run_id: str) -> None:
        self._ended.add(run_id)
        conn = self._connections.pop(run_id, None)
        if conn is not None:
            await conn.aclose()

    async def aclose(self) -> None:
        for run_id in list(self._connections):
            await self.run_ended(run_id)
        self._ended.clear()


__all__ = ["BrowserConfig", "BrowserConnector"]
