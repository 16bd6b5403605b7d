"""The connection guard of `fabric-jev serve`: what uvicorn's settings cannot express.

uvicorn's documented settings cover idle kept-alive connections
(``timeout_keep_alive``), headers trickled past a size (``h11_max_incomplete_event_size``)
and the listen backlog; they are used as they are. Its ``limit_concurrency``
does not fit: it counts every open connection, so sockets that never send a
byte push real clients into 503s. What is missing sits here, in front of
uvicorn's HTTP/1.1 protocol, by composition: the guard is an asyncio
Protocol that owns the socket and hands the bytes on; it uses only the
asyncio Protocol and Transport interfaces, never uvicorn's internals.

* **A cap that sheds the least useful connection first.** At the cap, a new
  connection closes the oldest one that has not yet sent a whole request
  head (whether it sent nothing or a few bytes: under churn, a real client's
  connection is "fresh" for the moment before its bytes are read, so fresh
  ones are not shed before trickling ones), else the oldest kept-alive one
  waiting between requests, else the oldest one still sending its body (a
  body that never ends must not hold a place). A connection whose complete
  request head has arrived, and that the app has not started on yet, is
  kept in reserve: it is never shed for a newcomer, whether its head was
  already read or is still waiting, unread, in its socket (looked at with
  MSG_PEEK: a burst of accepts comes before the reads). A connection whose whole
  request is in is never shed; only when nothing else can be, the newcomer
  gets a JSON 503 and is closed. Each kind is kept in its own ordered
  table, so choosing whom to shed costs the same at 10,000 connections a
  second as at one.
* **A header timeout** from the connection (or the end of the previous
  response) to the end of the next request's headers; trickling one byte
  at a time cannot reset it.
* **Bytes in slices.** h11 spends ~10 µs per event, and a chunked body of
  300,000 one-byte chunks is 300,000 events: handed over in one piece, one
  read of it holds the event loop for a second while every other client
  waits. Large reads are handed on 4 KiB per loop turn instead, and the
  socket stops being read while a backlog is pending.
"""

from __future__ import annotations

import asyncio
import enum
import socket
from collections.abc import Callable
from typing import Any

from .limits import ServeLimits

#: Bytes handed to the HTTP protocol per loop turn: ~700 one-byte chunks, a few milliseconds of h11.
SLICE_BYTES = 4096
#: Bytes held back before the socket stops being read (asyncio reads up to 256 KiB at a time).
BACKLOG_BYTES = 65536

Peer = tuple[str, int]


class Phase(enum.Enum):
    """Where a connection is in its request cycle."""

    #: Connected, not a byte received yet.
    FRESH = 0
    #: Kept alive after a response; nothing of the next request received yet.
    IDLE = 1
    #: Bytes of a request received, its headers not complete (the app has not been called).
    READING = 2
    #: Headers complete and accepted (authenticated, when a key is set); the body still arriving.
    RECEIVING = 3
    #: The whole request is in: the app is serving it. Never shed.
    SERVING = 4


#: The sheddable phases, in the order they are shed: those without a whole request head first
#: (fresh or reading alike, by age), then kept-alive ones, then bodies still arriving.
_SHED_GROUP = {Phase.FRESH: 0, Phase.READING: 0, Phase.IDLE: 1, Phase.RECEIVING: 2}
#: The same by a phase's number: an Enum member hashes in Python, four phase changes a request.
_GROUP_OF: tuple[int | None, ...] = tuple(_SHED_GROUP.get(phase) for phase in sorted(Phase, key=lambda p: p.value))
#: Connections looked at for one newcomer before a group is given up as all in reserve.
_LOOKS_PER_GROUP = 64
_PEEK_BYTES = 16384
_HEAD_END = b"\r\n\r\n"


def overloaded(message: str) -> bytes:
    """A complete JSON 503 `overloaded` response that closes the connection."""
    body = ('{"detail": {"error_type": "overloaded", "message": "' + message + '"}}').encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)


