"""Host end of one worker's socket: length-prefixed frames, never blocking.

Sends are synchronous (a settle is written the moment a host call finishes, no
task switch); only when the kernel buffer is full does the remainder wait for
a flusher task. Reads hand back every complete frame a chunk carried.
"""

from __future__ import annotations

import socket
import struct

import anyio

_HEADER = struct.Struct(">I")
_READ_CHUNK = 1 << 18


class WorkerGone(Exception):
    """The worker's socket reached end-of-file (it exited or was killed)."""


class WorkerConnection:
    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._inbox = bytearray()
        self._outbox = bytearray()
        self._flush_wanted = anyio.Event()
        self._closed = False

    def fileno(self) -> int:
        return self._sock.fileno()

    def send(self, tag: bytes, payload: bytes) -> None:
        if self._closed:
            return
        data = _HEADER.pack(len(payload) + 1) + tag + payload
        if not self._outbox:
            try:
                sent = self._sock.send(data)
            except BlockingIOError:
                sent = 0
            except OSError:
                return  # the reader will see the worker gone
            if sent == len(data):
                return
            data = data[sent:]
        self._outbox += data
        self._flush_wanted.set()

    async def flusher(self) -> None:
        """Drain the backlog whenever the socket was full. Runs until cancelled."""
        while True:
            await self._flush_wanted.wait()
            self._flush_wanted = anyio.Event()
            while self._outbox and not self._closed:
                await anyio.wait_writable(self._sock)
                try:
                    sent = self._sock.send(self._outbox)
                except BlockingIOError:
                    continue
                except OSError:
                    self._outbox.clear()
                    break
                del self._outbox[:sent]

    def _complete_frames(self) -> list[tuple[bytes, bytes]]:
        frames: list[tuple[bytes, bytes]] = []
        buf = self._inbox
        start = 0
        end = len(buf)
        while end - start >= 4:
            (size,) = _HEADER.unpack_from(buf, start)
            if end - start < 4 + size:
                break
            frames.append((bytes(buf[start + 4 : start + 5]), bytes(buf[start + 5 : start + 4 + size])))
            start += 4 + size
        if start:
            del buf[:start]
        return frames

    async def receive(self) -> list[tuple[bytes, bytes]]:
        """Wait for at least one complete frame and return all that arrived."""
        while True:
            frames = self._complete_frames()
            if frames:
                return frames
            try:
                chunk = self._sock.recv(_READ_CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self._sock)
                continue
            except OSError as exc:
                raise WorkerGone from exc
            if not chunk:
                raise WorkerGone
            self._inbox += chunk

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._sock.close()
