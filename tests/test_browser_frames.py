"""Snapshots across frames (same-origin, cross-origin, out-of-process, nested), read-only and
editable fields, closed shadow roots, and frames that detach or navigate — in real Chromium."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import pytest
from fabric_jev_browser import Page
from fabric_jev_browser.checks import PageSource
from fabric_jev_browser.verification import BrowserChannels

from fabric_jev.assertions import Snapshot, added, check, confidence, exists, where
from fabric_jev.assertions.snapshot import QUIET_SETTLED_MS
from fabric_jev.verification.dictionary import SeeOptions
from tests.browser_support import Pages

pytestmark = [pytest.mark.anyio, pytest.mark.browser]

T = TypeVar("T")
RESET = "<style>body{margin:0} .at{position:absolute;left:10px;top:20px}</style>"


def frame(src: str, ident: str, left: int, top: int, width: int = 300, height: int = 200,
          extra: str = "") -> str:
    return (f"<iframe {ident} {src} style='position:absolute;left:{left}px;top:{top}px;"
            f"width:{width}px;height:{height}px;border:0;{extra}'></iframe>")


def by_name(snap: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in snap["elements"]}


async def after_events(page: Page, ready: Callable[[], Awaitable[T | None]],
                       at_most: Callable[[], float] = lambda: math.inf) -> T:
    """`ready()`'s first non-None answer, asked again only after the browser reports an event
    (or after `at_most()` seconds, for a condition that time alone brings about).

    Frames attach, load and lay out after the top document, each step announced by a protocol
    event (attach, context created, frame stopped loading, ...). The wake-up is armed before each
    look, so an event during the look is not missed; no polling timer decides when to look again.
    """
    woken = [anyio.Event()]

    def wake(_msg: dict[str, Any]) -> None:
        woken[0].set()

    remove = page.cdp.on("*", wake)
    try:
        with anyio.fail_after(10):
            while True:
                woken[0] = anyio.Event()
                found = await ready()
                if found is not None:
                    return found
                with anyio.move_on_after(at_most()):
                    await woken[0].wait()
    finally:
        remove()


async def settled(page: Page, *names: str, **options: Any) -> dict[str, Any]:
    """Snapshot once every named element is there (frames load after the top document)."""
    async def look() -> dict[str, Any] | None:
        snap = await page.snapshot(**options)
        return snap if set(names) <= set(by_name(snap)) else None

    return await after_events(page, look)


async def test_same_origin_srcdoc_and_src_frames(page: Page, pages: Pages) -> None:
    pages.add("/frames/help", f"{RESET}<a class=at href='#x'>Help</a>")
    url = pages.add("/frames/same", RESET + "<button class=at>Top</button>"
                    + frame("srcdoc=\"<style>body{margin:0}</style><button style='margin:5px'>Pay</button>\"",
                            "id=checkout", 100, 200)
                    + frame("src='/frames/help'", "name=help", 500, 50))
    await page.navigate(url)
    snap = await settled(page, "Top", "Pay", "Help")
    els = by_name(snap)
    assert els["Top"]["frame"] == "" and els["Top"]["bbox"]["x"] == 10
    pay, helper = els["Pay"], els["Help"]
    assert pay["frame"] == "checkout" and pay["frame_url"] == "about:srcdoc"
    assert (pay["bbox"]["x"], pay["bbox"]["y"]) == (105, 205)  # owner box + margin: page coordinates
    assert helper["frame"] == "help" and helper["frame_url"].endswith("/frames/help")
    assert (helper["bbox"]["x"], helper["bbox"]["y"]) == (510, 70)
    assert pay["visible"] and pay["in_viewport"] and not pay["is_occluded"]
    assert [f["path"] for f in snap["frames"]] == ["", "checkout", "help"]
    assert not any(f.get("error") for f in snap["frames"])
    # Scoped queries, both forms.
    parsed = Snapshot.parse(snap)
    assert [e.name for e in where(frame__contains="checkout").select(parsed.elements)] == ["Pay"]
    assert (await check(exists('frame~"help" name=Help'), "help link").once(PageSource(page))).passed


async def test_cross_origin_and_out_of_process_frames(page: Page, pages: Pages, other_pages: Pages) -> None:
    other_pages.add("/x/pay", f"{RESET}<button class=at>Card</button>")
    other_pages.add("/x/oop", f"{RESET}<button class=at>Remote</button>")
    port = other_pages.port
    url = pages.add("/frames/cross", RESET
                    + frame(f"src='http://127.0.0.1:{port}/x/pay'", "id=card", 100, 100)
                    + frame(f"src='http://localhost:{port}/x/oop'", "title=remote", 500, 300))
    await page.navigate(url)
    snap = await settled(page, "Card", "Remote")
    targets = (await page.cdp.call("Target.getTargets"))["targetInfos"]
    assert any(t["type"] == "iframe" and t["url"] == f"http://localhost:{port}/x/oop" for t in targets)
    els = by_name(snap)
    assert (els["Card"]["bbox"]["x"], els["Card"]["bbox"]["y"], els["Card"]["frame"]) == (110, 120, "card")
    assert (els["Remote"]["bbox"]["x"], els["Remote"]["bbox"]["y"], els["Remote"]["frame"]) == (510, 320, "remote")
    diag = {f["path"]: f for f in snap["frames"]}
    assert diag["remote"]["out_of_process"] and not diag["card"]["out_of_process"]


async def test_nested_frames_compose_offsets_and_paths(page: Page, pages: Pages, other_pages: Pages) -> None:
    port = other_pages.port
    other_pages.add("/x/deep", f"{RESET}<button class=at>Deep</button>")
    other_pages.add("/x/inner", RESET + "<button>Inner</button>"
                    + frame("src='/x/deep'", "id=deep", 30, 40, 200, 100))
    pages.add("/frames/outer", RESET + frame(f"src='http://localhost:{port}/x/inner'", "name=inner", 50, 60))
    url = pages.add("/frames/nested", RESET + frame("src='/frames/outer'", "id=outer", 100, 100, 500, 400))
    await page.navigate(url)
    snap = await settled(page, "Inner", "Deep")
    deep = by_name(snap)["Deep"]
    assert deep["frame"] == "outer/inner/deep"
    assert (deep["bbox"]["x"], deep["bbox"]["y"]) == (100 + 50 + 30 + 10, 100 + 60 + 40 + 20)
    assert deep["frame_url"] == f"http://localhost:{port}/x/deep"


async def test_frame_clipping_scrolling_and_covering(page: Page, pages: Pages) -> None:
    inner = ("<style>body{margin:0}</style><button style='position:absolute;left:0;top:0'>Shown</button>"
             "<button style='position:absolute;left:0;top:500px'>Below frame</button>")
    url = pages.add("/frames/clip", RESET
                    + frame(f"srcdoc=\"{inner}\"", "id=small", 100, 100, 200, 100)
                    + frame("srcdoc=\"<button>Under</button>\"", "id=under", 400, 100)
                    + "<div id=cover style='position:absolute;left:400px;top:100px;width:300px;height:200px;"
                      "background:white'></div>"
                    + frame("srcdoc=\"<button>Hidden</button>\"", "id=hid", 100, 300, extra="visibility:hidden"))
    await page.navigate(url)
    els = by_name(await settled(page, "Shown", "Below frame", "Under", "Hidden"))
    assert els["Shown"]["in_viewport"] and not els["Shown"]["is_occluded"]
    assert not els["Below frame"]["in_viewport"]  # inside the frame's document, outside its box
    assert els["Under"]["is_occluded"] and els["Under"]["occluded_by"] == "div#cover"
    assert not els["Hidden"]["visible"]
    result = await check(exists("name=Under"), "under").once(PageSource(page))
    assert result.reason == "match_occluded"


async def test_not_see_and_see_look_inside_frames(page: Page, pages: Pages, other_pages: Pages) -> None:
    other_pages.add("/x/consent", f"{RESET}<button class=at>Accept cookies</button><p>We use cookies</p>")
    url = pages.add("/frames/consent", RESET + frame(
        f"src='http://localhost:{other_pages.port}/x/consent'", "id=consent", 0, 0))
    await page.navigate(url)
    await settled(page, "Accept cookies")
    channels = BrowserChannels(page)
    ok, actual = await channels.not_see("Accept cookies", 100)
    assert not ok and actual.startswith('button "Accept cookies" in frame "consent" was visible')
    seen, _ = await channels.see("Accept cookies", SeeOptions())
    assert seen
    assert "We use cookies" in await channels.text(anyio.Event())


async def test_readonly_and_editable_fields(page: Page, pages: Pages) -> None:
    url = pages.add("/frames/fields", """
      <input aria-label="Plain"><input aria-label="Native ro" readonly>
      <input aria-label="Aria ro" aria-readonly="true"><input aria-label="Off" disabled>
      <textarea aria-label="Notes" readonly></textarea><input type=checkbox aria-label="Box">
      <div contenteditable="true" aria-label="Editor">Hello
        <span role="textbox" contenteditable="false" aria-label="Locked part">fixed</span></div>
      <div role="textbox" aria-label="Not editable div">x</div>""")
    await page.navigate(url)
    els = by_name(await page.snapshot())
    expect = {"Plain": (False, True), "Native ro": (True, False), "Aria ro": (True, False),
              "Off": (False, False), "Notes": (True, False), "Box": (False, False),
              "Editor": (False, True), "Locked part": (True, False), "Not editable div": (False, False)}
    assert {n: (els[n]["readonly"], els[n]["editable"]) for n in expect} == expect
    channels = BrowserChannels(page)
    assert (await channels.see("Plain", SeeOptions(editable=True, timeout_ms=3000)))[0]
    assert (await channels.see("Editor", SeeOptions(editable=True, timeout_ms=3000)))[0]
    # Long enough for a snapshot to finish on a loaded machine: a check that never
    # holds waits out its whole timeout, and one with no finished snapshot says no_snapshot.
    ok, actual = await channels.see("Native ro", SeeOptions(editable=True, timeout_ms=5000))
    assert not ok and "readonly=True" in actual
    assert (await check(exists("readonly=true name=\"Aria ro\""), "ro").once(PageSource(page))).passed


async def test_closed_shadow_roots_are_walked(page: Page, pages: Pages) -> None:
    url = pages.add("/frames/closed", """<secret-box></secret-box><open-box></open-box><script>
      document.querySelector('secret-box').attachShadow({mode: 'closed'}).innerHTML =
        '<button>Inside closed</button><input aria-label="Closed field">';
      document.querySelector('open-box').attachShadow({mode: 'open'}).innerHTML = '<button>Inside open</button>';
      window.leak = document.querySelector('secret-box').shadowRoot;</script>""")
    await page.navigate(url)
    els = by_name(await page.snapshot())
    assert els["Inside closed"]["in_shadow"] and els["Closed field"]["editable"]
    assert els["Inside open"]["in_shadow"]
    assert await page.evaluate("window.leak === null")  # page script still cannot reach it


async def test_a_frame_detached_while_snapshotted_lowers_confidence(page: Page, pages: Pages) -> None:
    # The frame removes itself from its parent the first time the snapshot reads a style in it.
    gone = ("<button>Doomed</button><script>const real = window.getComputedStyle;"
            "window.getComputedStyle = function (el) { if (frameElement) frameElement.remove();"
            " return real.call(window, el); };</script>")
    url = pages.add("/frames/detach", "<button>Stays</button>" + frame(f"srcdoc=\"{gone}\"", "id=doomed", 0, 100))
    await page.navigate(url)
    snap = Snapshot.parse(await page.snapshot())
    assert [e.name for e in snap.elements] == ["Stays"]
    conf = confidence(snap)
    assert conf.value <= 0.5 and any("could not be read" in r for r in conf.reasons), conf


async def test_a_navigating_frame_lowers_confidence_until_it_lands(page: Page, pages: Pages) -> None:
    pages.add("/frames/slow", "<button>Landed</button>")
    pages.add("/frames/first", "<button>Before</button>")
    release = pages.hold("/frames/slow")
    url = pages.add("/frames/nav", "<button>Stays</button>" + frame("src='/frames/first'", "id=moving", 0, 100))
    await page.navigate(url)
    await settled(page, "Before")
    started = anyio.Event()
    remove = page.cdp.on("Page.frameStartedLoading", lambda _m: started.set(), session_id=page.session_id)
    try:
        await page.evaluate("document.getElementById('moving').src = '/frames/slow'")
        with anyio.fail_after(10):
            await started.wait()
        snap = Snapshot.parse(await page.snapshot())
        assert "Stays" in {e.name for e in snap.elements}
        conf = confidence(snap)
        assert conf.value <= 0.5 and "frame moving is navigating" in conf.reasons
    finally:
        remove()
        release.set()
    seen: list[Snapshot] = []

    async def fully_confident() -> Snapshot | None:
        seen[:] = [Snapshot.parse(await page.snapshot())]
        return seen[0] if "Landed" in {e.name for e in seen[0].elements} and confidence(seen[0]).value == 1 else None

    def quiet_left() -> float:
        # Full confidence also needs the DOM quiet for QUIET_SETTLED_MS, which no event announces.
        quiet = seen[0].quiet_ms
        return (QUIET_SETTLED_MS - quiet) / 1000 if quiet < QUIET_SETTLED_MS else math.inf

    landed = await after_events(page, fully_confident, quiet_left)
    assert landed.frames[1]["path"] == "moving"


async def test_diff_predicates_inside_eventually(page: Page, pages: Pages) -> None:
    url = pages.add("/frames/diff", """<button id=add onclick="setTimeout(() => {
        const b = document.createElement('button'); b.textContent = 'Row ' + (document.querySelectorAll('.row').length + 1);
        b.className = 'row'; document.body.appendChild(b); }, 100)">Add</button><button class=row>Row 1</button>""")
    await page.navigate(url)
    source = PageSource(page)
    assert source.baseline is None  # nothing happened through the page since the source was made
    snap = await page.snapshot()
    await page.click(by_name(snap)["Add"])  # the source snapshots the page just before the click
    result = await check(added('name="Row 2"'), "a row appears").eventually(source, timeout=5, poll=0.05)
    assert result.passed, result.message()
    assert source.baseline is not None and "Row 2" not in {e.name for e in source.baseline.elements}
    source.forget()
    missing = await check(added('name="Row 2"'), "no baseline").once(source)
    assert missing.reason == "no_baseline"
    source.close()


