"""Snapshots that see the whole page: every frame, in process or not, and closed shadow roots.

`FrameTracker` follows one page's CDP sessions: the page's own, and one per
out-of-process frame (attached with `Target.setAutoAttach {flatten: true}`,
recursively), with each frame's main-world execution context, the frames
that are loading, and the sessions that went away.

`snapshot_page` runs runtime_js/snapshot.js in every frame's context (all at
once), then places each frame on the page: the frame's owner element (found
with `DOM.getFrameOwner` in the parent's session) gives the offset and the
clip of its content box, its path (`checkout/card`) and whether it is shown.
Elements in frames get page coordinates, `in_viewport` against the frame's
visible part, and `is_occluded` when something in an ancestor document covers
the frame at the element's centre (one hit test per owner, batched).
A frame that cannot be read (detached, navigating, no document yet) is listed
in the snapshot's `frames` with an `error`, which lowers its confidence
instead of failing it. Closed shadow roots are found through CDP and handed
to the page walk as arguments (page script still cannot reach them): by
default (`closed_shadow="all"`) on any host, from one bulk
`DOMSnapshot.captureSnapshot` per renderer session (see `closed_in_capture`);
with `"custom-elements"` only on custom elements without an open root
(`DOM.describeNode {pierce}` on each); with `"off"` not at all.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import anyio

from fabric_jev.protocol import runtime_js

from .cdp import CDPConnection
from .errors import BrowserError, CDPError

T = TypeVar("T")
X = TypeVar("X")
#: Which closed shadow roots a snapshot looks up through CDP (see docs/browser.md).
ClosedShadow = Literal["all", "custom-elements", "off"]
CLOSED_SHADOW_MODES: tuple[ClosedShadow, ...] = ("all", "custom-elements", "off")

#: The elements that can host a shadow root besides custom elements (the DOM standard's
#: list for attachShadow and declarative shadow roots).
SHADOW_HOST_TAGS = frozenset({
    "article", "aside", "blockquote", "body", "div", "footer", "h1", "h2", "h3", "h4", "h5", "h6",
    "header", "main", "nav", "p", "section", "span"})
#: Above this many possible hosts inside one session's closed trees, their nested closed
#: roots are read from each outermost closed tree's host in one DOM.describeNode call
#: instead of one call per possible host.
NESTED_CANDIDATES_PER_CALL = 16
#: Remote objects made for one snapshot live in this group and are released after it.
GROUP = "fabric-jev-snapshot"


def _scripts(text: str) -> dict[str, str]:
    """runtime_js/frames.js by section: each `//# name` line starts one script, whose
    leading comment lines are left out (a function declaration must start the text)."""
    parts = re.split(r"^//# (\w+)\n", text, flags=re.MULTILINE)
    return {name: "\n".join(itertools.dropwhile(lambda line: line.startswith("//"),
                                                 body.strip().splitlines()))
            for name, body in zip(parts[1::2], parts[2::2], strict=True)}


_SCRIPTS = _scripts(runtime_js("frames.js"))
#: Installed at document start in every frame the tracker sets up (the DOM's quiet period).
QUIET_OBSERVER = _SCRIPTS["quietObserver"]
CLOSED_HOST_CANDIDATES = _SCRIPTS["closedHostCandidates"]
OWNER_INFO = _SCRIPTS["ownerInfo"]
OWNER_HITS = _SCRIPTS["ownerHits"]
TEXT_OF_FRAME = _SCRIPTS["textOfFrame"]


def closed_in_capture(capture: dict[str, Any]) -> tuple[dict[str, list[int]], dict[str, list[int]],
                                                         dict[str, list[int]]]:
    """Closed shadow roots in a `DOMSnapshot.captureSnapshot` reply, by frame id.

    The capture is the flat tree: a shadow root is not a node of its own, its
    children hang under the host and carry the type of the shadow tree they are
    in (`shadowRootType`). A node in a closed tree whose parent is not in one
    starts a closed root (any host: a custom element, a `<div>`, a declarative
    root); the first such node per parent is returned, and its root node is
    the root. A closed tree directly inside another closed tree looks like its
    parent's own content, so the elements inside closed trees that could host
    a shadow root (custom elements and the DOM standard's host tags) with
    children are returned too, as are the outermost closed trees' hosts, for a
    closer look with DOM.describeNode.

    Returns (nodes leading to roots, possible nested hosts, outermost hosts).
    """
    strings: list[str] = capture.get("strings", [])
    try:
        closed = strings.index("closed")
    except ValueError:
        return {}, {}, {}
    found: dict[str, list[int]] = {}
    nested: dict[str, list[int]] = {}
    outer: dict[str, list[int]] = {}
    for doc in capture.get("documents", ()):
        nodes = doc["nodes"]
        rare = nodes.get("shadowRootType") or {}
        in_closed = {i for i, v in zip(rare.get("index", ()), rare.get("value", ()), strict=False) if v == closed}
        if not in_closed:
            continue
        frame = strings[doc["frameId"]]
        parents, backend, names = nodes["parentIndex"], nodes["backendNodeId"], nodes["nodeName"]
        types = nodes["nodeType"]
        starts: dict[int, int] = {}
        has_children: set[int] = set()
        for i in sorted(in_closed):
            parent = parents[i]
            if parent in in_closed:
                has_children.add(parent)
            elif parent >= 0 and parent not in starts:
                starts[parent] = backend[i]
        found[frame] = list(starts.values())
        outer[frame] = [backend[p] for p in starts]
        hosts = [backend[i] for i in sorted(has_children)
                 if types[i] == 1 and _may_host(strings[names[i]].lower())]
        if hosts:
            nested[frame] = hosts
    return found, nested, outer


def _may_host(tag: str) -> bool:
    return tag in SHADOW_HOST_TAGS or "-" in tag


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
            for session, found in zip(roots, await each(self._closed_in_session, list(roots.items())),
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
                closed = await self._resolve_all(f.session, ctx, self.closed_nodes.get(f.id, []))
            elif self.closed_shadow == "custom-elements":
                closed = await self._closed_roots(f.session, ctx)
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

    async def _closed_in_session(self, root: tuple[str, str]) -> dict[str, list[int]]:
        """Every closed shadow root in one renderer session's documents, by frame: one
        DOMSnapshot.captureSnapshot, plus a look at the possible hosts inside closed trees."""
        session, _frame_id = root
        capture = await self.call(session, "DOMSnapshot.captureSnapshot", {"computedStyles": []})
        found, nested, outer_hosts = closed_in_capture(capture)
        if nested:
            per_host = sum(map(len, nested.values())) <= NESTED_CANDIDATES_PER_CALL
            for got in await each(self._nested_roots, [
                    (session, frame, node, per_host)
                    for frame, nodes in (nested if per_host else outer_hosts).items() for node in nodes]):
                if isinstance(got, Exception):
                    raise got
                for frame, roots in got.items():
                    found.setdefault(frame, []).extend(roots)
        return found

    async def _nested_roots(self, job: tuple[str, str, int, bool]) -> dict[str, list[int]]:
        """Closed roots at or below one node (its own only, or its whole subtree)."""
        session, frame, node, own_only = job
        described = (await self.call(session, "DOM.describeNode", {
            "backendNodeId": node, "depth": 0 if own_only else -1, "pierce": True}))["node"]
        roots: list[int] = []
        stack = [described]
        while stack:
            item = stack.pop()
            for shadow in item.get("shadowRoots", ()):
                if shadow.get("shadowRootType") == "closed":
                    roots.append(shadow["backendNodeId"])
                stack.append(shadow)
            stack.extend(item.get("children", ()))
            # A frame's own document is read in its own context, from its own capture.
        return {frame: roots}

    async def _resolve_all(self, session: str, ctx: int, nodes: list[int]) -> list[str]:
        async def resolve(node: int) -> str:
            reply = await self.call(session, "DOM.resolveNode", {
                "backendNodeId": node, "executionContextId": ctx, "objectGroup": GROUP})
            return str(reply["object"]["objectId"])

        out = []
        for got in await each(resolve, nodes):
            if isinstance(got, Exception):
                raise got
            out.append(got)
        return out

    async def _closed_roots(self, session: str, ctx: int) -> list[str]:
        found = await self.call(session, "Runtime.callFunctionOn", {
            "functionDeclaration": CLOSED_HOST_CANDIDATES, "executionContextId": ctx, "objectGroup": GROUP})
        result = found.get("result", {})
        if not result.get("objectId") or result.get("description") == "Array(0)":
            return []
        props = await self.call(session, "Runtime.getProperties",
                                {"objectId": result["objectId"], "ownProperties": True})
        hosts = [p["value"]["objectId"] for p in props.get("result", ())
                 if p.get("name", "").isdigit() and p.get("value", {}).get("objectId")]

        async def roots_of(host: str) -> list[str]:
            node = (await self.call(session, "DOM.describeNode",
                                    {"objectId": host, "depth": 0, "pierce": True}))["node"]
            out = []
            for root in node.get("shadowRoots", ()):
                if root.get("shadowRootType") == "closed":
                    resolved = await self.call(session, "DOM.resolveNode", {
                        "backendNodeId": root["backendNodeId"], "executionContextId": ctx, "objectGroup": GROUP})
                    out.append(resolved["object"]["objectId"])
            return out

        roots: list[str] = []
        for got in await each(roots_of, hosts):
            if isinstance(got, Exception):
                raise got
            roots.extend(got)
        return roots

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


__all__ = ["CLOSED_SHADOW_MODES", "QUIET_OBSERVER", "ClosedShadow", "FrameSnapshot", "FrameTracker",
           "closed_in_capture", "each", "frame_texts"]
