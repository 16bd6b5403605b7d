"""Closed shadow roots, found through CDP: page script cannot reach them, so the
snapshot hands them to the page walk as arguments.

By default (`closed_shadow="all"`) on any host, from one bulk
`DOMSnapshot.captureSnapshot` per renderer session (`closed_in_capture`, pure,
plus a look at the possible hosts inside closed trees); with
`"custom-elements"` only on custom elements without an open root
(`DOM.describeNode {pierce}` on each); with `"off"` not at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from .cdp import each
from .scripts import CLOSED_HOST_CANDIDATES, GROUP

#: A call in one session: (session id, method, params) -> the result.
SessionCall = Callable[[str, str, dict[str, Any] | None], Awaitable[dict[str, Any]]]
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


class ClosedRoots:
    """The lookups of closed shadow roots, made through `call` (the snapshot's own, which
    notes every session it used so its objects are released)."""

    def __init__(self, call: SessionCall) -> None:
        self.call = call

    async def in_session(self, session: str) -> dict[str, list[int]]:
        """Every closed shadow root in one renderer session's documents, by frame: one
        DOMSnapshot.captureSnapshot, plus a look at the possible hosts inside closed trees."""
        capture = await self.call(session, "DOMSnapshot.captureSnapshot", {"computedStyles": []})
        found, nested, outer_hosts = closed_in_capture(capture)
        if nested:
            per_host = sum(map(len, nested.values())) <= NESTED_CANDIDATES_PER_CALL
            for got in await each(self._nested, [
                    (session, frame, node, per_host)
                    for frame, nodes in (nested if per_host else outer_hosts).items() for node in nodes]):
                if isinstance(got, Exception):
                    raise got
                for frame, roots in got.items():
                    found.setdefault(frame, []).extend(roots)
        return found

    async def _nested(self, job: tuple[str, str, int, bool]) -> dict[str, list[int]]:
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

    async def resolve(self, session: str, ctx: int, nodes: list[int]) -> list[str]:
        """The remote objects of these closed roots (or nodes inside them) in context `ctx`."""
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

    async def on_custom_elements(self, session: str, ctx: int) -> list[str]:
        """The closed roots of custom elements without an open root, as remote objects in `ctx`
        (`closed_shadow="custom-elements"`: one DOM.describeNode per such element)."""
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


__all__ = ["CLOSED_SHADOW_MODES", "ClosedRoots", "ClosedShadow", "SessionCall", "closed_in_capture"]
