"""The CDP sessions of one page: the page's own, and one per out-of-process frame
(attached with `Target.setAutoAttach {flatten: true}`, recursively), with each
frame's main-world execution context, the frames that are loading, and the
sessions that went away. `FrameTracker` follows them from the page's events;
the snapshot (frames.py) reads the frames it knows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .cdp import CDPConnection, each
from .errors import BrowserError, CDPError
from .scripts import QUIET_OBSERVER


@dataclass
class _Session:
    id: str
    parent: str | None  # the session that attached it; None for the page's own
    ready: bool = False
    removers: list[Callable[[], None]] = field(default_factory=list)


class FrameTracker:
    """The CDP sessions, frame contexts and loading frames of one page (see module doc)."""

    def __init__(self, cdp: CDPConnection, top_session: str) -> None:
        self.cdp = cdp
        self.top = top_session
        self.sessions: dict[str, _Session] = {}
        #: (session, frame id) -> the frame's main-world execution context
        self.contexts: dict[tuple[str, str], int] = {}
        self.loading: set[str] = set()
        self._watch(top_session, None)
        self.sessions[top_session].ready = True  # Page.attach sets the page's own session up
    def _watch(self, sid: str, parent: str | None) -> None:
        session = self.sessions[sid] = _Session(sid, parent)

        def created(msg: dict[str, Any]) -> None:
            ctx = msg["params"]["context"]
            aux = ctx.get("auxData") or {}
            if aux.get("isDefault") and aux.get("frameId"):
                self.contexts[(sid, aux["frameId"])] = ctx["id"]

        def destroyed(msg: dict[str, Any]) -> None:
            gone = msg["params"].get("executionContextId")
            for key in [k for k, v in self.contexts.items() if k[0] == sid and v == gone]:
                del self.contexts[key]

        def cleared(_msg: dict[str, Any]) -> None:
            for key in [k for k in self.contexts if k[0] == sid]:
                del self.contexts[key]

        def attached(msg: dict[str, Any]) -> None:
            params = msg["params"]
            if params.get("targetInfo", {}).get("type") == "iframe" and params["sessionId"] not in self.sessions:
                self._watch(params["sessionId"], sid)

        def detached(msg: dict[str, Any]) -> None:
            self._drop(msg["params"].get("sessionId", ""))

        def started(msg: dict[str, Any]) -> None:
            self.loading.add(msg["params"]["frameId"])

        def stopped(msg: dict[str, Any]) -> None:
            self.loading.discard(msg["params"]["frameId"])

        for method, listener in (("Runtime.executionContextCreated", created),
                                 ("Runtime.executionContextDestroyed", destroyed),
                                 ("Runtime.executionContextsCleared", cleared),
                                 ("Target.attachedToTarget", attached),
                                 ("Target.detachedFromTarget", detached),
                                 ("Page.frameStartedLoading", started),
                                 ("Page.frameStoppedLoading", stopped),
                                 ("Page.frameDetached", stopped)):
            session.removers.append(self.cdp.on(method, listener, session_id=sid))

    def _drop(self, sid: str) -> None:
        session = self.sessions.pop(sid, None)
        if session is None:
            return
        for remove in session.removers:
            remove()
        for key in [k for k in self.contexts if k[0] == sid]:
            del self.contexts[key]
        for child in [s.id for s in self.sessions.values() if s.parent == sid]:
            self._drop(child)

    async def _auto_attach(self, sid: str) -> None:
        params: dict[str, Any] = {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True}
        try:
            # Only frames: workers need no session of ours.
            await self.cdp.call("Target.setAutoAttach", {
                **params, "filter": [{"type": "iframe", "exclude": False}]}, session_id=sid)
        except CDPError:  # a browser without target filters: other targets are ignored on attach
            await self.cdp.call("Target.setAutoAttach", params, session_id=sid)

    async def start(self) -> None:
        """Attach to the page's out-of-process frames, now and as they appear."""
        await self._auto_attach(self.top)

    async def prepare(self) -> None:
        """Set up sessions attached since the last call (and the frames they attach in turn)."""
        while True:
            fresh = [s for s in self.sessions.values() if not s.ready]
            if not fresh:
                return
            for s in fresh:
                s.ready = True
            await each(self._setup, [s.id for s in fresh])

    async def _setup(self, sid: str) -> None:
        try:
            await self.cdp.call("Page.enable", session_id=sid)
            await self.cdp.call("Page.addScriptToEvaluateOnNewDocument", {"source": QUIET_OBSERVER},
                                session_id=sid)
            await self.cdp.call("Runtime.enable", session_id=sid)
            await self._auto_attach(sid)
        except BrowserError:
            self._drop(sid)  # the frame went away while being set up

    def close(self) -> None:
        for sid in list(self.sessions):
            self._drop(sid)


__all__ = ["FrameTracker"]
