"""The one definition of the messages between the host and a guest worker.

Standard library only, and light: the zygote imports this file by path, and
every worker it forks carries what it holds (records are named tuples:
dataclasses would pull in `inspect`).

Framing: a 4-byte big-endian length, one tag byte, the payload (the length
counts tag and payload). Frames, not lines: payloads may hold newlines and
be larger than a line reader allows.

Host -> worker
    `Load`     the program and its limits (a line of JSON), then the input's
               JSON text as it is; the worker compiles the program and, if that
               succeeds, answers `Ready` and starts it at once
    `Settle`   the answer to one host call: ``b"<id> <0|1> " + text``, where
               text is JSON when ok and an error message otherwise

Worker -> host
    `Ready`       the program compiled and is running
    `LoadFailed`  the program did not compile (message)
    `Outbox`      what one CPU slice produced: host calls, log lines, and the
                  program's result or fault (JSON written by the prelude)
    `Fatal`       the slice ended the program: ``[kind, message]`` where kind
                  is ``slice`` | ``memory`` | ``stack`` | ``error``

Guest strings may hold lone UTF-16 surrogates, which UTF-8 cannot carry.
The prelude writes them as JSON escapes; the decoder rewrites those escapes
to U+FFFD in the text before parsing (a linear scan, however deep the value),
so nothing that leaves the sandbox layer is unprintable.
"""

from __future__ import annotations

import enum
import json
import re
import struct
from typing import Any, NamedTuple

HEADER = struct.Struct(">I")
_LOAD, _SETTLE, _READY, _LOAD_FAILED, _OUTBOX, _FATAL = b"L", b"S", b"R", b"E", b"O", b"F"
# Every JSON escape, taken whole and left to right, so `\\ud800` (an escaped
# backslash, then text) is never read as a surrogate escape: a high+low pair
# first, then a lone surrogate (group 1), then any other escape.
# Compiled by `re` on its first use (its cache keeps it): the host loads this module on every run, and
# most never see a surrogate escape (fabric_jev/_patterns.py; this module is the worker's too, so
# it imports nothing of the package).
_ESCAPE = (r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
           r"|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})|\\.")


# ---------------------------------------------------------------- messages


class Load(NamedTuple):
    code: str
    input_json: str
    slice_ms: int
    hard_slice_ms: int
    memory_bytes: int
    stack_bytes: int


class Settle(NamedTuple):
    call_id: int
    ok: bool
    text: str


class Ready(NamedTuple):
    """The program compiled and is running."""


class LoadFailed(NamedTuple):
    message: str


class HostCall(NamedTuple):
    """One guest call waiting for a `Settle`: ``kind`` is sleep, emit, evaluate, tool, …"""

    call_id: int
    kind: str
    args: Any


class Outbox(NamedTuple):
    """What one CPU slice produced."""

    calls: list[HostCall]
    logs: list[str]
    #: The program's end, once it has one: ``(True, value)`` or ``(False, message)``.
    result: tuple[bool, Any] | None
    #: An uncaught error in a timer callback, which ends the program.
    fault: str | None


class FatalKind(enum.StrEnum):
    """What ended a program inside a slice (the session maps each to how the run ends)."""

    SLICE = "slice"  # the slice overran its time
    MEMORY = "memory"
    STACK = "stack"
    ERROR = "error"  # any other uncatchable error: the message says which


class Fatal(NamedTuple):
    kind: FatalKind
    message: str


ToWorker = Load | Settle
FromWorker = Ready | LoadFailed | Outbox | Fatal
Message = ToWorker | FromWorker


class ProtocolError(ValueError):
    """A frame that is not part of the protocol."""


# ---------------------------------------------------------------- encoding


def frame(tag: bytes, payload: bytes) -> bytes:
    return HEADER.pack(len(payload) + 1) + tag + payload


