"""`fabric-jev bench browser`: our CDP client next to Playwright's connect_over_cdp; snapshots,
with and without frames, with and without closed shadow roots."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from statistics import median as _median
from typing import Any

import anyio


def _rows(n: int, start: int = 0) -> str:
    return "".join(
        f"<li><button data-testid='b{i}'>Action {i}</button><a href='#l{i}'>Link {i}</a>"
        f"<input aria-label='Field {i}' value='v{i}'><label><input type=checkbox> Box {i}</label></li>"
        for i in range(start, start + n // 4))


def _big_page(n: int) -> str:
    return f"<!doctype html><title>big</title><main><ul>{_rows(n)}</ul></main>"


@contextmanager
def _frame_server(n: int) -> Iterator[tuple[str, str]]:
    """The same n elements on one page (`flat`) and split across 4 frames, the last one
    out of process (served as localhost, the page as 127.0.0.1): (flat URL, framed URL)."""
    quarter = n // 4
    docs = {"/flat": _big_page(n)}
    for k in range(4):
        docs[f"/part{k}"] = f"<!doctype html><main><ul>{_rows(quarter, k * quarter)}</ul></main>"
    frames = "".join(
        f"<iframe id='part{k}' src='{'http://localhost:{port}' if k == 3 else ''}/part{k}' "
        f"style='width:600px;height:380px;border:0'></iframe>" for k in range(4))
    docs["/framed"] = f"<!doctype html><title>framed</title><body style='margin:0'>{frames}</body>"

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = docs.get(self.path, "").replace("{port}", str(port)).encode()
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/flat", f"http://127.0.0.1:{port}/framed"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def _frames_browser(ws_url: str, rounds: int, n: int = 2000) -> dict[str, Any]:
    """Snapshot time of n elements on one page vs split across 4 frames, one of them out
    of process; two pages, measured alternately in the same run."""
    from .cdp import CDPConnection
    from .page import Page

    cdp = await CDPConnection.connect(ws_url)
    flat_page = await Page.open(cdp)
    framed_page = await Page.open(cdp)
    try:
        with _frame_server(n) as (flat_url, framed_url):
            await flat_page.navigate(flat_url)
            await framed_page.navigate(framed_url)
            with anyio.fail_after(30):  # the frames load after the page's own load event
                while (await framed_page.snapshot())["element_count"] < n:
                    await anyio.sleep(0.05)
            targets = (await cdp.call("Target.getTargets"))["targetInfos"]
            out_of_process = sum(1 for t in targets if t["type"] == "iframe" and "/part" in t["url"])
            flat, framed = [], []
            counts = (0, 0)
            for _ in range(rounds):
                start = time.perf_counter()
                a = await flat_page.snapshot()
                flat.append((time.perf_counter() - start) * 1000)
                start = time.perf_counter()
                b = await framed_page.snapshot()
                framed.append((time.perf_counter() - start) * 1000)
                counts = (a["element_count"], b["element_count"])
    finally:
        await flat_page.close()
        await framed_page.close()
        await cdp.aclose()
    return {"flat_ms": _median(flat), "framed_ms": _median(framed), "ratio": _median(framed) / _median(flat),
            "flat_elements": counts[0], "framed_elements": counts[1], "frames": 4,
            "out_of_process_frames": out_of_process, "rounds": rounds}


#: The closed-roots page: the 2,000 elements in this many blocks, each the content of a closed
#: shadow root on a <div> (every other one declarative, the rest attached by script).
CLOSED_BLOCKS = 20


def _blocks_page(n: int, closed: bool) -> str:
    """n elements in CLOSED_BLOCKS <div>s: plain, or each div a closed shadow root's host."""
    per = n // CLOSED_BLOCKS
    parts = []
    for k in range(CLOSED_BLOCKS):
        inner = f"<ul>{_rows(per, k * per)}</ul>"
        if not closed:
            parts.append(f"<div>{inner}</div>")
        elif k % 2 == 0:
            parts.append(f"<div><template shadowrootmode=closed>{inner}</template></div>")
        else:
            parts.append(f"<div id=h{k}></div><script>document.getElementById('h{k}')"
                         f".attachShadow({{mode: 'closed'}}).innerHTML = {json.dumps(inner)};</script>")
    return f"<!doctype html><title>blocks</title><main>{''.join(parts)}</main>"


