"""A page source for assertion tests without a browser: scripted snapshots on a fake clock."""

from __future__ import annotations

from typing import Any

from fabric_jev.assertions import Snapshot


class ScriptedSource:
    """Hands out snapshots in order (the last one repeats) on a fake clock; records what it was asked.

    Scrolling an element into view inserts `after_scroll(element)` as the next snapshot; each
    test module says what that snapshot looks like.
    """

    def __init__(self, *snapshots: Snapshot | Exception, screenshot: bytes = b"\x89PNG") -> None:
        self.snapshots = list(snapshots)
        self.taken = 0
        self.asked: list[str] = []
        self.scrolled: list[str] = []
        self.png = screenshot
        self.now = 0.0

    def after_scroll(self, element: Any) -> Snapshot:
        raise NotImplementedError

    async def snapshot(self) -> Snapshot:
        item = self.snapshots[min(self.taken, len(self.snapshots) - 1)]
        self.taken += 1
        if isinstance(item, Exception):
            raise item
        return item

    async def scroll_into_view(self, element: Any) -> None:
        self.asked.append(f"scroll {element.name}")
        self.scrolled.append(element.name)
        self.snapshots.insert(self.taken, self.after_scroll(element))

    async def screenshot(self) -> bytes:
        self.asked.append("screenshot")
        return self.png

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