async def test_a_frame_inside_a_closed_shadow_root(page: Page, pages: Pages) -> None:
    url = pages.add("/frames/closed-frame", """<frame-box></frame-box><script>
      document.querySelector('frame-box').attachShadow({mode: 'closed'}).innerHTML =
        '<iframe id="boxed" style="border:0;width:300px;height:100px" srcdoc="<button>In a boxed frame</button>">'
        + '</iframe>';</script>""")
    await page.navigate(url)
    boxed = by_name(await settled(page, "In a boxed frame"))["In a boxed frame"]
    assert boxed["frame"] == "boxed" and boxed["in_viewport"] and not boxed["is_occluded"]


CLOSED_EVERYWHERE = """<div id=plain></div>
<section><template shadowrootmode="closed"><button>Declarative</button></template><span>light</span></section>
<open-box></open-box><iframe id=f srcdoc="<p id=q></p><script>
  q.attachShadow({mode: 'closed'}).innerHTML = '<button>Framed closed</button>';</script>"></iframe><script>
  const outer = document.getElementById('plain').attachShadow({mode: 'closed'});
  outer.innerHTML = '<button>On a div</button><inner-box></inner-box><span id=s></span>';
  outer.querySelector('inner-box').attachShadow({mode: 'closed'}).innerHTML = '<button>Nested</button>';
  outer.getElementById('s').attachShadow({mode: 'closed'}).innerHTML = '<button>Nested on a span</button>';
  const open = document.querySelector('open-box').attachShadow({mode: 'open'});
  open.innerHTML = '<div id=d></div>';
  open.getElementById('d').attachShadow({mode: 'closed'}).innerHTML = '<button>Closed in open</button>';
  window.leak = document.getElementById('plain').shadowRoot;
  </script>"""
