"""One page target over a CDP connection, the page model: one obvious way to do each thing
(navigate, evaluate, click, type, snapshot, screenshot, reload). `Page` (page.py) is a `Tab`
that also gives checks and plans what they look at."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Self

import anyio

from .cdp import CDPConnection
from .errors import CallTimeout, EvaluationFailed
from .frames import FrameSnapshot, expand_snapshot, frame_texts
from .scripts import QUIET_OBSERVER, snapshot_script
from .sessions import FrameTracker
from .shadow import ClosedShadow

if TYPE_CHECKING:
    from fabric_jev import JsonValue

#: What runs before each action through the page (`Tab.on_before_action`).
ActionHook = Callable[[], Awaitable[None]]


class Tab:
    """A page target attached with a flat session (every call names its sessionId)."""

    def __init__(self, cdp: CDPConnection, target_id: str, session_id: str) -> None:
        self.cdp = cdp
        self.target_id = target_id
        self.session_id = session_id
        # Listens before Runtime.enable, so every frame's context is seen.
        self.frames = FrameTracker(cdp, session_id)
        self._before_action: list[ActionHook] = []

    @classmethod
    async def open(cls, cdp: CDPConnection, url: str = "about:blank", *,
                   width: int = 1280, height: int = 800) -> Self:
        """Create a new page target, attach to it and size its viewport."""
        created = await cdp.call("Target.createTarget", {"url": "about:blank"})
        page = await cls.attach(cdp, created["targetId"], width=width, height=height)
        if url != "about:blank":
            await page.navigate(url)
        return page

    @classmethod
    async def attach(cls, cdp: CDPConnection, target_id: str, *, width: int = 1280,
                     height: int = 800) -> Self:
        attached = await cdp.call("Target.attachToTarget", {"targetId": target_id, "flatten": True})
        page = cls(cdp, target_id, attached["sessionId"])
        await page.call("Page.enable")
        await page.call("Runtime.enable")
        await page.call("Page.addScriptToEvaluateOnNewDocument", {"source": QUIET_OBSERVER})
        # The default headless viewport is 780×493: set one explicitly.
        await page.call("Emulation.setDeviceMetricsOverride",
                        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        await page.frames.start()
        return page

    async def call(self, method: str, params: dict[str, Any] | None = None, *,
                   timeout_ms: int | None = None) -> dict[str, Any]:
        return await self.cdp.call(method, params, session_id=self.session_id, timeout_ms=timeout_ms)

    def on_before_action(self, hook: ActionHook) -> Callable[[], None]:
        """Run `hook` before each click, type or navigate (PageSource keeps its diff baseline
        this way); returns a function that removes it."""
        self._before_action.append(hook)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._before_action.remove(hook)

        return remove

    async def _acting(self) -> None:
        for hook in list(self._before_action):
            await hook()

    async def navigate(self, url: str, *, wait_load: bool = True) -> None:
        """Navigate and (by default) wait for the load event; errorText raises NavigationError."""
        await self._acting()
        if not wait_load:
            await self.call("Page.navigate", {"url": url})
            return
        loaded = _Waiter(self.cdp, "Page.loadEventFired", self.session_id)
        try:
            await self.call("Page.navigate", {"url": url})
            await loaded.wait(self.cdp.timeout_ms)
        finally:
            loaded.remove()

    async def evaluate(self, expression: str, *, await_promise: bool = False,
                       timeout_ms: int | None = None) -> JsonValue:
        """The expression's value in the page, as JSON (`returnByValue`)."""
        result = await self.call("Runtime.evaluate", {
            "expression": expression, "returnByValue": True, "awaitPromise": await_promise},
            timeout_ms=timeout_ms)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text", "error")
            raise EvaluationFailed(f"page evaluation failed: {str(text).splitlines()[0]}")
        value: JsonValue = result.get("result", {}).get("value")
        return value

    async def snapshot(self, *, occlusion: bool = True, max_elements: int = 5000,
                       closed_shadow: ClosedShadow = "all") -> dict[str, Any]:
        """Run runtime_js/snapshot.js in every frame and place the frames on the page
        (frames.py; see docs/browser.md for the fields and `closed_shadow`)."""
        # Each frame answers with one JSON string: it crosses the protocol far faster
        # than thousands of objects serialised field by field by returnByValue.
        raw = await FrameSnapshot(self.cdp, self.frames, snapshot_script(),
                                  {"occlusion": occlusion, "maxElements": max_elements},
                                  closed_shadow).take()
        return expand_snapshot(raw)

    async def texts(self) -> list[str]:
        """The visible text of every frame's body (the page's own first)."""
        return await frame_texts(self.cdp, self.frames)

    async def click(self, target: dict[str, Any] | tuple[float, float]) -> None:
        """Click the centre of a snapshot element (its viewport_bbox) or at (x, y)."""
        if isinstance(target, dict):
            box = target["viewport_bbox"]
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        else:
            x, y = target
        await self._acting()
        await self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        for kind in ("mousePressed", "mouseReleased"):
            await self.call("Input.dispatchMouseEvent",
                            {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    async def type(self, text: str, target: dict[str, Any] | None = None) -> None:
        """Type text (into `target` first clicked, when given)."""
        if target is not None:
            await self.click(target)
        else:
            await self._acting()
        await self.call("Input.insertText", {"text": text})

    async def screenshot(self) -> bytes:
        shot = await self.call("Page.captureScreenshot", {"format": "png"})
        return base64.b64decode(shot["data"])

    async def wait_for_event(self, method: str, *, timeout_ms: int | None = None,
                             predicate: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any]:
        return await self.cdp.wait_for(method, session_id=self.session_id, predicate=predicate,
                                       timeout_ms=timeout_ms)

    async def ax_tree(self, *, timeout_ms: int | None = None) -> dict[str, Any]:
        """The full accessibility tree, on demand (can be several MB)."""
        return await self.call("Accessibility.getFullAXTree", timeout_ms=timeout_ms)

    async def reload(self) -> None:
        """Reload and wait for the load event."""
        await self._acting()
        loaded = _Waiter(self.cdp, "Page.loadEventFired", self.session_id)
        try:
            await self.call("Page.reload")
            await loaded.wait(self.cdp.timeout_ms)
        finally:
            loaded.remove()

    async def close(self) -> None:
        self.frames.close()
        await self.cdp.call("Target.closeTarget", {"targetId": self.target_id})


class _Waiter:
    """Registers before the action that triggers the event, so it cannot be missed."""

    def __init__(self, cdp: CDPConnection, method: str, session_id: str) -> None:
        self._event = anyio.Event()
        self.remove = cdp.on(method, lambda _msg: self._event.set(), session_id=session_id)
        self._method = method

    async def wait(self, timeout_ms: int) -> None:
        try:
            with anyio.fail_after(timeout_ms / 1000):
                await self._event.wait()
        except TimeoutError:
            raise CallTimeout(f"wait for {self._method}", timeout_ms) from None


__all__ = ["ActionHook", "Tab"]