def encode(message: Message) -> bytes:
    """One message as one frame."""
    if type(message) is Settle:
        # Error texts are plain strings; `replace` keeps a stray surrogate from
        # failing the encode (the decoder side never produces one).
        text = message.text.encode("utf-8", "replace")
        return frame(_SETTLE, b"%d %d " % (message.call_id, message.ok) + text)
    if isinstance(message, Load):
        # The input is JSON text already: it follows the header as it is, not encoded again.
        head = json.dumps({
            "code": message.code, "sliceMs": message.slice_ms, "hardSliceMs": message.hard_slice_ms,
            "memoryBytes": message.memory_bytes, "stackBytes": message.stack_bytes})
        return frame(_LOAD, head.encode() + b"\n" + message.input_json.encode("utf-8", "replace"))
    if isinstance(message, Outbox):
        return outbox_frame(json.dumps({
            "c": [list(c) for c in message.calls], "l": message.logs,
            "d": None if message.result is None else list(message.result),
            "f": message.fault}))
    if isinstance(message, Ready):
        return frame(_READY, b"")
    if isinstance(message, LoadFailed):
        return frame(_LOAD_FAILED, message.message.encode("utf-8", "replace"))
    if isinstance(message, Fatal):
        return frame(_FATAL, json.dumps([message.kind, message.message]).encode())
    raise TypeError(f"not a wire message: {message!r}")


def outbox_frame(text: str) -> bytes:
    """The worker's path: the prelude already wrote the outbox as JSON text."""
    return frame(_OUTBOX, text.encode("utf-8", "replace"))


# ---------------------------------------------------------------- decoding


def _replace_lone(m: re.Match[str]) -> str:
    return "\\ufffd" if m.group(1) else m.group(0)


_parse = json.JSONDecoder().decode


def _json(payload: bytes) -> Any:
    text = payload.decode("utf-8", "replace")
    # Only a JSON escape can make a lone surrogate: skip the scan without one.
    if b"\\ud" in payload or b"\\uD" in payload:
        text = re.sub(_ESCAPE, _replace_lone, text)
    try:
        return _parse(text)
    except RecursionError:
        # The guest's own stack stops nesting before this; a frame past it is not ours.
        raise ValueError("value nested too deeply") from None


def _text(payload: bytes) -> str:
    # Python's UTF-8 decoder never makes a surrogate: an encoded one is invalid UTF-8, replaced.
    return payload.decode("utf-8", "replace")


def decode(tag: bytes, payload: bytes) -> Message:
    """One frame's message. Raises `ProtocolError` for a frame outside the protocol."""
    try:
        if tag == _OUTBOX:
            out = _json(payload)
            logs = out["l"]
            if logs and not all(type(line) is str for line in logs):
                raise ValueError("log lines must be strings")
            done = out["d"]
            return Outbox([HostCall(*c) for c in out["c"]], logs,
                          None if done is None else (bool(done[0]), done[1]), out["f"])
        if tag == _SETTLE:
            call_id, ok, text = payload.split(b" ", 2)
            return Settle(int(call_id), ok == b"1", text.decode("utf-8", "replace"))
        if tag == _READY:
            return Ready()
        if tag == _LOAD_FAILED:
            return LoadFailed(_text(payload))
        if tag == _FATAL:
            kind, message = _json(payload)
            return Fatal(FatalKind(kind), str(message))
        if tag == _LOAD:
            head, newline, input_json = payload.partition(b"\n")
            if not newline:
                raise ValueError("no input after the header")
            load = json.loads(head)
            return Load(code=load["code"], input_json=input_json.decode("utf-8"), slice_ms=load["sliceMs"],
                        hard_slice_ms=load["hardSliceMs"], memory_bytes=load["memoryBytes"],
                        stack_bytes=load["stackBytes"])
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ProtocolError(f"malformed {tag!r} frame: {exc}") from None
    raise ProtocolError(f"unknown frame tag {tag!r}")


class FrameBuffer:
    """Bytes in, complete frames out; a partial frame waits for more bytes."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    def frames(self) -> list[tuple[bytes, bytes]]:
        out: list[tuple[bytes, bytes]] = []
        buf = self._buf
        start, end = 0, len(buf)
        while end - start >= 4:
            (size,) = HEADER.unpack_from(buf, start)
            if end - start < 4 + size:
                break
            out.append((bytes(buf[start + 4 : start + 5]), bytes(buf[start + 5 : start + 4 + size])))
            start += 4 + size
        if start:
            del buf[:start]
        return out

    def messages(self) -> list[Message]:
        return [decode(tag, payload) for tag, payload in self.frames()]
