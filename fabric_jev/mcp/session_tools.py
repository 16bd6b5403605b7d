"""The observer-session tools' names, descriptions, arguments and results (no I/O; sessions.py serves
them). Each tool's input and output schema is derived from its models (`schemas.derived_schema`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from ..contract.envelope import Envelope, ObservationCounts, RunState
from ..contract.wire_model import WireModel, omit_none
from .arguments import EXACTLY_ONE_PROGRAM, Arguments, ProgramArgument, ProgramInput, ProgramPath
from .schemas import derived_schema

MAX_TEXT = 100_000
SESSION_TOOL_NAMES = frozenset({"jev_session_open", "jev_observe", "jev_session_post", "jev_advice",
                                "jev_session_close"})

SessionId = Annotated[str, Field(min_length=1, max_length=128, description="The id jev_session_open returned.")]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
ToolName = Annotated[str, Field(min_length=1, max_length=256)]


# ------------------------------------------------------------------------------- the events Main posts


class ToolResultPosted(Arguments):
    tool_name: ToolName
    is_error: bool
    text: Text


class InputEvent(Arguments):
    event: Literal["input"]
    text: Text
    automatic: bool = Field(default=False, description="Automatic / extension input: does not reset the "
                                                        "one-advice latch.")


class TurnEndEvent(Arguments):
    event: Literal["turn_end"]
    assistant_text: tuple[Text, ...] = Field(max_length=256)
    stop_reason: str = Field(default="end_turn", max_length=64,
                             description='"aborted" is a Main abort: every observer ends.')
    tool_results: tuple[ToolResultPosted, ...] = Field(default=(), max_length=64)


class ToolErrorEvent(Arguments):
    event: Literal["tool_error"]
    tool_name: ToolName
    text: Text


class BareEvent(Arguments):
    """An event that carries nothing but its kind."""

    event: Literal["turn_start", "agent_end", "agent_settled", "compaction", "abort", "navigate"]


Event = Annotated[InputEvent | TurnEndEvent | ToolErrorEvent | BareEvent, Field(discriminator="event")]


# ------------------------------------------------------------------------------------- the arguments


class SessionOpen(Arguments):
    session_id: SessionId | None = None


class Observe(Arguments):
    model_config = ConfigDict(json_schema_extra=EXACTLY_ONE_PROGRAM)

    session_id: SessionId
    program: ProgramArgument | None = None
    program_path: ProgramPath | None = None
    input: ProgramInput = None
    observe: dict[str, Any] = Field(description="The observe options, as for the library's spawn(observe=...).")


class SessionPost(Arguments):
    session_id: SessionId
    events: tuple[Event, ...] = Field(min_length=1, max_length=64)


class AdviceWanted(Arguments):
    session_id: SessionId
    wait_ms: int = Field(default=0, ge=0, le=300_000)
    peek: bool = Field(default=False, description="Return the unread advice but leave it unread.")


class SessionClose(Arguments):
    session_id: SessionId


# --------------------------------------------------------------------------------------- the results


class SessionState(WireModel):
    """The open Main session, as jev_session_open and jev_session_post return it."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    session_id: str
    #: Raised by new input, compaction and navigation: advice from before is stale.
    revision: int
    turn_index: int
    completed_turns: int
    #: Events posted so far.
    sequence: int
    #: Main aborted or shut down: every observer ended.
    halted: bool


class AdvicePiece(WireModel):
    """One piece of advice an observer delivered."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    sequence: int
    message: str
    delivery: Literal["steer", "followUp"]
    trigger_turn: bool
    event_id: str
    observer_id: str
    #: When it was delivered (ISO 8601, UTC, milliseconds).
    at: str
    #: Its turn was overtaken before it was read; `stale_reason` says how.
    stale: bool
    stale_reason: str | None = Field(default=None, exclude_if=omit_none)


class ObserverShown(WireModel):
    """An observer of the session, with its run's state and counts."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    id: str
    name: str
    state: RunState
    observation: ObservationCounts | None


class ExpiredObserver(WireModel):
    """An observer whose run the host no longer keeps."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    id: str
    state: Literal["expired"] = "expired"


class AdviceReport(WireModel):
    """What jev_advice and jev_session_close return."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    advice: tuple[AdvicePiece, ...]
    #: Advice dropped, oldest first, while the outbox was full.
    dropped: int = Field(ge=0)
    observers: tuple[ObserverShown | ExpiredObserver, ...]
    session: SessionState


def session_tools() -> dict[str, dict[str, Any]]:
    """The tool specs (name → description, input and output schemas)."""
    state = derived_schema(SessionState, mode="serialization")
    report = derived_schema(AdviceReport, mode="serialization")
    return {
        "jev_session_open": {
            "description": "Open the Main agent session that observers watch (one at a time per server). "
                           "Post its turns with jev_session_post, bind observers with jev_observe, read "
                           "their advice with jev_advice, and end it with jev_session_close.",
            "input": derived_schema(SessionOpen, absent_not_null=True),
            "output": state,
        },
        "jev_observe": {
            "description": "Start an observer: a judgment program spawned in the background with observe "
                           "options (events, include, maxChars, queueSize, maxEventAgeMs, delivery, "
                           "triggerTurn, maxAdvice; docs/observers.md). It sees only events posted after it "
                           "started; its advice (program.advise) is checked and, when delivered, waits in "
                           "jev_advice. Returns its running envelope; follow it with jev_status or jev_stop.",
            "input": derived_schema(Observe, absent_not_null=True),
            "output": derived_schema(Envelope, mode="serialization"),
        },
        "jev_session_post": {
            "description": "Post the Main session's events in order: input (user text), turn_start, "
                           "turn_end (assistant text blocks, stop reason, tool results), tool_error, "
                           "agent_end, agent_settled, compaction, abort, navigate. Observers receive a "
                           "projected, redacted copy of the kinds they subscribed to. A newer completed turn "
                           "makes advice about older ones stale. Returns the session's state.",
            "input": derived_schema(SessionPost, absent_not_null=True),
            "output": state,
        },
        "jev_advice": {
            "description": "The advice observers delivered and you have not read yet, oldest first; each "
                           "piece is returned once (peek: look without taking). A piece whose turn was "
                           "overtaken before you read it (a newer completed turn, new input, compaction, "
                           "Main halted) is marked stale. With waitMs, wait up to that long for the first "
                           "piece (closing the session ends the wait at once). Also each observer's state and "
                           "counts (adviceDelivered, adviceSuppressed).",
            "input": derived_schema(AdviceWanted, absent_not_null=True),
            "output": report,
        },
        "jev_session_close": {
            "description": "End the Main session (as a shutdown): every observer is cancelled, its inbox "
                           "discarded, and advice not yet read is returned one last time.",
            "input": derived_schema(SessionClose, absent_not_null=True),
            "output": report,
        },
    }

#: Each session tool's argument and result models (tests hold the advertised schemas to them).
SESSION_TOOL_MODELS: dict[str, tuple[type[Any], type[Any]]] = {
    "jev_session_open": (SessionOpen, SessionState), "jev_observe": (Observe, Envelope),
    "jev_session_post": (SessionPost, SessionState), "jev_advice": (AdviceWanted, AdviceReport),
    "jev_session_close": (SessionClose, AdviceReport)}
