"""browser.connect and browser.cdp for programs (contract §10).

Nothing connects unless a `wsUrl` is configured, and only that URL is used;
or, with `launch: true`, a headless Chromium started for this connector alone
(`launcher.py`, at the first `browser.connect`) and ended with it — when its
host closes, after the run, also a run that failed or was interrupted.
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
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio

from fabric_jev import ConfigError
from fabric_jev.protocol import CallContext, Capability

from .cdp import DEFAULT_TIMEOUT_MS, CDPConnection
from .errors import BrowserPolicyError, ConnectionLost, NotConnected

if TYPE_CHECKING:
    from .launcher import LaunchedBrowser

METHOD_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*\.[a-z][A-Za-z0-9]*$")
BROWSER_SCOPED = ("Browser.", "Target.")


@dataclass(frozen=True)
class BrowserConfig:
    """The connector's settings; `parse` reads the config's camelCase keys (``wsUrl``, ...)."""

    ws_url: str  # "" when `launch` is set: the launched browser's own URL is used
    allowed_methods: tuple[str, ...]
    call_timeout_ms: int = DEFAULT_TIMEOUT_MS
    #: Start a headless Chromium for this connector (at the first browser.connect) and end it with it.
    launch: bool = False

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> BrowserConfig:
        unknown = set(raw) - {"wsUrl", "allowedMethods", "callTimeoutMs", "autoAllow", "launch"}
        if unknown:
            raise ConfigError(f"unknown browser config keys: {', '.join(sorted(unknown))}")
        if raw.get("autoAllow", False) is not False:
            raise ConfigError("browser autoAllow is always false")
        launch = raw.get("launch", False)
        if not isinstance(launch, bool):
            raise ConfigError("browser launch must be true or false")
        url = raw.get("wsUrl")
        if launch:
            if url is not None:
                raise ConfigError("browser: give wsUrl (a browser you started) or launch: true "
                                  "(one started for the host), not both")
            url = ""
        elif not isinstance(url, str):
            raise ConfigError("browser wsUrl is required (nothing connects unless configured), "
                              "or launch: true to start a headless Chromium for the host")
        else:
            parts = urlsplit(url)
            if parts.scheme not in ("ws", "wss") or not parts.hostname:
                raise ConfigError("browser wsUrl must be a ws: or wss: URL")
            if parts.username or parts.password:
                raise ConfigError("browser wsUrl must not carry credentials")
        methods = raw.get("allowedMethods")
        if (not isinstance(methods, list | tuple) or not 1 <= len(methods) <= 128
                or not all(isinstance(m, str) and METHOD_NAME.fullmatch(m) for m in methods)):
            raise ConfigError("browser allowedMethods must list 1-128 exact method names "
                              "like Runtime.evaluate")
        timeout = raw.get("callTimeoutMs", DEFAULT_TIMEOUT_MS)
        # An int is finite whatever its size (math.isfinite overflows on one past 1e308).
        finite = isinstance(timeout, int) or (isinstance(timeout, float) and math.isfinite(timeout))
        if isinstance(timeout, bool) or not finite:
            raise ConfigError("browser callTimeoutMs must be a number")
        return cls(ws_url=url, allowed_methods=tuple(dict.fromkeys(methods)),
                   call_timeout_ms=min(max(math.floor(timeout), 100), 60_000), launch=launch)


class BrowserConnector:
    """Offers browser.connect and browser.cdp; register with `JevHost.add_connector`."""

    name = "browser"

    def __init__(self, config: BrowserConfig | Mapping[str, Any]) -> None:
        self.config = config if isinstance(config, BrowserConfig) else BrowserConfig.parse(config)
        self._allowed = frozenset(self.config.allowed_methods)
        self._connections: dict[str, CDPConnection] = {}
        self._ended: set[str] = set()
        self._browser: LaunchedBrowser | None = None
        self._launching: anyio.Lock | None = None  # made on the event loop, at the first connect
        self._closed = False

    @property
    def open_connections(self) -> Mapping[str, CDPConnection]:
        """The CDP connection of each run that called `browser.connect`, by run id, until
        that run ends (a connection that dropped stays here, `closed`, until then).
        A read-only view, for tests and diagnostics."""
        return MappingProxyType(self._connections)

    @property
    def launched_pid(self) -> int | None:
        """The process id of the Chromium this connector launched (`launch: true`) while it runs,
        else None. Diagnostics and tests only."""
        browser = self._browser
        return browser.pid if browser is not None and browser.proc.poll() is None else None

    async def _endpoint(self) -> str:
        """The websocket URL to connect to: the configured one, or the launched browser's
        (started now if it is not running: the first connect, or after it exited)."""
        if not self.config.launch:
            return self.config.ws_url
        if self._launching is None:
            self._launching = anyio.Lock()
        async with self._launching:  # concurrent first connects of several runs start one browser
            if self._closed:
                raise NotConnected("the browser connector is closed")
            browser = self._browser
            if browser is not None and browser.proc.poll() is None:
                return browser.ws_url
            from .launcher import launch_chromium

            if browser is not None:  # it exited (crashed or killed): clean up, start another
                self._browser = None
                await browser.aclose()
            launched = await launch_chromium()
            if self._closed:  # closed while it started: it must not outlive the connector
                await launched.aclose()
                raise NotConnected("the browser connector is closed")
            self._browser = launched
            return launched.ws_url

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
        conn = await CDPConnection.connect(await self._endpoint(), timeout_ms=self.config.call_timeout_ms)
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
        """Close every run's connection, and end the launched browser (its whole process group)."""
        self._closed = True  # no browser is launched after this
        for run_id in list(self._connections):
            await self.run_ended(run_id)
        self._ended.clear()
        browser, self._browser = self._browser, None
        if browser is not None:
            await browser.aclose()


__all__ = ["BrowserConfig", "BrowserConnector"]
