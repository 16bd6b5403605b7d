"""Observers of a Main agent session and their bounded advice (contract §8).

An agent host (or a test) publishes its session's lifecycle into a
`MainSession` bound to a `JevHost`. Programs spawned with `observe` receive a
projected, redacted copy of each subscribed event through
`program.nextEvent()`, and may send advice back with `program.advise()`,
which is checked in a fixed order and delivered through the session's
delivery callback at most once per external user input, across all
observers.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio

from ..contract.advice import AdviceRequest
from ..contract.envelope import ObservationCounts
from ..contract.observe import (
    ObserveOptions,
    SessionEvent,
    ToolResult,
    project,
)
from ..contract.wire_model import utc_now, wire_time
from ..errors import HostCallRefused, LaunchRejected
from .observing import ObservationSource, StopRun


class SessionHost(Protocol):
    """What a session binds to: a `JevHost`, seen only through its public method."""

    def bind_session(self, session: ObservationSource) -> None: ...


@dataclass(frozen=True, slots=True)
class Advice:
    """One piece of advice for Main, as handed to the delivery callback."""

    message: str
    delivery: Literal["steer", "followUp"]
    trigger_turn: bool
    session_id: str
    event_id: str
    observer_id: str


Deliver = Callable[[Advice], Awaitable[None]]


class AdviceLatch:
    """At most one delivery attempt across all observers per external user input."""

    def __init__(self) -> None:
        self.set = False

    def reset(self) -> None:
        self.set = False


class Observer:
    """One observing run's inbox and advice state."""

    def __init__(self, session: MainSession, options: ObserveOptions) -> None:
        self.session = session
        self.options = options
        self.run_id = ""
        self._stop_run: StopRun | None = None
        # (event, arrival time, completed turns at publication)
        self._queue: deque[tuple[dict[str, Any], float, int]] = deque()
        self._waiting = False
        self._wake = anyio.Event()
        self._last: tuple[dict[str, Any], float, int] | None = None
        self._advised: set[str] = set()
        self.received = 0
        self.consumed = 0
        self.dropped = 0
        self.attempts = 0
        self.delivered = 0
        self.suppressed = 0
        self.cancelled = False

    def attach(self, run_id: str, stop_run: StopRun) -> None:
        self.run_id = run_id
        self._stop_run = stop_run

    def stop_run(self) -> None:
        """Stop the observing run (the host's callback; the run's end calls `cancel`)."""
        if self._stop_run is not None:
            self._stop_run()

    # ------------------------------------------------------------------ inbox

    def offer(self, event: SessionEvent, base: Mapping[str, object], now: float, completed: int) -> None:
        if self.cancelled or event.kind not in self.options.events:
            return
        payload, truncated = project(event, self.options)
        self.received += 1
        if len(self._queue) >= self.options.queue_size:
            self._queue.popleft()  # overflow drops the oldest
            self.dropped += 1
        self._queue.append(({**base, "payload": payload, "truncated": truncated}, now, completed))
        self._wake.set()

    async def next_event(self) -> dict[str, object]:
        if self._waiting:
            raise HostCallRefused("Only one program.nextEvent may be pending at a time")
        self._waiting = True
        try:
            while True:
                max_age = self.options.max_event_age_ms / 1000
                while self._queue:
                    event, at, completed = self._queue.popleft()
                    if self.session.clock() - at > max_age:
                        self.dropped += 1  # too old: discarded at dequeue
                        continue
                    self.consumed += 1
                    self._last = (event, at, completed)
                    return event
                self._wake = anyio.Event()
                await self._wake.wait()
        finally:
            self._waiting = False

    # ------------------------------------------------------------------ advice

    async def advise(self, request: AdviceRequest) -> dict[str, object]:
        event_id, message = request.event_id, request.message
        session = self.session
        reason = self._suppression(event_id)
        if reason is not None:
            self.suppressed += 1
            return {"delivered": False, "reason": reason}
        # Set before delivering: a second observer answering the same input is refused.
        session.latch.set = True
        self.attempts += 1
        self._advised.add(event_id)
        options = self.options
        advice = Advice(message=message, delivery=options.delivery or "steer",
                        trigger_turn=options.trigger_turn, session_id=session.session_id,
                        event_id=event_id, observer_id=self.run_id)
        try:
            await session.deliver(advice)
        except Exception:  # a failed delivery is reported, never retried
            self.suppressed += 1
            return {"delivered": False, "reason": "delivery_failed"}
        self.delivered += 1
        return {"delivered": True}

    def _suppression(self, event_id: str) -> str | None:
        """The contract's check order; None means deliver."""
        session = self.session
        if self.options.delivery is None:
            return "disabled"
        if self._last is None or self._last[0]["id"] != event_id:
            return "stale"  # not the last consumed event
        event, at, completed = self._last
        if event["revision"] != session.revision:
            return "stale"  # Main moved on (new input, compaction)
        if completed != session.completed_turns:
            return "stale"  # a newer turn completed, possibly while this advice was being judged
        if session.clock() - at > self.options.max_event_age_ms / 1000:
            return "stale"  # too old
        if event_id in self._advised:
            return "duplicate"
        if self.attempts >= self.options.max_advice:
            return "budget"
        if session.halted:
            return "stale"  # Main halted
        if session.latch.set:
            return "feedback"
        return None

    def counts(self) -> ObservationCounts:
        return ObservationCounts(events=tuple(self.options.events), received=self.received,
                                 consumed=self.consumed, dropped=self.dropped, queued=len(self._queue),
                                 advice_delivered=self.delivered, advice_suppressed=self.suppressed)

    def cancel(self) -> None:
        """Stop receiving and discard the inbox (the run itself is stopped by the host)."""
        self.cancelled = True
        self._queue.clear()
        self.session._observers.discard(self)


