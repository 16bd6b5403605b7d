"""How a replay touches the world: the channel protocol and an in-memory channel.

The core never trusts a channel for deadlines: `poll` enforces a wall-clock
deadline even when a read stalls, hands every read a cancellation token
(an `anyio.Event` set when its result is no longer wanted), ignores a late
result, and treats a reader exception as terminal.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio

from .._waiting import Waiter
from ..errors import ReaderFailed as ReaderFailed
from .dictionary import SeeOptions, Target

T = TypeVar("T")
Read = Callable[[anyio.Event], Awaitable[Any]]


@dataclass
class PollOutcome:
    passed: bool
    value: Any = None
    stalled: bool = False
    late: bool = False
    reads: int = 0


async def poll(read: Read, test: Callable[[Any], bool], *, timeout: float, interval: float = 0.1,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], Awaitable[None]] = anyio.sleep) -> PollOutcome:
    """Read until `test(value)` holds or the deadline passes; the last read starts at the deadline.

    The waiting itself (deadline, stalled and late reads, pauses, cancellation)
    is `fabric_jev._waiting.Waiter`, shared with `Check.eventually` and the
    browser's `not_see`. `clock` and `sleep` are for tests on a fake clock.
    """
    waiter: Waiter[Any] = Waiter(timeout, interval, clock=clock, sleep=sleep)
    outcome = PollOutcome(False)
    while True:
        try:
            got = await waiter.bounded(read)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            raise ReaderFailed(f"{type(exc).__name__}: {exc}") from exc
        if got.stalled:
            outcome.stalled = True
            return outcome
        outcome.reads += 1
        if got.late:
            outcome.late = True
            return outcome  # a late result never passes
        outcome.value = got.value
        if test(got.value):
            outcome.passed = True
            return outcome
        if not await waiter.next_try():
            return outcome


@runtime_checkable
class Channels(Protocol):
    """What a replay needs from the world."""

    async def see(self, target: Target, options: SeeOptions) -> tuple[bool, str]:
        """Is the target visible (with the options' state) within options.timeout_ms? (ok, actual)"""
        ...

    async def not_see(self, target: Target, window_ms: int) -> tuple[bool, str]:
        """Sustained sampled absence over the window: (ok, actual)."""
        ...

    async def text(self, cancel: anyio.Event) -> str:
        """The visible text of the surface, now."""
        ...

    async def eventually(self, read: Read, test: Callable[[Any], bool], timeout: float) -> PollOutcome:
        ...

    async def step(self, title: str, body: Callable[[], Awaitable[None]]) -> None:
        """Run one check as a named step of the caller's test (a real step, not a no-op)."""
        ...


@dataclass(frozen=True)
class TargetFields:
    """What a channel's element offers to a dictionary target."""

    texts: tuple[str | None, ...]  # visible text (and, for a page, the accessible name)
    role: str | None = None
    label: str | None = None
    placeholder: str | None = None
    test_id: str | None = None


def select_targets(target: Target, items: Iterable[T], fields: Callable[[T], TargetFields]) -> list[T]:
    """The items a target names, in order; `nth` picks one. Every channel reads targets this way:
    a string matches text, label, placeholder or test id; an object's fields must all match."""
    found = []
    for item in items:
        f = fields(item)
        if isinstance(target, str):
            hit = target in (*f.texts, f.label, f.placeholder, f.test_id)
        else:
            hit = ((target.text is None or target.text in f.texts)
                   and (target.role is None or f.role == target.role)
                   and (target.label is None or f.label == target.label)
                   and (target.placeholder is None or f.placeholder == target.placeholder)
                   and (target.test_id is None or f.test_id == target.test_id))
        if hit:
            found.append(item)
    nth = None if isinstance(target, str) else target.nth
    return found if nth is None else found[nth:nth + 1]


def target_text(target: Target) -> str:
    if isinstance(target, str):
        return target
    return target.text or target.label or target.placeholder or target.test_id or target.role or ""


@dataclass
class MemoryElement:
    text: str
    role: str = ""
    label: str = ""
    placeholder: str = ""
    test_id: str = ""
    editable: bool = False
    value: str | None = None


@dataclass
class MemoryChannels:
    """An in-memory world for benchmarks and tests: elements and page text."""

    elements: list[MemoryElement] = field(default_factory=list)
    page_text: str = ""
    sample_ms: int = 50
    steps: list[str] = field(default_factory=list)
    #: The clock and sleep `textContains` and `observe` wait on (a fake clock in tests).
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep

    def _find(self, target: Target) -> list[MemoryElement]:
        return select_targets(target, self.elements, lambda e: TargetFields(
            (e.text,), e.role, e.label, e.placeholder, e.test_id))

    async def see(self, target: Target, options: SeeOptions) -> tuple[bool, str]:
        await anyio.lowlevel.checkpoint()
        for e in self._find(target):
            if options.editable is not None and e.editable != options.editable:
                return False, f"{target_text(target)!r} editable={e.editable}"
            if options.value is not None and e.value != options.value:
                return False, f"{target_text(target)!r} value={e.value!r}"
            if options.text is not None and e.text != options.text:
                return False, f"{target_text(target)!r} text={e.text!r}"
            return True, f"{target_text(target)!r} visible"
        return False, f"{target_text(target)!r} not found"

    async def not_see(self, target: Target, window_ms: int) -> tuple[bool, str]:
        samples = max(1, window_ms // max(self.sample_ms, 1))
        for _ in range(min(samples, 3)):  # in memory nothing changes between samples
            if self._find(target):
                return False, f"{target_text(target)!r} is visible"
            await anyio.lowlevel.checkpoint()
        return True, "absent in every sample"

    async def text(self, cancel: anyio.Event) -> str:
        await anyio.lowlevel.checkpoint()
        return self.page_text

    async def eventually(self, read: Read, test: Callable[[Any], bool], timeout: float) -> PollOutcome:
        return await poll(read, test, timeout=timeout, interval=self.sample_ms / 1000, clock=self.clock,
                          sleep=self.sleep)

    async def step(self, title: str, body: Callable[[], Awaitable[None]]) -> None:
        self.steps.append(title)
        await body()
