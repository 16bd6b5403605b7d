"""Verification channels on a real page: `see` locates with the smart-assertion engine."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from fabric_jev.assertions import Element, FailureKind, Predicate, PredicateOutcome, Snapshot, check
from fabric_jev.protocol import Waiter
from fabric_jev.verification import PollOutcome, SeeOptions, Target, TargetFields, poll, select_targets

from .cdp import CDPConnection
from .checks import PageSource
from .tab import Tab


def _fields(e: Element) -> TargetFields:
    # On a page the accessible name is both a text and the label.
    return TargetFields((e.text, e.name), e.role, e.name, e.placeholder, e.testid)


@dataclass(frozen=True)
class TargetSeen(Predicate):
    """A dictionary target, visible and in the state its options ask for."""

    target: Any
    options: SeeOptions

    @property
    def description(self) -> str:
        return f"see({self.target!r})"

    def assess(self, snapshot: Snapshot) -> PredicateOutcome:
        found = select_targets(self.target, snapshot.elements, _fields)
        expected = f"{self.description} {self.options.model_dump(exclude_none=True, exclude={'timeout_ms'})}"
        if not found:
            return PredicateOutcome(False, FailureKind.NO_MATCH, expected, "no matching element")
        usable = [e for e in found if e.visible and e.in_viewport and not e.is_occluded]
        if not usable:
            offscreen = any(e.visible and not e.in_viewport for e in found)
            reason = FailureKind.MATCH_OFFSCREEN if offscreen else FailureKind.MATCH_OCCLUDED
            return PredicateOutcome(False, reason, expected, found[0].label(), tuple(found))
        for e in usable:
            if self.options.editable is not None and e.editable != self.options.editable:
                continue
            if self.options.value is not None and (e.value_redacted or e.value != self.options.value):
                continue
            if self.options.text is not None and e.text != self.options.text:
                continue
            return PredicateOutcome(True, None, expected, e.label(), (e,))
        e = usable[0]
        value = "[redacted]" if e.value_redacted else repr(e.value)
        return PredicateOutcome(False, FailureKind.STATE_MISMATCH, expected,
                                f"{e.label()} text={e.text!r} value={value} disabled={e.is_disabled} "
                                f"readonly={e.readonly} editable={e.editable}", tuple(usable))


@dataclass
class BrowserChannels:
    page: Tab
    sample_ms: int = 200
    steps: list[str] = field(default_factory=list)

    @property
    def source(self) -> PageSource:
        # Not tracking the page's actions: `see` needs no diff baseline, and a tracking source
        # made per call would add a snapshot before every later action.
        return PageSource(self.page, track=False)

    async def see(self, target: Target, options: SeeOptions) -> tuple[bool, str]:
        result = await check(TargetSeen(target, options), "see").eventually(
            self.source, timeout=options.timeout_ms / 1000, poll=0.05, min_confidence=0.0)
        if result.passed:
            return True, result.actual
        why = f"{result.reason} ({result.last_reason})" if result.last_reason else str(result.reason)
        return False, f"{why}: {result.actual}"

    async def not_see(self, target: Target, window_ms: int) -> tuple[bool, str]:
        """Sampled absence over the window (frames included): any visible match fails it.
        The last sample is taken at the window's end."""
        waiter: Waiter[int] = Waiter(window_ms / 1000, self.sample_ms / 1000)
        while True:
            snap = await self.source.snapshot()
            samples = waiter.record(len(waiter.log) + 1)
            shown = [e for e in select_targets(target, snap.elements, _fields) if e.visible]
            if shown:
                return False, f"{shown[0].label()} was visible at sample {samples}"
            if not await waiter.next_try():
                return True, f"absent in all {samples} samples"

    async def text(self, cancel: anyio.Event) -> str:
        """The visible text of the page and of every frame in it."""
        return "\n".join(await self.page.texts())

    async def eventually(self, read: Callable[[anyio.Event], Awaitable[Any]],
                         test: Callable[[Any], bool], timeout: float) -> PollOutcome:
        return await poll(read, test, timeout=timeout, interval=0.05)

    async def step(self, title: str, body: Callable[[], Awaitable[None]]) -> None:
        self.steps.append(title)
        await body()


@contextlib.asynccontextmanager
async def open_browser_channels(ws_url: str, url: str) -> AsyncIterator[BrowserChannels]:
    cdp = await CDPConnection.connect(ws_url)
    try:
        page = await Tab.open(cdp, url)
        try:
            yield BrowserChannels(page)
        finally:
            await page.close()
    finally:
        await cdp.aclose()


@contextlib.asynccontextmanager
async def verification_channels(ws_url: str | None, url: str) -> AsyncIterator[BrowserChannels]:
    """Channels on `url` in the browser at `ws_url`; with None, in a headless Chromium launched
    for these checks alone and closed after them (`verify run --launch`)."""
    if ws_url is not None:
        async with open_browser_channels(ws_url, url) as channels:
            yield channels
        return
    from .launcher import launch_chromium

    browser = await launch_chromium()
    try:
        async with open_browser_channels(browser.ws_url, url) as channels:
            yield channels
    finally:
        await browser.aclose()
