"""Answers for messages the MCP SDK could not read, so that no request waits for ever.

The SDK's stdio transport parses each line itself; a line it cannot parse
(invalid JSON, a lone surrogate such as ``"\\ud800"``, nesting deeper than
its parser allows) or that is not a JSON-RPC message reaches the server only
as an exception, and the SDK logs it and drops it. The client that sent a
request in that line then waits for an answer that never comes. Here such a
line becomes a JSON-RPC error for the request's own id: "Parse error" for
what is not JSON to the SDK, "Invalid request" for JSON of the wrong shape.
A notification or a response to us is not answered (JSON-RPC forbids it); a
line from which no id can be read gets the error with id null, as JSON-RPC
asks. The id is found without parsing the whole line, so depth or bad text
elsewhere cannot hide it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from types import TracebackType
from typing import Any

import anyio
import mcp_types as types
import pydantic
from mcp.shared.message import SessionMessage

from .._json import STRUCTURE_TOKEN, JSONInputError, loads_bounded
from .lines import CROWDED_MARK, CUT_MARK, MAX_LINE_BYTES, MAX_LINE_VALUES

log = logging.getLogger("fabric_jev.mcp")

# After a key: the colon and a scalar value (a string, an integer, a literal).
# A number right before a NUL is not read: NUL begins lines.CUT_MARK, so its digits may go on.
_SCALAR_AFTER_KEY = re.compile(r'\s*:\s*("(?:[^"\\]++|\\.)*+"|-?\d{1,30}(?![.eE\d\x00])|true|false|null)')
_COLON = re.compile(r"\s*:")
_MESSAGE_CHARS = 300
#: The value of a top-level member that is there but cannot be read as a scalar (an object,
#: an array, a fraction, an integer of more than 30 digits).
UNREADABLE = object()


def top_level_scalars(text: str) -> dict[str, Any]:
    """The scalar members of a JSON object's top level, read by a linear token scan.

    Works where a parser gives up: nesting past any limit, or text it refuses
    further down. A member whose value is not a scalar (or is malformed) maps
    to UNREADABLE; one whose key is malformed is left out.
    """
    found: dict[str, Any] = {}
    depth = 0
    for match in STRUCTURE_TOKEN.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
        elif token in ("]", "}"):
            depth -= 1
        elif token == '"':
            break  # an unterminated string: nothing after it can be read
        elif depth == 1 and _COLON.match(text, match.end()):
            value = _SCALAR_AFTER_KEY.match(text, match.end())
            with contextlib.suppress(ValueError):
                found.setdefault(json.loads(token), UNREADABLE if value is None else json.loads(value.group(1)))
    return found


def _holds_lone_surrogate(line: str) -> bool:
    """Whether `line` is JSON whose text holds an unpaired surrogate (pairs are joined by the parser).

    The bounded reader refuses such text with its own message; whatever it accepts holds none.
    """
    if "\\u" not in line:
        return False
    try:
        loads_bounded(line, what="message", max_bytes=len(line) * 4 + 4)
    except JSONInputError as exc:
        return "lone surrogate" in str(exc)
    return False


def _first_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS - 1] + "…"


def error_for(exc: Exception) -> types.JSONRPCError | None:
    """The JSON-RPC error that answers a line the SDK refused with `exc`, or None (not a request)."""
    if not isinstance(exc, pydantic.ValidationError):
        return None
    errors = exc.errors(include_url=False)
    if not errors:
        return None
    first = errors[0]
    raw = first.get("input")
    crowded = first["type"] == "json_invalid" and isinstance(raw, str) and raw.endswith(CROWDED_MARK + "\n")
    cut = crowded or (first["type"] == "json_invalid" and isinstance(raw, str) and raw.endswith(CUT_MARK + "\n"))
    if crowded:
        code, message = types.PARSE_ERROR, (f"Parse error: the message holds more than {MAX_LINE_VALUES} JSON "
                                            "values")
    elif cut:
        code, message = types.PARSE_ERROR, f"Parse error: the message is longer than {MAX_LINE_BYTES} bytes"
    elif first["type"] == "json_invalid" and isinstance(raw, str) and _holds_lone_surrogate(raw):
        # The SDK's parser says "unexpected end of hex escape": name the real cause.
        code, message = types.PARSE_ERROR, ("Parse error: the message holds a lone surrogate (an unpaired "
                                            "\\uD800-\\uDFFF escape), which is not Unicode text")
    elif first["type"] == "json_invalid":
        code, message = types.PARSE_ERROR, f"Parse error: {first['msg']}"
    else:
        # The request's own complaint when it looks like one, else the first.
        chosen = next((e for e in errors if e["loc"][:1] == ("JSONRPCRequest",)), first)
        where = ".".join(str(p) for p in chosen["loc"][1:])
        code, message = types.INVALID_REQUEST, f"Invalid request: {chosen['msg']}" + (f" at {where}" if where else "")
    members: dict[str, Any] | None = None
    if first["type"] == "json_invalid" and isinstance(raw, str):
        members = top_level_scalars(raw)  # the SDK's parser gave up: the line itself
    else:  # the parsed message, which pydantic names as the input of a missing field
        members = next((e["input"] for e in errors if isinstance(e.get("input"), dict)
                        and {"jsonrpc", "id", "method"} & set(e["input"])), None)

    def reply(request_id: Any) -> types.JSONRPCError:
        return types.JSONRPCError(jsonrpc="2.0", id=request_id,
                                  error=types.ErrorData(code=code, message=_first_line(message)))

    if members is None:
        return reply(None)
    if cut:
        # Only the line's head was read: it is a response only when the head says so, and a
        # missing id may lie past the head (a request can send it last), so it is no sign of a
        # notification: such a line is answered with id null rather than left waiting.
        if "method" not in members and {"result", "error"} & members.keys():
            return None
        if "id" not in members:
            return reply(None)
    elif "method" not in members:
        # A response to one of our requests is never answered; what is no message at all gets id null.
        return None if "id" in members else reply(None)
    elif "id" not in members:
        return None  # a notification: never answered
    request_id = members["id"]
    # The reply carries the id back: it must be one JSON-RPC allows, and text that can be sent.
    valid = (isinstance(request_id, str) and _encodable(request_id)) or (
        isinstance(request_id, int) and not isinstance(request_id, bool))
    return reply(request_id if valid else None)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the SDK could not write the reply
        return False
    return True


class AnsweringUnreadable:
    """The SDK's read stream, with every unreadable line answered on `write_stream` and left out."""

    def __init__(self, read_stream: Any, write_stream: Any) -> None:
        self._read, self._write = read_stream, write_stream

    @property
    def last_context(self) -> Any:
        return getattr(self._read, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._read.receive()
            if not isinstance(item, Exception):
                return item
            reply = error_for(item)
            log.warning("fabric-jev mcp: a message could not be read (%s)%s", type(item).__name__,
                        "; answered with an error" if reply is not None else "")
            if reply is not None:
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    await self._write.send(SessionMessage(reply))

    def __aiter__(self) -> AnsweringUnreadable:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._read.aclose()

    async def __aenter__(self) -> AnsweringUnreadable:
        await self._read.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                        exc_tb: TracebackType | None) -> bool | None:
        result: bool | None = await self._read.__aexit__(exc_type, exc_val, exc_tb)
        return result
