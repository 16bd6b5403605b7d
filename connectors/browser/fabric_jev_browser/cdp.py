"""A Chrome DevTools Protocol client on one websocket.

Requests are matched to replies by id; events go to listeners keyed by
(sessionId, method). Listeners are plain callables run by the reader, so they
must not block (a waiter only sets an event). At most `max_outstanding`
commands are on the wire at once; each has a timeout. A dropped connection
fails every pending call at once and the client stays closed: reconnecting is
an explicit, new `CDPConnection.connect`. `each` sends many calls at once and
keeps every one's answer or error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import anyio
import websockets
from websockets.asyncio.client import ClientConnection

from .errors import BrowserError, CallTimeout, CDPError, ConnectionLost, NavigationError

log = logging.getLogger(__name__)
Listener = Callable[[dict[str, Any]], None]
DEFAULT_TIMEOUT_MS = 10_000
MAX_OUTSTANDING = 16
T = TypeVar("T")
X = TypeVar("X")


def _expire(fut: asyncio.Future[dict[str, Any]], method: str, timeout_ms: int) -> None:
    if not fut.done():
        fut.set_exception(CallTimeout(method, timeout_ms))


class CDPConnection:
    def __init__(self, ws: ClientConnection, *, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 max_outstanding: int = MAX_OUTSTANDING) -> None:
        self._ws = ws
        self.timeout_ms = timeout_ms
        self._next_id = 1
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._listeners: dict[tuple[str | None, str], list[Listener]] = {}
        self._slots = asyncio.Semaphore(max_outstanding)
        self._closed: BaseException | None = None
        self._reader = asyncio.get_running_loop().create_task(self._read())
        self.outstanding = 0
        self.peak_outstanding = 0

    @classmethod
    async def connect(cls, ws_url: str, *, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                      max_outstanding: int = MAX_OUTSTANDING) -> CDPConnection:
        if not ws_url.startswith(("ws://", "wss://")):
            raise ConnectionLost(f"cannot connect to {ws_url!r}: a DevTools URL starts with ws:// or wss://")
        # max_size=None: a full accessibility tree is several MB in one frame.
        try:
            with anyio.fail_after(timeout_ms / 1000):
                ws = await websockets.connect(ws_url, max_size=None, ping_interval=None,
                                              compression=None, open_timeout=None)
        except TimeoutError:
            raise ConnectionLost(f"cannot connect to {ws_url}: no answer within {timeout_ms} ms") from None
        except (OSError, websockets.exceptions.WebSocketException, ValueError) as exc:
            # Refused, unreachable, not a DevTools endpoint: one line, never a traceback.
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
            raise ConnectionLost(f"cannot connect to {ws_url}: {reason}") from None
        return cls(ws, timeout_ms=timeout_ms, max_outstanding=max_outstanding)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def _read(self) -> None:
        reason: BaseException = ConnectionLost("the CDP connection was closed")
        try:
            async for raw in self._ws:
                msg = json.loads(raw)
                if "id" in msg:
                    fut = self._pending.pop(msg["id"], None)
                    if fut is not None and not fut.done():
                        fut.set_result(msg)
                    continue
                method = msg.get("method")
                if method is None:
                    continue
                session = msg.get("sessionId")
                for key in ((session, method), (None, "*")):
                    for listener in list(self._listeners.get(key, ())):
                        try:
                            listener(msg)
                        except Exception:  # a broken listener must not stop the reader
                            log.exception("CDP listener for %s failed", method)
        except websockets.ConnectionClosed:
            reason = ConnectionLost("the CDP connection dropped")
        except Exception as exc:  # malformed frame: treat as a lost connection
            reason = ConnectionLost(f"the CDP connection failed ({type(exc).__name__})")
        finally:
            self._fail_all(reason)

    def _fail_all(self, reason: BaseException) -> None:
        if self._closed is None:
            self._closed = reason
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionLost(str(reason)))
        self._pending.clear()

    async def call(self, method: str, params: dict[str, Any] | None = None, *,
                   session_id: str | None = None, timeout_ms: int | None = None) -> dict[str, Any]:
        """Send one command and return its result (raises CDPError, CallTimeout, ConnectionLost)."""
        timeout_ms = self.timeout_ms if timeout_ms is None else timeout_ms
        if self._closed is not None:
            raise ConnectionLost(str(self._closed))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        if self._slots.locked():
            # All slots busy: waiting for one counts against the call's timeout.
            try:
                with anyio.fail_after(timeout_ms / 1000):
                    await self._slots.acquire()
            except TimeoutError:
                raise CallTimeout(method, timeout_ms) from None
        else:
            await self._slots.acquire()  # free: returns without suspending
        try:
            return await self._send(method, params, session_id, deadline, timeout_ms)
        finally:
            self._slots.release()

    async def _send(self, method: str, params: dict[str, Any] | None, session_id: str | None,
                    deadline: float, timeout_ms: int) -> dict[str, Any]:
        if self._closed is not None:
            raise ConnectionLost(str(self._closed))
        call_id = self._next_id
        self._next_id += 1
        message: dict[str, Any] = {"id": call_id, "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._pending[call_id] = fut
        # The deadline fails the reply future itself: cheaper than a cancel scope per call.
        timer = loop.call_at(deadline, _expire, fut, method, timeout_ms)
        self.outstanding += 1
        self.peak_outstanding = max(self.peak_outstanding, self.outstanding)
        try:
            await self._ws.send(json.dumps(message))
            reply = await fut
        except websockets.ConnectionClosed:
            raise ConnectionLost("the CDP connection dropped") from None
        finally:
            timer.cancel()
            self.outstanding -= 1
            self._pending.pop(call_id, None)
        if "error" in reply:
            err = reply["error"]
            raise CDPError(method, int(err.get("code", 0)), str(err.get("message", "")))
        result: dict[str, Any] = reply.get("result", {})
        if method == "Page.navigate" and result.get("errorText"):
            raise NavigationError(str((params or {}).get("url", "")), str(result["errorText"]))
        return result

    def on(self, method: str, listener: Listener, *, session_id: str | None = None) -> Callable[[], None]:
        """Add a listener; returns a function that removes it. `method="*"` gets everything."""
        key = (session_id if method != "*" else None, method)
        self._listeners.setdefault(key, []).append(listener)

        def remove() -> None:
            with contextlib.suppress(ValueError, KeyError):
                self._listeners[key].remove(listener)

        return remove

    async def wait_for(self, method: str, *, session_id: str | None = None,
                       predicate: Callable[[dict[str, Any]], bool] | None = None,
                       timeout_ms: int | None = None) -> dict[str, Any]:
        """Wait for the next matching event; the listener is removed on every path."""
        got: list[dict[str, Any]] = []
        event = anyio.Event()

        def listener(msg: dict[str, Any]) -> None:
            if not got and (predicate is None or predicate(msg)):
                got.append(msg)
                event.set()

        remove = self.on(method, listener, session_id=session_id)
        try:
            timeout_ms = self.timeout_ms if timeout_ms is None else timeout_ms
            try:
                with anyio.fail_after(timeout_ms / 1000):
                    await event.wait()
            except TimeoutError:
                raise CallTimeout(f"wait for {method}", timeout_ms) from None
        finally:
            remove()
        return got[0]

    async def aclose(self) -> None:
        self._fail_all(ConnectionLost("the CDP connection was closed"))
        with anyio.CancelScope(shield=True):
            await self._ws.close()
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader


async def each(call: Callable[[X], Awaitable[T]], items: Iterable[X]) -> list[T | Exception]:
    """`call(item)` for every item at once; one that fails gives its exception, the others
    carry on (cancellation still cancels them all)."""
    todo = list(items)
    results: list[T | Exception] = [BrowserError("not run")] * len(todo)

    async def run(i: int, item: X) -> None:
        try:
            results[i] = await call(item)
        except Exception as exc:
            results[i] = exc

    async with anyio.create_task_group() as tg:
        for i, item in enumerate(todo):
            tg.start_soon(run, i, item)
    return results