BUILT_IN = {"On a div", "Declarative", "Nested on a span", "Closed in open", "Framed closed"}


async def test_closed_roots_on_any_host_are_found_by_default(page: Page, pages: Pages, other_pages: Pages) -> None:
    port = other_pages.port
    other_pages.add("/x/closed", "<div id=r></div><script>document.getElementById('r')"
                    ".attachShadow({mode: 'closed'}).innerHTML = '<button>Remote closed</button>';</script>")
    url = pages.add("/frames/closed-all", CLOSED_EVERYWHERE + frame(
        f"src='http://localhost:{port}/x/closed'", "id=remote", 0, 400))
    await page.navigate(url)
    names = BUILT_IN | {"Nested", "Remote closed"}
    everything = by_name(await settled(page, *names))
    assert all(everything[n]["in_shadow"] and everything[n]["visible"] for n in names)
    assert everything["Framed closed"]["frame"] == "f" and everything["Remote closed"]["frame"] == "remote"
    assert "light" not in everything  # an unslotted light child of a shadow host is not rendered
    assert await page.evaluate("window.leak === null")  # page script still cannot reach them
    # The cheaper modes: custom-elements finds the closed root on <inner-box> only when it is
    # reachable without entering another closed root, so here none at all; off finds none.
    cheap = set(by_name(await page.snapshot(closed_shadow="custom-elements")))
    assert not names & cheap
    assert not names & set(by_name(await page.snapshot(closed_shadow="off")))


