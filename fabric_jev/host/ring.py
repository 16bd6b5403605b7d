"""Bounded per-run records: the progress ring and the log buffer."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import anyio

from ..contract.envelope import ProgressEvent
from ..contract.wire_model import utc_time

RING_CAPACITY = 64
LOG_CHAR_CAP = 4_096
LOG_TRUNCATED = "[logs truncated]"


class ProgressRing:
    """Keeps the newest 64 events; sequences start at 1 and never repeat."""

    def __init__(self, capacity: int = RING_CAPACITY) -> None:
        # (sequence, time, value): an emit stores three fields; the event models are
        # built only when someone reads them.
        self._events: deque[tuple[int, float, Any]] = deque(maxlen=capacity)
        self.next_sequence = 1
        self.listener: Callable[[ProgressEvent], None] | None = None
        self._changed: anyio.Event | None = None  # only while someone waits for progress

    def append(self, value: object) -> None:
        entry = (self.next_sequence, time.time(), value)
        self._events.append(entry)
        self.next_sequence += 1
        if self.listener is not None:
            self.listener(_event(entry))
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def changed(self) -> anyio.Event:
        """An event set by the next append (made on demand: emit stays allocation-free)."""
        if self._changed is None:
            self._changed = anyio.Event()
        return self._changed

    def after(self, sequence: int) -> tuple[ProgressEvent, ...]:
        return tuple(_event(e) for e in self._events if e[0] > sequence)


def _event(entry: tuple[int, float, Any]) -> ProgressEvent:
    # Values were validated at the boundary; skip pydantic's second pass.
    return ProgressEvent.model_construct(sequence=entry[0], at=utc_time(entry[1]), value=entry[2])


class LogBuffer:
    """4,096 characters of console output in all, then one marker and nothing more."""

    def __init__(self, cap: int = LOG_CHAR_CAP) -> None:
        self._cap = cap
        self._used = 0
        self.lines: list[str] = []
        self.truncated = False

    def extend(self, lines: Iterable[object]) -> None:
        for line in lines:
            if self.truncated:
                return
            if line == LOG_TRUNCATED:
                self.lines.append(LOG_TRUNCATED)
                self.truncated = True
                return
            text = str(line)
            room = self._cap - self._used
            if len(text) > room:
                self.lines.append(text[:room])
                self.lines.append(LOG_TRUNCATED)
                self.truncated = True
                return
            self.lines.append(text)
            self._used += len(text)