class Connections:
    """The open connections of one server: the cap, shedding order, and who is serving a request."""

    def __init__(self, limits: ServeLimits) -> None:
        self.limits = limits
        cap = limits.max_connections
        self.busy = overloaded(f"All {cap} connections are serving requests; retry later")
        self.make_room = overloaded(f"Closed to make room for a request ({cap} connections at most); retry")
        self.count = 0  # admitted and not closed
        # Sheddable connections per group, oldest first (dicts keep insertion order).
        self._groups: tuple[dict[Guard, None], ...] = ({}, {}, {})
        self._by_peer: dict[Peer, Guard] = {}

    def admit(self, guard: Guard) -> bool:
        if self.count >= self.limits.max_connections:
            victim = self._victim()
            if victim is None:
                return False
            victim.shed()
        self.count += 1
        guard.admitted = True
        self._groups[0][guard] = None
        if guard.peer is not None:
            self._by_peer[guard.peer] = guard
        return True

    def _victim(self) -> Guard | None:
        """The oldest connection of the first group that has one not in reserve."""
        for group in self._groups:
            for looked, guard in enumerate(group):
                if looked >= _LOOKS_PER_GROUP:
                    break
                if not guard.sent_a_head():
                    return guard
        return None

    def moved(self, guard: Guard, before: Phase, after: Phase) -> None:
        """Keep the tables in step with a phase change (fresh to reading keeps its age)."""
        old, new = _GROUP_OF[before._value_], _GROUP_OF[after._value_]
        if old == new:
            return
        if old is not None:
            self._groups[old].pop(guard, None)
        if new is not None:
            self._groups[new][guard] = None

    def forget(self, guard: Guard) -> None:
        if not guard.admitted:
            return
        guard.admitted = False
        self.count -= 1
        group = _SHED_GROUP.get(guard.phase)
        if group is not None:
            self._groups[group].pop(guard, None)
        if guard.peer is not None and self._by_peer.get(guard.peer) is guard:
            del self._by_peer[guard.peer]

    def find(self, peer: Any) -> Guard | None:
        """The connection of an ASGI scope's ``client`` (its peer address)."""
        return self._by_peer.get(peer) if isinstance(peer, tuple) else None


