"""The thin page API: click and type at snapshot elements, screenshot, wait for events."""

from __future__ import annotations

import anyio
import pytest
from fabric_jev_browser import Page

from tests.browser_support import Pages

pytestmark = [pytest.mark.anyio, pytest.mark.browser]

FORM = """<!doctype html><body>
<input id="q" aria-label="Query">
<button onclick="document.querySelector('#out').textContent = document.querySelector('#q').value">Go</button>
<p id="out"></p></body>"""


async def test_type_and_click_at_snapshot_elements(page: Page, pages: Pages) -> None:
    await page.navigate(pages.add("/form.html", FORM))
    snap = await page.snapshot()
    by_name = {e["name"]: e for e in snap["elements"]}
    await page.type("hello world", target=by_name["Query"])
    await page.click(by_name["Go"])
    assert await page.evaluate("document.querySelector('#out').textContent") == "hello world"
    again = {e["name"]: e for e in (await page.snapshot())["elements"]}
    assert again["Query"]["value"] == "hello world"


async def test_screenshot_is_a_png(page: Page, pages: Pages) -> None:
    await page.navigate(pages.add("/shot.html", "<h1>Shot</h1>"))
    png = await page.screenshot()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000


async def test_wait_for_event_sees_a_navigation(page: Page, pages: Pages) -> None:
    url = pages.add("/nav.html", "<title>nav</title>")
    async with anyio.create_task_group() as tg:
        got: list[dict[str, object]] = []

        async def wait() -> None:
            got.append(await page.wait_for_event("Page.loadEventFired", timeout_ms=5000))

        tg.start_soon(wait)
        await anyio.wait_all_tasks_blocked()
        await page.navigate(url, wait_load=False)
    assert got and "timestamp" in got[0]["params"]  # type: ignore[operator]


async def test_attach_to_an_existing_target(page: Page) -> None:
    again = await Page.attach(page.cdp, page.target_id)
    assert again.session_id != page.session_id
    assert await again.evaluate("40 + 2") == 42
