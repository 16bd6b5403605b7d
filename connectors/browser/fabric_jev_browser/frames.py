"""Snapshots that see the whole page: every frame, in process or not, and closed shadow roots.

`FrameSnapshot` runs runtime_js/snapshot.js in every frame's context that the
page's `FrameTracker` (sessions.py) knows (all at once), then places each
frame on the page: the frame's owner element (found with `DOM.getFrameOwner`
in the parent's session) gives the offset and the clip of its content box,
its path (`checkout/card`) and whether it is shown. Elements in frames get
page coordinates, `in_viewport` against the frame's visible part, and
`is_occluded` when something in an ancestor document covers the frame at the
element's centre (one hit test per owner, batched). A frame that cannot be
read (detached, navigating, no document yet) is listed in the snapshot's
`frames` with an `error`, which lowers its confidence instead of failing it.
Closed shadow roots are looked up through CDP first (shadow.py) and handed to
the page walk as arguments. `expand_snapshot` turns the compact answer into
the snapshot's JSON; `frame_texts` reads every frame's visible text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anyio

from .cdp import CDPConnection, each
from .errors import BrowserError
from .scripts import GROUP, OWNER_HITS, OWNER_INFO, QUIET_OBSERVER, TEXT_OF_FRAME
from .sessions import FrameTracker
from .shadow import CLOSED_SHADOW_MODES, ClosedRoots, ClosedShadow, closed_in_capture

#: Element fields the page leaves out when they hold their default value.
ELEMENT_DEFAULTS: dict[str, Any] = {
    "role": "", "explicit_role": False, "tag": "", "name": "", "text": "", "value": None,
    "value_redacted": False, "value_clipped": False, "input_type": None, "checked": None,
    "aria_checked": None, "disabled": False, "aria_disabled": False, "disabled_source": None,
    "expanded": None, "pressed": None, "selected": None, "level": None, "placeholder": None,
    "testid": None, "id": None, "in_shadow": False, "readonly": False, "editable": False,
    "visible": False, "in_viewport": False, "is_occluded": False, "occluded_by": None,
    "frame": "", "frame_url": "",
}


def expand_snapshot(raw: dict[str, Any]) -> dict[str, Any]:
    """Restore omitted defaults and add each element's viewport_bbox (bbox minus scroll)."""
    sx, sy = raw["scroll"]["x"], raw["scroll"]["y"]
    elements = []
    for compact in raw["elements"]:
        element = {**ELEMENT_DEFAULTS, "index": 0, **compact}
        box = element["bbox"]
        element["viewport_bbox"] = {"x": box["x"] - round(sx), "y": box["y"] - round(sy),
                                    "width": box["width"], "height": box["height"]}
        elements.append(element)
    return {**raw, "elements": elements}


@dataclass
class _Frame:
    id: str
    session: str
    parent: str | None
    url: str
    children: list[str] = field(default_factory=list)
    raw: dict[str, Any] | None = None
    owner: dict[str, Any] | None = None
    owner_object: str | None = None
    error: str | None = None
    path: str = ""
    offset: tuple[float, float] = (0.0, 0.0)
    clip: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # left, top, right, bottom
    shown: bool = True
    placed: bool = False


