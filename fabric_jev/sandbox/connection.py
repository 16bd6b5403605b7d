"""Host end of one worker's socket: bytes out, complete frames in, never blocking.

Sends are synchronous (a settle is written the moment a host call finishes, no
task switch); only when the kernel buffer is full does the remainder wait for
a flusher task. Reads hand back every complete frame a chunk carried (the
framing is `_wire`'s).
"""

from __future__ import annotations

import asyncio
import contextvars
import socket
from collections.abc import Callable

import anyio
import sniffio

from ..errors import JevError
from ._wire import FrameBuffer

_READ_CHUNK = 1 << 18

#: Called with the complete frames that arrived, and whether the worker is gone.
Listener = Callable[[list[tuple[bytes, bytes]], bool], None]


def asyncio_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # another anyio backend (trio)
        return None


class WorkerGone(JevError):
    """The worker's socket reached end-of-file (it exited or was killed). The session turns it
    into how the run ended (`killed` or `crashed`); it never reaches a caller of the host."""


class WorkerConnection:
    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._inbox = FrameBuffer()
        self._outbox = bytearray()
        self._flush_wanted = anyio.Event()
        self._closed = False
        self._eof = False
        # On asyncio, one reader callback stays registered for the connection's
        # life and pulls data as it arrives; registering a reader per wait (as
        # anyio.wait_readable does) costs more than the rest of a host call.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._listener: Listener | None = None

    def fileno(self) -> int:
        return self._sock.fileno()

    @property
    def socket(self) -> socket.socket:
        """The socket itself, for a driver that bypasses the event loop (benchmarks)."""
        return self._sock

    def send(self, data: bytes) -> None:
        """Write encoded frames now, or queue them behind a backlog."""
        if self._closed:
            return
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

    def _pull(self) -> None:
        """Read everything available without blocking; note end-of-file."""
        while not self._eof:
            try:
                chunk = self._sock.recv(_READ_CHUNK)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self._eof = True
                return
            self._inbox.feed(chunk)
            if len(chunk) < _READ_CHUNK:
                return  # drained; another recv would only say EAGAIN

    def _on_readable(self) -> None:
        self._pull()
        if self._eof and self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
        listener = self._listener
        if listener is not None:
            frames = self._inbox.frames()
            if frames or self._eof:
                listener(frames, self._eof)
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _register(self) -> bool:
        if self._loop is None:
            self._loop = asyncio_loop()
            if self._loop is not None and not self._eof:
                # Frames are handled inside this callback, which has no current task
                # for anyio to tell the event loop by: starting a task from it fails
                # unless the library is named in the callback's context. anyio.run
                # names it; plain asyncio.run (a user's script, a Ray actor) does not.
                context = contextvars.copy_context()
                context.run(sniffio.current_async_library_cvar.set, "asyncio")
                self._loop.add_reader(self._sock.fileno(), context.run, self._on_readable)
        return self._loop is not None

    def listen(self, listener: Listener | None) -> bool:
        """On asyncio, hand frames to `listener` from the reader callback itself, with no
        task switch per message (None stops). Returns False on other backends."""
        if self._closed or not self._register():
            return False
        self._listener = listener
        if listener is not None:
            frames = self._inbox.frames()
            if frames or self._eof:
                listener(frames, self._eof)
        return True

    async def receive(self) -> list[tuple[bytes, bytes]]:
        """Wait for at least one complete frame and return all that arrived."""
        while True:
            frames = self._inbox.frames()
            if frames:
                return frames
            if self._eof or self._closed:
                raise WorkerGone
            if self._register():
                assert self._loop is not None
                # The registered reader pulls data as it arrives: just wait for it.
                self._waiter = self._loop.create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
            else:
                await anyio.wait_readable(self._sock)
                self._pull()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._loop is not None and not self._eof:
                self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
