"""The one waiting funnel: a deadline, a backoff schedule, cancellation and an attempt log.

Everything in fabric-jev that waits for a condition by trying again —
`Check.eventually`, verification's `poll` and the browser's `not_see` —
waits through a `Waiter` (Playwright's `_waiter` is the model), so the
rules are written once:

* the deadline is fixed when the waiter starts and is hard: `bounded(...)`
  stops waiting for a read that stalls past it, tells the reader through its
  cancellation token, and reports a result that arrives after it as late;
* the pause between tries starts at `interval` and grows by `backoff` up to
  `max_interval`, and never sleeps past the deadline;
* cancellation of the caller is always re-raised, never turned into a result;
* every try is recorded in `log` (what a record holds is the caller's choice).

The clock and the sleep are injectable so callers' retry rules can be tested
on a fake clock; `bounded` always enforces the deadline in real time too.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import anyio

T = TypeVar("T")
E = TypeVar("E")
Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


@dataclass
class Bounded(Generic[T]):
    """What one deadline-bounded read gave: a value, or why there is none."""

    value: T | None = None
    ok: bool = False
    stalled: bool = False  # still running when the deadline passed (its token was set)
    late: bool = False  # answered, but after the deadline: never evidence


@dataclass
class Waiter(Generic[E]):
    """One wait: `timeout` seconds from creation, pauses from `interval` growing by `backoff`."""

    timeout: float
    interval: float
    backoff: float = 1.0
    max_interval: float | None = None
    clock: Clock = time.monotonic
    sleep: Sleep = anyio.sleep
    log: list[E] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.timeout < 0 or self.interval < 0 or self.backoff < 1:
            raise ValueError("a waiter needs timeout >= 0, interval >= 0 and backoff >= 1")
        self.started = self.clock()
        self.deadline = self.started + self.timeout
        self._delay = self.interval
        self.pauses = 0

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    @property
    def left(self) -> float:
        """Seconds until the deadline (0 once it has passed)."""
        return max(0.0, self.deadline - self.clock())

    @property
    def expired(self) -> bool:
        return self.clock() >= self.deadline

    def room_for_pause(self) -> bool:
        """Whether the next pause ends before the deadline (otherwise the wait is over)."""
        return self.elapsed + self._delay <= self.timeout

    def record(self, entry: E) -> E:
        self.log.append(entry)
        return entry

    async def pause(self, at_least: float = 0.0) -> None:
        """Sleep the next backoff step (or `at_least`, if longer), never past the deadline."""
        wait = min(max(self._delay, at_least), self.left)
        self.pauses += 1
        grown = self._delay * self.backoff
        self._delay = grown if self.max_interval is None else min(grown, max(self.interval, self.max_interval))
        await self.sleep(wait)

    async def bounded(self, read: Callable[[anyio.Event], Awaitable[T]]) -> Bounded[T]:
        """Run one read within the time left; its token is set once its answer is not wanted.

        A reader's own exception propagates unchanged (the caller decides whether
        that is terminal); cancellation of the caller is re-raised.
        """
        token = anyio.Event()
        got: list[T] = []
        with anyio.move_on_after(self.left) as scope:
            got.append(await read(token))
        if scope.cancelled_caught or not got:
            token.set()
            return Bounded(stalled=True)
        if self.clock() > self.deadline:
            token.set()
            return Bounded(got[0], late=True)
        return Bounded(got[0], ok=True)


__all__ = ["Bounded", "Clock", "Sleep", "Waiter"]