async def _closed_browser(ws_url: str, rounds: int, n: int = 2000) -> dict[str, Any]:
    """Snapshot time of n elements inside closed shadow roots on built-in hosts vs the same
    elements without shadow roots, both with the default closed_shadow ("all"), alternately in
    one run; and the page without roots under the cheaper "custom-elements" mode, the default
    before closed roots were looked up on every host."""
    from .cdp import CDPConnection
    from .page import Page

    cdp = await CDPConnection.connect(ws_url)
    plain_page = await Page.open(cdp)
    closed_page = await Page.open(cdp)
    try:
        await plain_page.navigate("data:text/html," + _blocks_page(n, False).replace("#", "%23"))
        await closed_page.navigate("data:text/html," + _blocks_page(n, True).replace("#", "%23"))
        plain, closed, cheap = [], [], []
        counts = (0, 0, 0)
        for _ in range(rounds):
            start = time.perf_counter()
            a = await plain_page.snapshot()
            plain.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            b = await closed_page.snapshot()
            closed.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            c = await plain_page.snapshot(closed_shadow="custom-elements")
            cheap.append((time.perf_counter() - start) * 1000)
            counts = (a["element_count"], b["element_count"], c["element_count"])
        hidden = (await closed_page.snapshot(closed_shadow="custom-elements"))["element_count"]
    finally:
        await plain_page.close()
        await closed_page.close()
        await cdp.aclose()
    return {"plain_ms": _median(plain), "closed_ms": _median(closed), "custom_elements_ms": _median(cheap),
            "ratio": _median(closed) / _median(plain), "lookup_ratio": _median(plain) / _median(cheap),
            "plain_elements": counts[0], "closed_elements": counts[1], "custom_elements_elements": counts[2],
            "closed_elements_without_lookup": hidden, "closed_roots": CLOSED_BLOCKS, "rounds": rounds}