def _brief(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def _segment(owner: dict[str, Any]) -> str:
    for key in ("id", "name", "title"):
        if owner.get(key):
            return str(owner[key]).replace("/", "_")
    return f"frame{owner.get('index', -1) + 1}"


def _intersect(a: tuple[float, float, float, float],
               b: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    return (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))


class FrameSnapshot:
    """One snapshot of a page across its frames (see the module doc)."""

    def __init__(self, cdp: CDPConnection, tracker: FrameTracker, script: str, options: dict[str, Any],
                 closed_shadow: ClosedShadow = "all") -> None:
        if closed_shadow not in CLOSED_SHADOW_MODES:
            raise ValueError(f"closed_shadow must be all, custom-elements or off, not {closed_shadow!r}")
        self.cdp = cdp
        self.tracker = tracker
        self.options = options
        self.closed_shadow = closed_shadow
        #: per frame, backend node ids that lead to its closed shadow roots (a root itself, or
        #: a node inside one), when looked up in bulk
        self.closed_nodes: dict[str, list[int]] = {}
        #: sessions whose closed-root lookup failed, with why
        self.closed_failed: dict[str, str] = {}
        # A handle may be a node inside a closed root: its root node is the root (a shadow
        # root's own root node is itself). Duplicates are dropped by the walk's host map.
        self.wrapped = (f"function (options, ...closed) {{ return JSON.stringify(({script})"
                        "(options, closed.map((n) => n.getRootNode()))); }")
        self.used_sessions: set[str] = set()
        self.closed_roots = ClosedRoots(self.call)

    async def call(self, session: str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.used_sessions.add(session)
        return await self.cdp.call(method, params, session_id=session)

    async def take(self) -> dict[str, Any]:
        await self.tracker.prepare()
        try:
            return await self._take()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await each(self._release, [sid for sid in self.used_sessions if sid in self.tracker.sessions])

    async def _release(self, sid: str) -> None:
        await self.cdp.call("Runtime.releaseObjectGroup", {"objectGroup": GROUP}, session_id=sid)

    async def _tree(self, sid: str) -> dict[str, Any]:
        return await self.call(sid, "Page.getFrameTree")

    async def _frames(self) -> tuple[str, dict[str, _Frame]]:
        tracker = self.tracker
        top_contexts = [fid for (sid, fid) in tracker.contexts if sid == tracker.top]
        if len(tracker.sessions) == 1 and len(top_contexts) == 1:
            # One document, nothing to place: skip the frame tree.
            return top_contexts[0], {top_contexts[0]: _Frame(top_contexts[0], tracker.top, None, "")}
        sids = list(tracker.sessions)
        trees = await each(self._tree, sids)
        frames: dict[str, _Frame] = {}
        top_id = ""
        for sid, tree in zip(sids, trees, strict=True):
            if isinstance(tree, Exception):
                if sid == tracker.top:
                    raise tree
                continue
            stack = [tree["frameTree"]]
            while stack:
                node = stack.pop()
                info = node["frame"]
                frames[info["id"]] = _Frame(info["id"], sid, info.get("parentId"), info.get("url", "")[:2048])
                stack.extend(node.get("childFrames", ()))
            if sid == tracker.top:
                top_id = tree["frameTree"]["frame"]["id"]
        for f in frames.values():
            if f.parent in frames:
                frames[f.parent].children.append(f.id)
        return top_id, frames

    async def _take(self) -> dict[str, Any]:
        top_id, frames = await self._frames()
        if self.closed_shadow == "all":
            roots = {f.session: f.id for f in frames.values()
                     if f.parent not in frames or frames[f.parent or ""].session != f.session}
            for session, found in zip(roots, await each(self.closed_roots.in_session, list(roots)),
                                      strict=True):
                if isinstance(found, Exception):
                    # Not a silent gap: the session's frames are not read this time (an error
                    # that lowers confidence, or fails the snapshot for the page's own session).
                    self.closed_failed[session] = f"its closed shadow roots could not be looked up ({_brief(found)})"
                else:
                    self.closed_nodes.update(found)
        async with anyio.create_task_group() as tg:
            for f in frames.values():
                tg.start_soon(self._read, f)
                if f.id != top_id:
                    tg.start_soon(self._locate, f, frames)
        top = frames[top_id]
        if top.raw is None:
            raise BrowserError(f"the page could not be snapshotted: {top.error}")
        self._place(top, frames)
        return await self._merge(top, frames)

    async def _read(self, f: _Frame) -> None:
        ctx = self.tracker.contexts.get((f.session, f.id))
        if ctx is None:
            f.error = "no document to read (navigating or detached)"
            return
        if f.session in self.closed_failed:
            f.error = self.closed_failed[f.session]
            return
        try:
            if self.closed_shadow == "all":
                closed = await self.closed_roots.resolve(f.session, ctx, self.closed_nodes.get(f.id, []))
            elif self.closed_shadow == "custom-elements":
                closed = await self.closed_roots.on_custom_elements(f.session, ctx)
            else:
                closed = []
            reply = await self.call(f.session, "Runtime.callFunctionOn", {
                "functionDeclaration": self.wrapped, "executionContextId": ctx, "returnByValue": True,
                "arguments": [{"value": self.options}, *({"objectId": o} for o in closed)]})
        except (BrowserError, KeyError, TypeError, ValueError) as exc:
            f.error = _brief(exc)
            return
        if "exceptionDetails" in reply:
            details = reply["exceptionDetails"]
            f.error = str(details.get("exception", {}).get("description") or details.get("text", "error"))
            f.error = f.error.splitlines()[0][:200]
            return
        try:
            f.raw = json.loads(reply["result"]["value"])
        except (KeyError, TypeError, ValueError) as exc:
            f.error = f"unreadable answer ({_brief(exc)})"

    async def _locate(self, f: _Frame, frames: dict[str, _Frame]) -> None:
        parent = frames.get(f.parent or "")
        if parent is None:
            f.error = "its parent frame is gone"
            return
        ctx = self.tracker.contexts.get((parent.session, parent.id))
        if ctx is None:
            f.error = "its parent frame has no document"
            return
        try:
            owner = await self.call(parent.session, "DOM.getFrameOwner", {"frameId": f.id})
            node = await self.call(parent.session, "DOM.resolveNode", {
                "backendNodeId": owner["backendNodeId"], "executionContextId": ctx, "objectGroup": GROUP})
            object_id = node["object"]["objectId"]
            info = await self.call(parent.session, "Runtime.callFunctionOn", {
                "functionDeclaration": OWNER_INFO, "objectId": object_id, "returnByValue": True})
        except (BrowserError, KeyError, TypeError) as exc:
            f.error = f"detached ({_brief(exc)})"
            return
        f.owner, f.owner_object = info["result"]["value"], object_id

    def _place(self, top: _Frame, frames: dict[str, _Frame]) -> None:
        assert top.raw is not None
        vw, vh = top.raw["viewport"]["width"], top.raw["viewport"]["height"]
        top.clip, top.placed = (0.0, 0.0, float(vw), float(vh)), True
        stack = [top]
        while stack:
            parent = stack.pop()
            for cid in parent.children:
                child = frames[cid]
                if child.owner is None:
                    child.error = child.error or "its owner element could not be found"
                    continue
                o = child.owner
                child.offset = (parent.offset[0] + o["x"], parent.offset[1] + o["y"])
                box = (child.offset[0], child.offset[1], child.offset[0] + o["width"], child.offset[1] + o["height"])
                child.clip = _intersect(parent.clip, box)
                child.shown = parent.shown and bool(o["shown"])
                seg = _segment(o)
                child.path = f"{parent.path}/{seg}" if parent.path else seg
                child.placed = True
                stack.append(child)

    async def _merge(self, top: _Frame, frames: dict[str, _Frame]) -> dict[str, Any]:
        assert top.raw is not None
        order: list[_Frame] = []
        stack = [top]
        while stack:  # top first, then frames depth-first in owner order
            f = stack.pop()
            order.append(f)
            kids = [frames[c] for c in f.children if frames[c].placed]
            kids.sort(key=lambda k: (k.owner or {}).get("index", 0))
            stack.extend(reversed(kids))
        sx, sy = top.raw["scroll"]["x"], top.raw["scroll"]["y"]
        elements: list[dict[str, Any]] = []
        checks: dict[tuple[str, str], list[tuple[dict[str, Any], tuple[float, float]]]] = {}
        diagnostics: list[dict[str, Any]] = []
        quiet = top.raw["quiet_ms"]
        nodes = 0
        truncated = False
        limit = int(self.options.get("maxElements", 5000))
        for f in order:
            diag: dict[str, Any] = {"path": f.path, "url": f.raw["url"] if f.raw else f.url,
                                    "out_of_process": f.session != self.tracker.top}
            if f is not top and f.id in self.tracker.loading:
                diag["navigating"] = True
            if f.raw is None:
                diag["error"] = f.error or "not read"
                diagnostics.append(diag)
                continue
            raw = f.raw
            diag.update(ready_state=raw["ready_state"], quiet_ms=raw["quiet_ms"],
                        element_count=raw["element_count"])
            diagnostics.append(diag)
            nodes += raw["node_count"]
            truncated = truncated or raw["truncated"]
            if raw["quiet_ms"] < raw["observed_ms"]:  # a mutation was seen in this frame
                quiet = min(quiet, raw["quiet_ms"])
            fx, fy = raw["scroll"]["x"], raw["scroll"]["y"]
            for e in raw["elements"]:
                if len(elements) >= limit:
                    truncated = True
                    break
                if f is not top:
                    b = e["bbox"]
                    left, top_y = b["x"] - fx + f.offset[0], b["y"] - fy + f.offset[1]
                    e["bbox"] = {"x": round(left + sx), "y": round(top_y + sy),
                                 "width": b["width"], "height": b["height"]}
                    seen = _intersect((left, top_y, left + b["width"], top_y + b["height"]), f.clip)
                    in_view = bool(e.get("in_viewport")) and seen[2] > seen[0] and seen[3] > seen[1]
                    _set(e, "in_viewport", in_view)
                    _set(e, "visible", bool(e.get("visible")) and f.shown)
                    e["frame"], e["frame_url"] = f.path, raw["url"]
                    if in_view and e.get("visible") and not e.get("is_occluded") \
                            and self.options.get("occlusion", True):
                        centre = ((seen[0] + seen[2]) / 2, (seen[1] + seen[3]) / 2)
                        self._queue_hits(f, frames, e, centre, checks)
                e["index"] = len(elements)
                elements.append(e)
        for f in frames.values():
            if not f.placed:  # read or not, a frame that cannot be placed is not shown
                diagnostics.append({"path": f.path, "url": f.raw["url"] if f.raw else f.url,
                                    "out_of_process": f.session != self.tracker.top,
                                    "error": f.error or "its parent frame could not be placed"})
        await self._hit_test(checks)
        return {**top.raw, "node_count": nodes, "quiet_ms": quiet, "element_count": len(elements),
                "truncated": truncated, "elements": elements, "frames": diagnostics}

    def _queue_hits(self, f: _Frame, frames: dict[str, _Frame], element: dict[str, Any],
                    centre: tuple[float, float],
                    checks: dict[tuple[str, str], list[tuple[dict[str, Any], tuple[float, float]]]]) -> None:
        # The frame's owner lives in its parent's document, whose viewport starts at the
        # parent's offset; every ancestor owner must be what is on top there.
        child = f
        while child.parent is not None and child.owner_object is not None:
            parent = frames[child.parent]
            point = (centre[0] - parent.offset[0], centre[1] - parent.offset[1])
            checks.setdefault((parent.session, child.owner_object), []).append((element, point))
            child = parent

    async def _hit_test(self, checks: dict[tuple[str, str], list[tuple[dict[str, Any], tuple[float, float]]]]
                        ) -> None:
        keys = list(checks)

        async def test(key: tuple[str, str]) -> list[Any]:
            points = [[round(x, 2), round(y, 2)] for _, (x, y) in checks[key]]
            reply = await self.call(key[0], "Runtime.callFunctionOn", {
                "functionDeclaration": OWNER_HITS, "objectId": key[1], "returnByValue": True,
                "arguments": [{"value": points}]})
            value: list[Any] = reply.get("result", {}).get("value") or []
            return value

        for key, hits in zip(keys, await each(test, keys), strict=True):
            if isinstance(hits, Exception):
                continue  # the owner went away: the frame is already marked by its own read
            for (element, _), hit in zip(checks[key], hits, strict=False):
                if hit is not None and not element.get("is_occluded"):
                    element["is_occluded"], element["occluded_by"] = True, hit


def _set(element: dict[str, Any], key: str, value: bool) -> None:
    # The page leaves out fields at their default (false); keep it that way.
    if value:
        element[key] = True
    else:
        element.pop(key, None)


async def frame_texts(cdp: CDPConnection, tracker: FrameTracker) -> list[str]:
    """The visible text (`innerText`) of every readable frame's body, the page's own first."""
    await tracker.prepare()
    keys = sorted(tracker.contexts, key=lambda k: k[0] != tracker.top)

    async def text(key: tuple[str, str]) -> str:
        reply = await cdp.call("Runtime.callFunctionOn", {
            "functionDeclaration": TEXT_OF_FRAME, "executionContextId": tracker.contexts[key],
            "returnByValue": True}, session_id=key[0])
        return str(reply.get("result", {}).get("value") or "")

    return [t for t in await each(text, keys) if isinstance(t, str)]


# CLOSED_SHADOW_MODES, QUIET_OBSERVER, ClosedShadow, FrameTracker, closed_in_capture and each
# moved below (shadow.py, scripts.py, sessions.py, cdp.py) and are still importable from here.
__all__ = ["CLOSED_SHADOW_MODES", "ELEMENT_DEFAULTS", "QUIET_OBSERVER", "ClosedShadow", "FrameSnapshot",
           "FrameTracker", "closed_in_capture", "each", "expand_snapshot", "frame_texts"]
