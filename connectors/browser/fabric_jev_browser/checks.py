"""The thin driver between smart assertions and a real page: a page's snapshots as a
`fabric_jev.assertions` snapshot source."""

from __future__ import annotations

import json

from fabric_jev.assertions import Element, Snapshot

from .shadow import ClosedShadow
from .tab import Tab


class PageSource:
    """Fresh snapshots of one page, frames included; can scroll an element into view,
    reload (only when allowed) and take screenshots.

    Diff baseline: before each action through the page (click, type, navigate,
    reload) the source takes a snapshot, and every later snapshot carries it as
    its `baseline`, so `added(...)`, `removed(...)`, `modified(...)` and
    `changed()` compare against the page as it was just before the last action.
    `mark()` takes a new baseline now; `forget()` drops it. `track=False` turns
    the automatic snapshot before actions off (it costs one snapshot per action).
    `closed_shadow` chooses which closed shadow roots are walked (docs/browser.md).
    """

    def __init__(self, page: Tab, *, track: bool = True, allow_reload: bool = False,
                 closed_shadow: ClosedShadow = "all") -> None:
        self.page = page
        self.allow_reload = allow_reload
        self.closed_shadow: ClosedShadow = closed_shadow
        self.baseline: Snapshot | None = None
        self._untrack = page.on_before_action(self.mark) if track else None

    async def _fresh(self) -> Snapshot:
        return Snapshot.parse(await self.page.snapshot(closed_shadow=self.closed_shadow))

    async def snapshot(self) -> Snapshot:
        return (await self._fresh()).with_baseline(self.baseline)

    async def mark(self) -> None:
        """Take the baseline now: diff predicates compare against this snapshot."""
        self.baseline = await self._fresh()

    def forget(self) -> None:
        """Drop the baseline (diff predicates fail with no_baseline until the next action or mark)."""
        self.baseline = None

    def close(self) -> None:
        """Stop taking a baseline before the page's actions."""
        if self._untrack is not None:
            self._untrack()
            self._untrack = None

    async def scroll_into_view(self, element: Element) -> None:
        box = element.bbox
        # Centre the element's page box in the viewport.
        await self.page.evaluate(
            f"window.scrollTo({{left: {json.dumps(box.x)} - innerWidth / 2, "
            f"top: {json.dumps(box.y + box.height / 2)} - innerHeight / 2, behavior: 'instant'}})")

    async def reload(self) -> bool:
        """Reload the page when this source was made with allow_reload=True; else refuse."""
        if not self.allow_reload:
            return False
        await self.page.reload()
        return True

    async def screenshot(self) -> bytes:
        return await self.page.screenshot()
