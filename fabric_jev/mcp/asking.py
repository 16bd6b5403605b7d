"""The MCP approver: an `ask` becomes an elicitation request to the client's user.

The question carries the same facts as the terminal prompt
(`CapabilityCall.facts`); the form has one field, `decision`, whose choices
are the approver's replies (yes once, always for this ref in this run, no,
no to every later question of the run). `decline` and `cancel` deny; so does
no answer within `approverTimeoutMs` (the policy gate's bound). A client that
does not declare the elicitation capability is never sent one: the call is
refused, and the envelope's audit trail says why.

A run started by a tool call that is still in flight (`jev_run`) asks on that
call's channel (`related_request_id`); a background run asks on the
connection's own channel.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from ..approval.question import REPLIES, CapabilityCall, Reply, Unavailable

NO_ELICITATION = "the MCP client cannot be asked (it does not declare the elicitation capability)"
NO_CLIENT = "no MCP client has connected"
NO_CHANNEL = "the MCP connection has no channel for asking the client"

_TITLES: dict[Reply, str] = {
    "allow": "Yes, this once",
    "always": "Always for {ref} in this run",
    "deny": "No",
    "deny_all": "No to every later question of this run",
}


@dataclass(slots=True)
class ToolCall:
    """The tool call a run was started from; `live` while it has not answered yet."""

    session: Any  # mcp.server.session.ServerSession
    request_id: Any
    live: bool = True


#: Set around each tool call; runs started from it inherit it (tasks copy the context).
CURRENT_CALL: contextvars.ContextVar[ToolCall | None] = contextvars.ContextVar(
    "fabric_jev_mcp_tool_call", default=None)


def message(call: CapabilityCall) -> str:
    """What the client's user reads: the facts every approver is given (why it is asked, every
    segment of a compound command, the arguments cut in the middle), as the terminal shows them."""
    lines = ["A fabric-jev program asks to use a capability.",
             *(f"{label}: {text}" for label, text in call.facts())]
    if call.always is not None:
        lines.append(f"always: allows every call matching {call.always} for the rest of this run")
    return "\n".join(lines)


def requested_schema(call: CapabilityCall) -> dict[str, Any]:
    """One required single-choice field (the titled `oneOf` form of the elicitation schema).

    Written here, not derived from a model: it is no tool's schema but MCP's restricted form
    schema, and each choice's title names this call's ref (docs/mcp.md lists the exceptions)."""
    return {"type": "object", "required": ["decision"], "properties": {"decision": {
        "type": "string", "title": "Allow this call?",
        "oneOf": [{"const": reply, "title": _TITLES[reply].format(ref=call.always or call.ref)}
                  for reply in REPLIES]}}}


def reply_of(result: types.ElicitResult) -> Reply:
    """Only an accepted form of the shape asked for (one field, a known decision) answers;
    decline, cancel and any other shape deny (a client that adds fields did not show the form)."""
    if result.action != "accept" or not result.content or set(result.content) != {"decision"}:
        return "deny"
    decision = result.content.get("decision")
    for reply in REPLIES:
        if decision == reply:
            return reply
    return "deny"


def can_elicit(session: Any) -> bool:
    capabilities = getattr(session, "client_capabilities", None)
    elicitation = getattr(capabilities, "elicitation", None)
    if elicitation is None:
        return False
    # `elicitation: {}` (2025-06-18) means form mode; a client that lists modes must list form.
    return elicitation.form is not None or elicitation.url is None


class ElicitationApprover:
    """Asks the MCP client's user through elicitation."""

    name = "mcp elicitation"

    def __init__(self) -> None:
        self._session: Any = None

    def connected(self, session: Any) -> None:
        """Remember the client's connection (every tool call passes here first)."""
        self._session = session

    async def __call__(self, call: CapabilityCall) -> Reply | Unavailable:
        from mcp.shared.exceptions import NoBackChannelError

        origin = CURRENT_CALL.get()
        session = origin.session if origin is not None else self._session
        if session is None:
            return Unavailable(NO_CLIENT)
        if not can_elicit(session):
            return Unavailable(NO_ELICITATION)
        related = origin.request_id if origin is not None and origin.live else None
        try:
            result = await session.elicit_form(message(call), requested_schema(call), related_request_id=related)
        except NoBackChannelError:
            return Unavailable(NO_CHANNEL)
        return reply_of(result)