async def test_many_possible_hosts_inside_a_closed_root_are_looked_at_in_one_call(page: Page, pages: Pages) -> None:
    # More divs inside a closed tree than NESTED_CANDIDATES_PER_CALL: the outer host's subtree is
    # described once instead of each div; the nested closed root among them is still found.
    divs = "".join(f"<div><span>row {i}</span></div>" for i in range(40))
    url = pages.add("/frames/closed-many", f"""<div id=h></div><script>
      const root = document.getElementById('h').attachShadow({{mode: 'closed'}});
      root.innerHTML = '{divs}<div id=deep></div><button>Outer</button>';
      root.getElementById('deep').attachShadow({{mode: 'closed'}}).innerHTML = '<button>Deep</button>';
      </script>""")
    await page.navigate(url)
    calls: list[str] = []
    real = page.cdp.call

    async def counting(method: str, *args: Any, **kw: Any) -> Any:
        calls.append(method)
        return await real(method, *args, **kw)

    page.cdp.call = counting  # type: ignore[method-assign]
    try:
        els = by_name(await page.snapshot())
    finally:
        page.cdp.call = real  # type: ignore[method-assign]
    assert {"Outer", "Deep"} <= set(els)
    assert calls.count("DOMSnapshot.captureSnapshot") == 1 and calls.count("DOM.describeNode") == 1


