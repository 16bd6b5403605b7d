"""Observers over MCP: an agent opens a Main session, binds observer programs to it, posts
its turn events, and reads or waits for advice (docs/observers.md, "Over MCP").

The library's rules stay in force because the library does the work: a
`MainSession` bound to the server's host projects and redacts every event,
keeps each observer's bounded queue, and checks every piece of advice
(freshness, one per user input, the budget) before it is delivered. Delivery
puts the advice in the session's outbox, which `jev_advice` empties: each
piece is returned once. An agent may read advice later than it was
delivered; a piece whose turn has since been overtaken (a newer turn
completed, new input, compaction, Main halted) comes back marked stale.

One session is open at a time per server (an MCP server serves one agent).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio

from ..contract.observe import ToolResult
from ..contract.wire_model import utc_now, wire_time
from ..errors import UnknownRun
from ..host import JevHost
from ..host.observers import Advice, MainSession
from .session_tools import AdvicePiece, AdviceReport, ExpiredObserver, ObserverShown, SessionState

#: Advice kept for the agent; beyond it the oldest is dropped (and counted).
OUTBOX_SIZE = 32

class SessionError(Exception):
    """A session tool call that names no open session, or opens a second one (a tool error)."""


@dataclass(frozen=True, slots=True)
class _Delivered:
    sequence: int
    advice: Advice
    at: str
    revision: int
    completed_turns: int


class ObservedSession:
    """One open Main session, its observers and its outbox of delivered advice."""

    def __init__(self, session_id: str | None) -> None:
        self.main = MainSession(session_id, deliver=self._deliver)
        self.outbox: deque[_Delivered] = deque()
        self.dropped = 0
        self.observers: list[str] = []
        self._sequence = 0
        self._arrived = anyio.Event()
        #: Closed (jev_session_close): no call waits for advice any more.
        self.closed = False

    def close(self) -> None:
        """End every wait for advice at once: nothing more can arrive."""
        self.closed = True
        self._arrived.set()

    async def _deliver(self, advice: Advice) -> None:
        self._sequence += 1
        if len(self.outbox) >= OUTBOX_SIZE:
            self.outbox.popleft()
            self.dropped += 1
        self.outbox.append(_Delivered(self._sequence, advice, wire_time(utc_now()), self.main.revision,
                                      self.main.completed_turns))
        self._arrived.set()
        self._arrived = anyio.Event()

    def state(self) -> SessionState:
        main = self.main
        return SessionState(session_id=main.session_id, revision=main.revision, turn_index=main.turn_index,
                            completed_turns=main.completed_turns, sequence=main.sequence, halted=main.halted)

    def _staleness(self, item: _Delivered) -> str | None:
        main = self.main
        if main.halted:
            return "Main halted"
        if main.revision != item.revision:
            return "the session moved on (new input, compaction or navigation)"
        if main.completed_turns != item.completed_turns:
            return "a newer turn completed"
        return None

    async def take(self, wait_s: float, *, peek: bool = False) -> list[AdvicePiece]:
        if not self.outbox and wait_s > 0 and not self.closed:
            with anyio.move_on_after(wait_s):
                await self._arrived.wait()  # advice, or the session's close
        out = []
        for item in list(self.outbox):
            reason = self._staleness(item)
            out.append(AdvicePiece(
                sequence=item.sequence, message=item.advice.message, delivery=item.advice.delivery,
                trigger_turn=item.advice.trigger_turn, event_id=item.advice.event_id,
                observer_id=item.advice.observer_id, at=item.at, stale=reason is not None, stale_reason=reason))
        if not peek:
            self.outbox.clear()
        return out

    def post(self, event: dict[str, Any]) -> None:
        main, kind = self.main, event["event"]
        if kind == "input":
            main.user_input(event["text"], automatic=event.get("automatic", False))
        elif kind == "turn_start":
            main.turn_start()
        elif kind == "turn_end":
            main.turn_end(list(event["assistantText"]), stop_reason=event.get("stopReason", "end_turn"),
                          tool_results=[ToolResult(r["toolName"], r["isError"], r["text"])
                                        for r in event.get("toolResults", [])])
        elif kind == "tool_error":
            main.tool_error(event["toolName"], event["text"])
        elif kind == "agent_end":
            main.agent_end()
        elif kind == "agent_settled":
            main.agent_settled()
        elif kind == "compaction":
            main.compaction()
        elif kind == "abort":
            main.abort()
        elif kind == "navigate":
            main.navigate()


class SessionTools:
    """The session tools over one host; `load_program` resolves `program`/`programPath` arguments."""

    def __init__(self, host: JevHost, load_program: Callable[[dict[str, Any]], Any]) -> None:
        self.host = host
        self.load_program = load_program
        self.open: ObservedSession | None = None

    def _get(self, session_id: str) -> ObservedSession:
        if self.open is None or self.open.main.session_id != session_id:
            raise SessionError(f"no open session {session_id!r} (open one with jev_session_open)")
        return self.open

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        handler = getattr(self, "_" + name.removeprefix("jev_"))
        return await handler(arguments)

    async def _session_open(self, arguments: dict[str, Any]) -> Any:
        if self.open is not None and not self.open.main.halted:
            raise SessionError(f"session {self.open.main.session_id!r} is open; close it first "
                               "(jev_session_close)")
        self.open = ObservedSession(arguments.get("sessionId"))
        self.host.bind_session(self.open.main)
        return self.open.state().to_json()

    async def _observe(self, arguments: dict[str, Any]) -> Any:
        session = self._get(arguments["sessionId"])
        envelope = await self.host.spawn(self.load_program(arguments), arguments.get("input"),
                                         observe=arguments["observe"])
        session.observers.append(envelope.id)
        return envelope.to_json()

    async def _session_post(self, arguments: dict[str, Any]) -> Any:
        session = self._get(arguments["sessionId"])
        for event in arguments["events"]:
            session.post(event)
        return session.state().to_json()

    async def _advice(self, arguments: dict[str, Any]) -> Any:
        session = self._get(arguments["sessionId"])
        wait_ms = arguments.get("waitMs", 0)
        advice = await session.take(wait_ms / 1000 if wait_ms else 0.0, peek=arguments.get("peek", False))
        return self._report(session, advice)

    async def _session_close(self, arguments: dict[str, Any]) -> Any:
        session = self._get(arguments["sessionId"])
        session.close()  # a jev_advice waiting on it answers now, not at the end of its waitMs
        session.main.shutdown()
        for run_id in session.observers:  # shutdown cancelled them: wait until each is terminal
            with contextlib.suppress(UnknownRun):
                await self.host.wait(run_id)
        self.open = None
        return self._report(session, await session.take(0.0))

    def _report(self, session: ObservedSession, advice: list[AdvicePiece]) -> dict[str, Any]:
        observers: list[ObserverShown | ExpiredObserver] = []
        for run_id in session.observers:
            try:
                envelope = self.host.envelope(run_id)
            except UnknownRun:  # pruned from the host's history
                observers.append(ExpiredObserver(id=run_id))
                continue
            observers.append(ObserverShown(id=run_id, name=envelope.name, state=envelope.state,
                                           observation=envelope.observation))
        return AdviceReport(advice=tuple(advice), dropped=session.dropped, observers=tuple(observers),
                            session=session.state()).to_json()
