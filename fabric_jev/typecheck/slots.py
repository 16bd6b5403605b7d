"""The compiler slots of one process, shared fairly between programs.

A check can take its whole cap (a type bomb runs for the full timeout), and
one program launched many times, or in many versions, must not make every
other program's check wait behind it. So the slots are not first come, first
served: while more than one slot exists, the last free one is kept for an
owner (a program, by name) that has no compile running, and a freed slot goes
first to the owner waiting with the fewest compiles running (the longest
waiting among equals). A lone owner still gets every slot but one.

The owner is the program's name, unless the caller names one for its task in
`SLOT_OWNER`: the MCP server over HTTP names the client there, so that one
client's many programs share one owner's slots.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

import anyio

#: Who a compile in this task is charged to (None: the program, by name).
SLOT_OWNER: ContextVar[str | None] = ContextVar("fabric_jev_slot_owner", default=None)


def slot_owner(program_name: str) -> str:
    """The owner of a compile of `program_name` in this task: the caller's, else the program's."""
    named = SLOT_OWNER.get()
    return f"program:{program_name}" if named is None else named


class FairSlots:
    """`total` slots; `async with slots.taken(owner)` holds one for the block."""

    def __init__(self, total: int) -> None:
        self.total = max(1, total)
        self.running: dict[str, int] = {}
        self._waiting: dict[int, tuple[str, anyio.Event]] = {}  # by arrival order
        self._order = itertools.count()

    @property
    def free(self) -> int:
        return self.total - sum(self.running.values())

    def _may_take(self, owner: str) -> bool:
        free = self.free
        if free <= 0:
            return False
        # The last free slot is kept for an owner with nothing running (unless there is only one slot).
        return self.total == 1 or free > 1 or self.running.get(owner, 0) == 0

    def _take(self, owner: str) -> None:
        self.running[owner] = self.running.get(owner, 0) + 1

    def _release(self, owner: str) -> None:
        left = self.running[owner] - 1
        if left:
            self.running[owner] = left
        else:
            del self.running[owner]
        self._wake()

    def _wake(self) -> None:
        """Hand free slots to waiters: fewest running first, then the longest waiting."""
        while self._waiting:
            candidates = sorted(self._waiting.items(), key=lambda item: (self.running.get(item[1][0], 0), item[0]))
            for ticket, (owner, event) in candidates:
                if self._may_take(owner):
                    del self._waiting[ticket]
                    self._take(owner)
                    event.set()
                    break
            else:
                return

    @asynccontextmanager
    async def taken(self, owner: str) -> AsyncIterator[None]:
        ticket = next(self._order)
        event = anyio.Event()
        self._waiting[ticket] = (owner, event)
        self._wake()  # at once when a slot is free for this owner and no one is ahead of it
        if not event.is_set():
            try:
                await event.wait()
            except BaseException:
                if self._waiting.pop(ticket, None) is None:
                    self._release(owner)  # the slot was handed over as the wait was cancelled
                raise
        try:
            yield
        finally:
            self._release(owner)