class MainSession:
    """The Main agent session as observers see it. Bind it with `host.bind_session`."""

    def __init__(self, session_id: str | None = None, *, deliver: Deliver | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.session_id = session_id or str(uuid.uuid4())
        self._deliver = deliver
        self.clock = clock
        self.revision = 0
        self.turn_index = 0
        #: Completed turns so far: advice is about the latest one only.
        self.completed_turns = 0
        #: A turn has started and not yet completed (a next turn may be in flight).
        self.turn_in_flight = False
        #: The latest real (not automatic) user input: the approval classifier's user text.
        self.user_text: str | None = None
        self.sequence = 0
        self.halted = False
        self.latch = AdviceLatch()
        self._observers: set[Observer] = set()

    # ------------------------------------------------------------------ binding

    def bind(self, host: SessionHost) -> None:
        """Same as `host.bind_session(session)`."""
        host.bind_session(self)

    def create(self, options: ObserveOptions) -> Observer:
        if self.halted:
            raise LaunchRejected("the Main session has halted; observers are not restarted")
        observer = Observer(self, options)
        self._observers.add(observer)
        return observer

    async def deliver(self, advice: Advice) -> None:
        if self._deliver is None:
            raise HostCallRefused("no delivery callback")
        await self._deliver(advice)

    # ------------------------------------------------------------------ publishing

    def _from_here(self, session_id: str | None) -> bool:
        """Events of another session end every observer (the Main session switched)."""
        if session_id is None or session_id == self.session_id:
            return True
        self.revision += 1
        self._cancel_all()
        return False

    def _publish(self, event: SessionEvent) -> None:
        self.sequence += 1
        base = {"id": f"evt_{uuid.uuid4().hex[:16]}", "sequence": self.sequence, "event": event.kind,
                "source": "main", "sessionId": self.session_id, "revision": self.revision,
                "at": wire_time(utc_now())}
        now = self.clock()
        for observer in list(self._observers):
            observer.offer(event, base, now, self.completed_turns)

    def user_input(self, text: str, *, automatic: bool = False, session_id: str | None = None) -> None:
        """A new turn's input. Only real (not automatic/extension) input resets the latch."""
        if not self._from_here(session_id):
            return
        self.turn_index += 1
        self.revision += 1
        self.halted = False
        if not automatic:
            self.latch.reset()
            self.user_text = text
        self._publish(SessionEvent("input", self.turn_index, input_text=text, automatic=automatic))

    def turn_start(self, *, session_id: str | None = None) -> None:
        """A turn started. Advice about the last completed turn stays fresh; not sent to observers."""
        if self._from_here(session_id):
            self.turn_in_flight = True

    def turn_end(self, assistant_text: list[str] | tuple[str, ...], *, stop_reason: str = "end_turn",
                 tool_results: list[ToolResult] | tuple[ToolResult, ...] = (),
                 session_id: str | None = None) -> None:
        """A turn completed: advice about any older turn is stale from now on.

        A turn that ended with ``stop_reason="aborted"`` is a Main abort: every
        observer is cancelled.
        """
        if not self._from_here(session_id):
            return
        self.turn_in_flight = False
        if stop_reason == "aborted":
            self.abort()
            return
        self.completed_turns += 1
        self._publish(SessionEvent("turn_end", self.turn_index, assistant_text=tuple(assistant_text),
                                   stop_reason=stop_reason, tool_results=tuple(tool_results)))

    def tool_error(self, tool_name: str, text: str, *, session_id: str | None = None) -> None:
        if not self._from_here(session_id):
            return
        self._publish(SessionEvent("tool_error", self.turn_index, tool_name=tool_name,
                                   tool_results=(ToolResult(tool_name, True, text),)))

    def agent_end(self, *, session_id: str | None = None) -> None:
        if self._from_here(session_id):
            self._publish(SessionEvent("agent_end", self.turn_index))

    def agent_settled(self, *, session_id: str | None = None) -> None:
        if self._from_here(session_id):
            self._publish(SessionEvent("agent_settled", self.turn_index))

    def compaction(self) -> None:
        """History was rewritten: advice about earlier events is stale."""
        self.revision += 1

    # ------------------------------------------------------------------ ending observers

    def _cancel_all(self) -> None:
        for observer in list(self._observers):
            observer.cancel()
            observer.stop_run()

    def abort(self) -> None:
        """Main aborted (Escape): every observer is cancelled; nothing restarts by itself."""
        self.halted = True
        self._cancel_all()

    def navigate(self) -> None:
        """Session navigation or switch: observers end, their inboxes are discarded."""
        self.revision += 1
        self._cancel_all()

    def shutdown(self) -> None:
        """Reload or shutdown of the agent host."""
        self.halted = True
        self._cancel_all()
