"""`fabric-jev bench browser`: our CDP client next to Playwright's connect_over_cdp; snapshots."""

from __future__ import annotations

import time
from statistics import median as _median
from typing import Any

import anyio


def _big_page(n: int) -> str:
    rows = "".join(
        f"<li><button data-testid='b{i}'>Action {i}</button><a href='#l{i}'>Link {i}</a>"
        f"<input aria-label='Field {i}' value='v{i}'><label><input type=checkbox> Box {i}</label></li>"
        for i in range(n // 4))
    return f"<!doctype html><title>big</title><main><ul>{rows}</ul></main>"


async def _ours_browser(ws_url: str, rounds: int, concurrent_calls: int) -> dict[str, Any]:
    from .cdp import CDPConnection
    from .page import Page

    cdp = await CDPConnection.connect(ws_url)
    page = await Page.open(cdp)
    try:
        for _ in range(50):
            await page.evaluate("1+1")
        rtt = []
        for _ in range(rounds):
            start = time.perf_counter()
            await page.evaluate("1+1")
            rtt.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(16):
                async def worker() -> None:
                    for _ in range(concurrent_calls // 16):
                        await page.evaluate("1+1")
                tg.start_soon(worker)
        throughput = concurrent_calls / (time.perf_counter() - start)
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
            for _ in range(50):
                await page.evaluate("1+1")
            rtt = []
            for _ in range(rounds):
                start = time.perf_counter()
                await page.evaluate("1+1")
                rtt.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            import asyncio

            async def worker() -> None:
                for _ in range(concurrent_calls // 16):
                    await page.evaluate("1+1")

            await asyncio.gather(*(worker() for _ in range(16)))
            throughput = concurrent_calls / (time.perf_counter() - start)
        finally:
            await page.close()
            await browser.close()
    return {"rtt_ms": _median(rtt), "throughput_per_s": throughput}


async def bench_browser(rounds: int = 400, concurrent_calls: int = 1600) -> dict[str, Any]:
    from .launcher import launch_chromium

    browser = await launch_chromium()
    try:
        ours = await _ours_browser(browser.ws_url, rounds, concurrent_calls)
        peer = await _playwright_browser(browser.ws_url, rounds, concurrent_calls)
        ours_again = await _ours_browser(browser.ws_url, rounds, concurrent_calls)
    finally:
        await browser.aclose()
    ours["rtt_ms"] = (ours["rtt_ms"] + ours_again["rtt_ms"]) / 2
    ours["throughput_per_s"] = (ours["throughput_per_s"] + ours_again["throughput_per_s"]) / 2
    report: dict[str, Any] = {"fabric_jev": ours, "rounds": rounds, "concurrent_calls": concurrent_calls}
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
