"""The thin driver between smart assertions and a real page."""

from __future__ import annotations

import json

from fabric_jev.assertions import Element, Snapshot

from .page import Page


class PageSource:
    """Fresh snapshots of one page; can scroll an element into view and take screenshots."""

    def __init__(self, page: Page) -> None:
        self.page = page

    async def snapshot(self) -> Snapshot:
        return Snapshot.parse(await self.page.snapshot())

    async def scroll_into_view(self, element: Element) -> None:
        box = element.bbox
        # Centre the element's page box in the viewport.
        await self.page.evaluate(
            f"window.scrollTo({{left: {json.dumps(box.x)} - innerWidth / 2, "
            f"top: {json.dumps(box.y + box.height / 2)} - innerHeight / 2, behavior: 'instant'}})")

    async def screenshot(self) -> bytes:
        return await self.page.screenshot()
