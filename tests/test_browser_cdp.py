"""The CDP client against a real headless Chromium."""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import anyio
import pytest
from fabric_jev_browser import (
    CallTimeout,
    CDPConnection,
    CDPError,
    ConnectionLost,
    NavigationError,
    Page,
    launch_chromium,
)

from tests.browser_support import Pages

pytestmark = [pytest.mark.anyio, pytest.mark.browser]


async def test_runtime_evaluate_round_trip(page: Page) -> None:
    assert await page.evaluate("1 + 1") == 2
    assert await page.evaluate("Promise.resolve('later')", await_promise=True) == "later"


async def test_cdp_errors_are_typed(cdp: CDPConnection) -> None:
    with pytest.raises(CDPError) as err:
        await cdp.call("Nope.nothing")
    assert err.value.code == -32601 and err.value.method == "Nope.nothing"
    assert "wasn't found" in err.value.cdp_message or "not found" in err.value.cdp_message


async def test_navigation_errors_surface(page: Page) -> None:
    with pytest.raises(NavigationError) as err:
        await page.navigate("http://127.0.0.1:1/", wait_load=False)
    assert err.value.error_text.startswith("net::ERR_")


async def test_events_reach_two_listeners(page: Page) -> None:
    first: list[Any] = []
    second: list[Any] = []
    both = anyio.Event()

    def one(msg: dict[str, Any]) -> None:
        first.append(msg["params"]["args"][0]["value"])

    def two(msg: dict[str, Any]) -> None:
        second.append(msg["params"]["args"][0]["value"])
        both.set()

    remove_one = page.cdp.on("Runtime.consoleAPICalled", one, session_id=page.session_id)
    remove_two = page.cdp.on("Runtime.consoleAPICalled", two, session_id=page.session_id)
    try:
        await page.evaluate("console.log('hello listeners')")
        with anyio.fail_after(5):
            await both.wait()
    finally:
        remove_one()
        remove_two()
    assert first == second == ["hello listeners"]


async def test_a_broken_listener_does_not_stop_the_reader(page: Page) -> None:
    def broken(msg: dict[str, Any]) -> None:
        raise RuntimeError("listener bug")

    remove = page.cdp.on("Runtime.consoleAPICalled", broken, session_id=page.session_id)
    try:
        waiter = page.wait_for_event("Runtime.consoleAPICalled", timeout_ms=5000)
        async with anyio.create_task_group() as tg:
            got: list[Any] = []

            async def wait() -> None:
                got.append(await waiter)

            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            await page.evaluate("console.log('still alive')")
        assert got[0]["params"]["args"][0]["value"] == "still alive"
    finally:
        remove()


async def test_calls_time_out(page: Page) -> None:
    start = time.monotonic()
    with pytest.raises(CallTimeout, match="timed out after 150 ms"):
        await page.call("Runtime.evaluate", {"expression": "new Promise(() => {})",
                                             "awaitPromise": True}, timeout_ms=150)
    assert time.monotonic() - start < 2
    assert await page.evaluate("2 + 2") == 4  # the connection is still usable


async def test_at_most_16_commands_on_the_wire(page: Page) -> None:
    page.cdp.peak_outstanding = 0
    results: list[Any] = []

    async def slow(i: int) -> None:
        results.append(await page.evaluate(
            f"new Promise(r => setTimeout(() => r({i}), 50))", await_promise=True))

    async with anyio.create_task_group() as tg:
        for i in range(40):
            tg.start_soon(slow, i)
    assert sorted(results) == list(range(40))
    assert page.cdp.peak_outstanding == 16


async def test_a_4mb_accessibility_tree_arrives(page: Page, pages: Pages) -> None:
    rows = "".join(f"<li><a href='#r{i}'>Row {i} with a reasonably long accessible label</a>"
                   f"<button>Act {i}</button></li>" for i in range(3500))
    await page.navigate(pages.add("/big.html", f"<ul>{rows}</ul>"))
    # What is tested is the size of one frame, not speed: a loaded machine may take long.
    tree = await page.ax_tree(timeout_ms=45_000)
    size = len(json.dumps(tree))
    assert size > 4_000_000, size
    assert await page.evaluate("1") == 1


async def test_dropped_connection_fails_pending_calls_and_needs_a_reconnect() -> None:
    browser = await launch_chromium()
    try:
        conn = await CDPConnection.connect(browser.ws_url)
        page = await Page.open(conn)
        failures: list[BaseException] = []

        async def pending() -> None:
            try:
                await page.call("Runtime.evaluate", {"expression": "new Promise(() => {})",
                                                     "awaitPromise": True}, timeout_ms=30_000)
            except ConnectionLost as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(pending)
            await anyio.wait_all_tasks_blocked()
            os.killpg(browser.pid, signal.SIGKILL)
        assert len(failures) == 3 and conn.closed
        with pytest.raises(ConnectionLost):
            await conn.call("Browser.getVersion")
        await conn.aclose()
    finally:
        await browser.aclose()
    # An explicit reconnect, to a browser that is up again, works.
    again = await launch_chromium()
    try:
        conn = await CDPConnection.connect(again.ws_url)
        assert "Chrome" in (await conn.call("Browser.getVersion"))["product"]
        await conn.aclose()
    finally:
        await again.aclose()
    assert not again.profile.exists() and not browser.profile.exists()