async def _time_evaluate(evaluate: Callable[[str], Awaitable[Any]], rounds: int,
                         concurrent_calls: int) -> tuple[list[float], float]:
    """(round-trip times in ms, calls per second from 16 concurrent callers) of `evaluate("1+1")`.

    The same driver for our page and Playwright's, so only the clients differ.
    """
    for _ in range(50):  # warm up
        await evaluate("1+1")
    rtt = []
    for _ in range(rounds):
        start = time.perf_counter()
        await evaluate("1+1")
        rtt.append((time.perf_counter() - start) * 1000)

    async def caller() -> None:
        for _ in range(concurrent_calls // 16):
            await evaluate("1+1")

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(16):
            tg.start_soon(caller)
    return rtt, concurrent_calls / (time.perf_counter() - start)


async def _ours_browser(ws_url: str, rounds: int, concurrent_calls: int) -> dict[str, Any]:
    from .cdp import CDPConnection
    from .page import Page

    cdp = await CDPConnection.connect(ws_url)
    page = await Page.open(cdp)
    try:
        rtt, throughput = await _time_evaluate(page.evaluate, rounds, concurrent_calls)
        # Snapshot of a 2,000-element page, occlusion checked for what is in the viewport.
        await page.navigate("data:text/html," + _big_page(2000).replace("#", "%23"))
        snaps = []
        count = 0
        for _ in range(max(5, rounds // 40)):
            start = time.perf_counter()
            snap = await page.snapshot()
            snaps.append((time.perf_counter() - start) * 1000)
            count = snap["element_count"]
    finally:
        await page.close()
        await cdp.aclose()
    return {"rtt_ms": _median(rtt), "throughput_per_s": throughput, "snapshot_ms": _median(snaps),
            "snapshot_elements": count}


async def _playwright_browser(ws_url: str, rounds: int, concurrent_calls: int) -> dict[str, Any] | None:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        return None
    async with async_playwright() as pw:
        browser = await pw.chromium.connect_over_cdp(ws_url)
        context = browser.contexts[0] if browser.contexts else await browser.new_context()
        page = await context.new_page()
        try:
            rtt, throughput = await _time_evaluate(page.evaluate, rounds, concurrent_calls)
        finally:
            await page.close()
            await browser.close()
    return {"rtt_ms": _median(rtt), "throughput_per_s": throughput}


async def bench_browser(rounds: int = 400, concurrent_calls: int = 1600) -> dict[str, object]:
    from .launcher import launch_chromium

    browser = await launch_chromium()
    try:
        ours = await _ours_browser(browser.ws_url, rounds, concurrent_calls)
        peer = await _playwright_browser(browser.ws_url, rounds, concurrent_calls)
        ours_again = await _ours_browser(browser.ws_url, rounds, concurrent_calls)
        frames = await _frames_browser(browser.ws_url, max(5, rounds // 20))
        closed = await _closed_browser(browser.ws_url, max(5, rounds // 20))
    finally:
        await browser.aclose()
    ours["rtt_ms"] = (ours["rtt_ms"] + ours_again["rtt_ms"]) / 2
    ours["throughput_per_s"] = (ours["throughput_per_s"] + ours_again["throughput_per_s"]) / 2
    report: dict[str, Any] = {"fabric_jev": ours, "rounds": rounds, "concurrent_calls": concurrent_calls,
                              "frames": frames, "closed_shadow": closed}
    if peer is not None:
        report["playwright"] = peer
        report["rtt_ratio"] = ours["rtt_ms"] / peer["rtt_ms"]
        report["throughput_ratio"] = peer["throughput_per_s"] / ours["throughput_per_s"]
    return report


def print_browser(r: dict[str, Any]) -> None:
    ours = r["fabric_jev"]
    print("browser")
    if "playwright" in r:
        pw = r["playwright"]
        print(f"  Runtime.evaluate('1+1')  {ours['rtt_ms']:6.2f} ms   Playwright {pw['rtt_ms']:6.2f} ms"
              f"   ratio {r['rtt_ratio']:.2f} (goal <= 0.5)")
        print(f"  16 concurrent callers    {ours['throughput_per_s']:6.0f}/s   Playwright "
              f"{pw['throughput_per_s']:6.0f}/s   time ratio {r['throughput_ratio']:.2f} (goal <= 0.5)")
    else:
        print(f"  Runtime.evaluate('1+1')  {ours['rtt_ms']:6.2f} ms   (Playwright not installed: "
              "pip install -e '.[bench]')")
    print(f"  snapshot, {ours['snapshot_elements']} elements  {ours['snapshot_ms']:6.1f} ms "
          "round trip (goal <= 150 ms)")
    f = r["frames"]
    print(f"  snapshot, {f['framed_elements']} elements in {f['frames']} frames "
          f"({f['out_of_process_frames']} out of process)  {f['framed_ms']:6.1f} ms   same "
          f"{f['flat_elements']} on one page {f['flat_ms']:6.1f} ms   ratio {f['ratio']:.2f} (goal <= 2)")
    c = r["closed_shadow"]
    print(f"  snapshot, {c['closed_elements']} elements in {c['closed_roots']} closed roots on <div>s  "
          f"{c['closed_ms']:6.1f} ms   same {c['plain_elements']} without roots {c['plain_ms']:6.1f} ms   "
          f"ratio {c['ratio']:.2f} (goal <= 1.3)")
    print(f"  finding closed roots on every host: {c['plain_ms']:6.1f} ms vs {c['custom_elements_ms']:6.1f} ms "
          f"looking on custom elements only (page without roots)   ratio {c['lookup_ratio']:.2f}; "
          f"custom-elements sees {c['closed_elements_without_lookup']} of the closed page's elements")
