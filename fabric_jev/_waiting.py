"""The one waiting funnel: a deadline, a backoff schedule, cancellation and an attempt log.

Everything in fabric-jev that waits for a condition by trying again —
`Check.eventually` (and so `assert_eventually`, `expect` and verification's
`see`), verification's `poll` (`textContains`, `observe`) and the browser's
`notSee` sampling — waits through a `Waiter` (Playwright's `_waiter` is the
model), so the rules are written once:

* the deadline is fixed when the waiter starts;
* the pause between tries starts at `interval` and grows by `backoff` up to
  `max_interval`; a pause that would pass the deadline is cut to end at it,
  and the try after it is the last: **every wait makes its last try at its
  deadline, never before** (a schedule whose next pause would overshoot used
  to end the wait early: a 10 s check last looked at 7.7 s);
* a read may answer up to `grace` seconds after the deadline (the look made
  at the deadline needs time to see); `bounded(...)` stops waiting for a read
  that stalls past that, tells the reader through its cancellation token, and
  reports a result that arrives after it as late;
* cancellation of the caller is always re-raised, never turned into a result;
* every try is recorded in `log` (what a record holds is the caller's choice).

A caller's loop is: try; stop on success; ``if not await waiter.next_try():``
the wait is over. The clock and the sleep are injectable so callers' retry
rules can be tested on a fake clock; `bounded` always enforces its bound in
real time too.
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
    stalled: bool = False  # still running when the deadline and its grace passed (its token was set)
    late: bool = False  # answered, but after the deadline and its grace: never evidence


#: How long a read still running at the deadline may take to answer (seconds).
READ_GRACE = 1.0
#: Within this of the deadline counts as at it (seconds): a sleep may wake a hair early,
#: and pauses summed in floating point land a hair short; neither buys one more try.
_SLACK = 0.001


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
    grace: float = READ_GRACE

    def __post_init__(self) -> None:
        if self.timeout < 0 or self.interval < 0 or self.backoff < 1 or self.grace < 0:
            raise ValueError("a waiter needs timeout >= 0, interval >= 0, backoff >= 1 and grace >= 0")
        self.started = self.clock()
        self.deadline = self.started + self.timeout
        self._delay = self.interval
        self._final = False  # the last pause ended at the deadline: the try after it was the last
        self.pauses = 0

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    @property
    def left(self) -> float:
        """Seconds until the deadline (0 once it has passed)."""
        return max(0.0, self.deadline - self.clock())

    @property
    def over(self) -> bool:
        """No try may start any more: the last one was made at the deadline (or the clock passed it)."""
        return self._final or self.deadline - self.clock() <= _SLACK

    def record(self, entry: E) -> E:
        self.log.append(entry)
        return entry

    async def pause(self, at_least: float = 0.0) -> None:
        """Sleep the next backoff step (or `at_least`, if longer), cut to end at the deadline;
        a pause that reaches the deadline makes the next try the last one."""
        left = self.left
        wait = max(self._delay, at_least)
        if wait >= left - _SLACK:
            # Decided here, not by reading the clock after the sleep, which may land a hair
            # short of the deadline.
            wait, self._final = left, True
        self.pauses += 1
        grown = self._delay * self.backoff
        self._delay = grown if self.max_interval is None else min(grown, max(self.interval, self.max_interval))
        await self.sleep(wait)

    async def next_try(self, at_least: float = 0.0) -> bool:
        """Pause before the next try and return True; False when the wait is over."""
        if self.over:
            return False
        await self.pause(at_least)
        return True

    async def bounded(self, read: Callable[[anyio.Event], Awaitable[T]]) -> Bounded[T]:
        """Run one read within the time left and the grace; its token is set once its answer is
        not wanted.

        A reader's own exception propagates unchanged (the caller decides whether
        that is terminal); cancellation of the caller is re-raised.
        """
        token = anyio.Event()
        got: list[T] = []
        with anyio.move_on_after(self.left + self.grace) as scope:
            got.append(await read(token))
        if scope.cancelled_caught or not got:
            token.set()
            return Bounded(stalled=True)
        if self.clock() > self.deadline + self.grace:
            token.set()
            return Bounded(got[0], late=True)
        return Bounded(got[0], ok=True)


__all__ = ["READ_GRACE", "Bounded", "Clock", "Sleep", "Waiter"]