def test_closed_in_capture_reads_the_flat_tree() -> None:
    from fabric_jev_browser.shadow import closed_in_capture

    # document > body > div#host (closed: li > text) > ... ; a span inside with a nested closed root.
    strings = ["F1", "closed", "open", "#document", "BODY", "DIV", "LI", "#text", "SPAN", "B", "X-Y"]
    capture = {"strings": strings, "documents": [{"frameId": 0, "nodes": {
        "parentIndex": [-1, 0, 1, 2, 3, 2, 5, 6, 1, 8],
        "nodeType": [9, 1, 1, 1, 3, 1, 1, 3, 1, 1],
        "nodeName": [3, 4, 5, 6, 7, 8, 9, 7, 10, 9],
        "backendNodeId": [10, 11, 12, 13, 14, 15, 16, 17, 18, 19],
        # li, text, span, b, text in a closed tree; the x-y's child in an open one.
        "shadowRootType": {"index": [3, 4, 5, 6, 7, 9], "value": [1, 1, 1, 1, 1, 2]},
    }}]}
    found, nested, outer = closed_in_capture(capture)
    assert found == {"F1": [13]}  # the first node in the closed tree under div#host
    assert outer == {"F1": [12]}  # that tree's host
    assert nested == {"F1": [15]}  # the span has closed children: maybe a nested closed root
    assert closed_in_capture({"strings": ["F1", "open"], "documents": []}) == ({}, {}, {})

async def test_a_failed_closed_root_lookup_is_not_a_silent_gap(page: Page, pages: Pages, other_pages: Pages) -> None:
    from fabric_jev_browser import BrowserError
    from fabric_jev_browser.errors import CDPError

    other_pages.add("/x/plain", "<button>Remote</button>")
    url = pages.add("/frames/lookup", "<button>Top</button>" + frame(
        f"src='http://localhost:{other_pages.port}/x/plain'", "id=remote", 0, 100))
    await page.navigate(url)
    await settled(page, "Top", "Remote")
    real = page.cdp.call
    failing: set[str | None] = set()

    async def refusing(method: str, params: Any = None, *, session_id: str | None = None, **kw: Any) -> Any:
        if method == "DOMSnapshot.captureSnapshot" and session_id in failing:
            raise CDPError(method, -32000, "refused for this test")
        return await real(method, params, session_id=session_id, **kw)

    page.cdp.call = refusing  # type: ignore[method-assign]
    try:
        # In a frame's own renderer: that frame is not read, and the snapshot says so.
        failing.update(s for s in page.frames.sessions if s != page.session_id)
        snap = Snapshot.parse(await page.snapshot())
        assert [e.name for e in snap.elements] == ["Top"]
        conf = confidence(snap)
        assert conf.value <= 0.5 and any("closed shadow roots could not be looked up" in r for r in conf.reasons)
        # In the page's own renderer: no snapshot at all rather than one that may miss elements.
        failing.add(page.session_id)
        with pytest.raises(BrowserError, match="closed shadow roots could not be looked up"):
            await page.snapshot()
        assert len(by_name(await page.snapshot(closed_shadow="custom-elements"))) == 2
    finally:
        page.cdp.call = real  # type: ignore[method-assign]