class _ProtocolTransport(asyncio.Transport):
    """The transport the HTTP protocol sees: the real one, except that its pausing of reads is
    combined with the guard's (reading goes on only when neither wants a pause), and that a
    response's head and body leave in one send.

    uvicorn writes a response's head and its body separately, one send each: two syscalls and
    two wake-ups of the client. A response head is held back and leaves with the next write
    (the body, written in the same step); a head with nothing after it in that step (100
    Continue, say) leaves at the end of the step. Closing hands anything held over first."""

    def __init__(self, real: asyncio.Transport, guard: Guard) -> None:
        super().__init__()
        self._real, self._guard = real, guard
        self._held: bytes | None = None
        self._loop = asyncio.get_running_loop()

    def _flush(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            self._real.write(held)

    def pause_reading(self) -> None:
        self._guard.protocol_paused = True
        self._guard.update_reading()

    def resume_reading(self) -> None:
        self._guard.protocol_paused = False
        self._guard.update_reading()
        self._guard.schedule_feed()

    def is_reading(self) -> bool:
        return not self._guard.protocol_paused and not self._real.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._real.get_extra_info(name, default)

    def is_closing(self) -> bool:
        return self._real.is_closing()

    def close(self) -> None:
        self._flush()
        self._real.close()

    def abort(self) -> None:
        self._held = None
        self._real.abort()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._real.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._real.get_protocol()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        held = self._held
        if held is not None:
            self._held = None
            self._real.write(held + bytes(data))
        elif data[:5] == b"HTTP/" and data[-4:] == b"\r\n\r\n":
            self._held = bytes(data)  # a head: it waits for its body, at most to the step's end
            self._loop.call_soon(self._flush)
        else:
            self._real.write(data)

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def write_eof(self) -> None:
        self._flush()
        self._real.write_eof()

    def can_write_eof(self) -> bool:
        return self._real.can_write_eof()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._real.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self._real.get_write_buffer_size() + (0 if self._held is None else len(self._held))

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._real.get_write_buffer_limits()


class Guard(asyncio.Protocol):
    """One connection: admitted or refused, timed while it reads headers, fed in slices."""

    def __init__(self, connections: Connections, make_protocol: Callable[[], asyncio.Protocol]) -> None:
        self.connections = connections
        self._make_protocol = make_protocol
        self.protocol: asyncio.Protocol | None = None
        self.transport: asyncio.Transport | None = None
        self.peer: Peer | None = None
        self.phase = Phase.FRESH
        self.admitted = False
        #: The request head being read is complete (its blank line has arrived).
        self.headed = False
        self._tail = b""  # the last bytes of the head so far: its blank line may span two reads
        self.protocol_paused = False
        self._backlog = bytearray()
        self._eof = False
        self._feeding: asyncio.Handle | None = None
        #: When the request head being waited for must be complete (None: none is waited for).
        self._header_deadline: float | None = None
        #: One timer at a time, for the deadline it was armed with (`_armed_for`); a deadline that
        #: moves on does not re-arm it: a timer per request was a tenth of the guard's time.
        self._header_timer: asyncio.TimerHandle | None = None
        self._armed_for = 0.0
        self._loop = asyncio.get_running_loop()

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # Responses leave in two writes (head, body): without this, Nagle's algorithm holds
            # the second until the client's delayed ACK, ~40 ms later. asyncio sets it itself
            # only on sockets made with proto IPPROTO_TCP, which an accepted socket may not be.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        self.peer = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
        if not self.connections.admit(self):
            transport.write(self.connections.busy)
            transport.close()
            return
        self.protocol = self._make_protocol()
        self.protocol.connection_made(_ProtocolTransport(transport, self))
        self._time_headers()

    def data_received(self, data: bytes) -> None:
        if self.protocol is None:
            return  # refused or shed: nothing more is read
        if self.phase in (Phase.FRESH, Phase.IDLE):
            self._enter(Phase.READING)
        if self.phase is Phase.READING and not self.headed:
            self.headed = _HEAD_END in data or (bool(self._tail) and _HEAD_END in self._tail + data[:3])
            self._tail = data[-3:]
        if not self._backlog and not self.protocol_paused and len(data) <= SLICE_BYTES:
            self.protocol.data_received(data)  # the common case: a small read, handed on at once
            return
        self._backlog += data
        self.update_reading()
        self.schedule_feed()

    def eof_received(self) -> bool | None:
        if self.protocol is None:
            return None
        if self._backlog:
            self._eof = True  # handed on once the backlog is
            return True
        return self.protocol.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.connections.forget(self)
        self._stop_header_timer()
        if self._header_timer is not None:  # a closed connection holds no timer
            self._header_timer.cancel()
            self._header_timer = None
        if self._feeding is not None:
            self._feeding.cancel()
            self._feeding = None
        self._backlog.clear()
        if self.protocol is not None:
            self.protocol.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.protocol is not None:
            self.protocol.pause_writing()

    def resume_writing(self) -> None:
        if self.protocol is not None:
            self.protocol.resume_writing()

    # ------------------------------------------------------------ request cycle (from the app)

    def request_started(self) -> None:
        """The headers are in and the app reads the body (the body timeout is the app's)."""
        self._enter(Phase.RECEIVING)
        self._stop_header_timer()

    def body_received(self) -> None:
        if self.phase is Phase.RECEIVING:
            self._enter(Phase.SERVING)

    def request_finished(self) -> None:
        if self.transport is None or self.transport.is_closing() or self.protocol is None:
            return
        # Bytes of a pipelined request may already be in; otherwise it waits, kept alive.
        self.headed, self._tail = False, b""
        self._enter(Phase.IDLE)
        self._time_headers()

    # ------------------------------------------------------------ shedding and timing

    def shed(self) -> None:
        """Close to make room for a newcomer; a half-sent request learns why."""
        self.connections.forget(self)
        if self.transport is None or self.transport.is_closing():
            return
        if self.phase is not Phase.IDLE:  # between requests a close is the ordinary keep-alive end
            self.transport.write(self.connections.make_room)
        self.transport.close()

    def _enter(self, phase: Phase) -> None:
        before, self.phase = self.phase, phase
        if self.admitted:
            self.connections.moved(self, before, phase)

    def sent_a_head(self) -> bool:
        """Whether a complete request head has arrived: handed on already, or still unread in the
        socket (a connection accepted in the same burst as many others is read only later)."""
        if self.phase is Phase.RECEIVING:
            return False  # its head was accepted; a body that never ends must not hold a place
        if self.headed:
            return True
        if self.phase is Phase.READING or self.transport is None:
            return False  # bytes read, and no blank line among them
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return False
        try:
            peek = socket.socket(sock.family, sock.type, sock.proto, fileno=sock.fileno())
        except OSError:
            return False
        try:
            waiting = peek.recv(_PEEK_BYTES, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except OSError:  # nothing waiting (EAGAIN), or the peer is gone
            waiting = b""
        finally:
            peek.detach()  # the fd stays the transport's
        return _HEAD_END in waiting

    def _time_headers(self) -> None:
        self._header_deadline = self._loop.time() + self.connections.limits.header_timeout_s
        if self._header_timer is None:
            self._arm(self._header_deadline)

    def _stop_header_timer(self) -> None:
        self._header_deadline = None  # an armed timer finds nothing to do when it fires

    def _arm(self, deadline: float) -> None:
        self._armed_for = deadline
        self._header_timer = self._loop.call_at(deadline, self._headers_timer_fired)

    def _headers_timer_fired(self) -> None:
        self._header_timer = None
        deadline = self._header_deadline
        if deadline is None:
            return
        if deadline > self._armed_for:  # the deadline moved on (a later request): wait for it
            self._arm(deadline)
            return
        self._headers_too_slow()

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self.phase is not Phase.SERVING and self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # ------------------------------------------------------------ feeding in slices

    def update_reading(self) -> None:
        """Read the socket only while the protocol wants bytes and the backlog is short."""
        if self.transport is None:
            return
        if self.protocol_paused or len(self._backlog) >= BACKLOG_BYTES:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    def schedule_feed(self) -> None:
        if self._feeding is None and self._backlog and not self.protocol_paused:
            self._feeding = self._loop.call_soon(self._feed)

    def _feed(self) -> None:
        self._feeding = None
        if self.protocol is None or self.transport is None or self.transport.is_closing():
            self._backlog.clear()
            return
        if self.protocol_paused:
            return  # resumed by the protocol's resume_reading
        piece = bytes(self._backlog[:SLICE_BYTES])
        del self._backlog[:SLICE_BYTES]
        self.protocol.data_received(piece)
        if self._backlog:
            self.schedule_feed()
        elif self._eof:
            self._eof = False
            if not self.protocol.eof_received():
                self.transport.close()
        self.update_reading()


def guarded(protocol_class: type[asyncio.Protocol], connections: Connections) -> type[asyncio.Protocol]:
    """A protocol class for uvicorn's ``http`` setting: `protocol_class` behind a `Guard`.

    uvicorn makes its protocol with keyword arguments (config, server_state,
    app_state, _loop); they are passed on unchanged when the connection is
    admitted.
    """

    class GuardedProtocol(Guard):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(connections, lambda: protocol_class(**kwargs))

    return GuardedProtocol
