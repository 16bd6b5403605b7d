"""The observer-session tools' names, descriptions and JSON Schemas (no I/O; sessions.py serves them)."""

from __future__ import annotations

from typing import Any

MAX_TEXT = 100_000
SESSION_TOOL_NAMES = frozenset({"jev_session_open", "jev_observe", "jev_session_post", "jev_advice",
                                "jev_session_close"})

_SESSION_ID = {"type": "string", "minLength": 1, "maxLength": 128,
               "description": "The id jev_session_open returned."}
_TEXT = {"type": "string", "maxLength": MAX_TEXT}
_TOOL_RESULT = {"type": "object", "properties": {
    "toolName": {"type": "string", "minLength": 1, "maxLength": 256}, "isError": {"type": "boolean"},
    "text": _TEXT}, "required": ["toolName", "isError", "text"], "additionalProperties": False}


def _event(kind: str, properties: dict[str, Any] | None = None, required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": {"event": {"const": kind}, **(properties or {})},
            "required": ["event", *required], "additionalProperties": False}


EVENT_SCHEMA: dict[str, Any] = {"oneOf": [
    _event("input", {"text": _TEXT, "automatic": {"type": "boolean", "default": False,
                                                  "description": "Automatic / extension input: does "
                                                                 "not reset the one-advice latch."}},
           ("text",)),
    _event("turn_start"),
    _event("turn_end", {"assistantText": {"type": "array", "maxItems": 256, "items": _TEXT},
                        "stopReason": {"type": "string", "maxLength": 64, "default": "end_turn",
                                       "description": "\"aborted\" is a Main abort: every observer ends."},
                        "toolResults": {"type": "array", "maxItems": 64, "items": _TOOL_RESULT}},
           ("assistantText",)),
    _event("tool_error", {"toolName": {"type": "string", "minLength": 1, "maxLength": 256}, "text": _TEXT},
           ("toolName", "text")),
    _event("agent_end"),
    _event("agent_settled"),
    _event("compaction"),
    _event("abort"),
    _event("navigate"),
]}

SESSION_STATE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "sessionId": {"type": "string"}, "revision": {"type": "integer"}, "turnIndex": {"type": "integer"},
    "completedTurns": {"type": "integer"}, "sequence": {"type": "integer"}, "halted": {"type": "boolean"}},
    "required": ["sessionId", "revision", "turnIndex", "completedTurns", "sequence", "halted"]}

ADVICE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "advice": {"type": "array", "items": {"type": "object", "properties": {
        "sequence": {"type": "integer"}, "message": {"type": "string"}, "delivery": {"enum": ["steer", "followUp"]},
        "triggerTurn": {"type": "boolean"}, "eventId": {"type": "string"}, "observerId": {"type": "string"},
        "at": {"type": "string"}, "stale": {"type": "boolean"},
        "staleReason": {"type": "string"}}}},
    "dropped": {"type": "integer", "minimum": 0},
    "observers": {"type": "array", "items": {"type": "object"}},
    "session": SESSION_STATE_SCHEMA}, "required": ["advice", "dropped", "observers", "session"]}


def session_tools(launch_properties: dict[str, Any], one_program: dict[str, Any],
                  envelope: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tool specs (name → description, input and output schemas)."""
    return {
        "jev_session_open": {
            "description": "Open the Main agent session that observers watch (one at a time per server). "
                           "Post its turns with jev_session_post, bind observers with jev_observe, read "
                           "their advice with jev_advice, and end it with jev_session_close.",
            "input": {"type": "object", "properties": {"sessionId": _SESSION_ID}, "additionalProperties": False},
            "output": SESSION_STATE_SCHEMA,
        },
        "jev_observe": {
            "description": "Start an observer: a judgment program spawned in the background with observe "
                           "options (events, include, maxChars, queueSize, maxEventAgeMs, delivery, "
                           "triggerTurn, maxAdvice; docs/observers.md). It sees only events posted after it "
                           "started; its advice (program.advise) is checked and, when delivered, waits in "
                           "jev_advice. Returns its running envelope; follow it with jev_status or jev_stop.",
            "input": {"type": "object", "properties": {
                "sessionId": _SESSION_ID, **launch_properties,
                "observe": {"type": "object", "description": "The observe options, as for the library's "
                                                            "spawn(observe=...)."}},
                "required": ["sessionId", "observe"], **one_program, "additionalProperties": False},
            "output": envelope,
        },
        "jev_session_post": {
            "description": "Post the Main session's events in order: input (user text), turn_start, "
                           "turn_end (assistant text blocks, stop reason, tool results), tool_error, "
                           "agent_end, agent_settled, compaction, abort, navigate. Observers receive a "
                           "projected, redacted copy of the kinds they subscribed to. A newer completed turn "
                           "makes advice about older ones stale. Returns the session's state.",
            "input": {"type": "object", "properties": {
                "sessionId": _SESSION_ID,
                "events": {"type": "array", "minItems": 1, "maxItems": 64, "items": EVENT_SCHEMA}},
                "required": ["sessionId", "events"], "additionalProperties": False},
            "output": SESSION_STATE_SCHEMA,
        },
        "jev_advice": {
            "description": "The advice observers delivered and you have not read yet, oldest first; each "
                           "piece is returned once (peek: look without taking). A piece whose turn was "
                           "overtaken before you read it (a newer completed turn, new input, compaction, "
                           "Main halted) is marked stale. With waitMs, wait up to that long for the first "
                           "piece (closing the session ends the wait at once). Also each observer's state and "
                           "counts (adviceDelivered, adviceSuppressed).",
            "input": {"type": "object", "properties": {
                "sessionId": _SESSION_ID,
                "waitMs": {"type": "integer", "minimum": 0, "maximum": 300_000, "default": 0},
                "peek": {"type": "boolean", "default": False,
                         "description": "Return the unread advice but leave it unread."}},
                "required": ["sessionId"], "additionalProperties": False},
            "output": ADVICE_SCHEMA,
        },
        "jev_session_close": {
            "description": "End the Main session (as a shutdown): every observer is cancelled, its inbox "
                           "discarded, and advice not yet read is returned one last time.",
            "input": {"type": "object", "properties": {"sessionId": _SESSION_ID}, "required": ["sessionId"],
                      "additionalProperties": False},
            "output": ADVICE_SCHEMA,
        },
    }
