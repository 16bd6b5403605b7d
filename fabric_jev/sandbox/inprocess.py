"""The sandbox without its process boundary, or without a host: reference drivers.

They speak the wire, so they live beside it; the benchmarks time them
(`fabric_jev.benchmarks.yardsticks`).

* `InProcessWorker`: the guest in a QuickJS context inside the host process,
  speaking the same wire, so the same host and session drive it without a
  process boundary (the in-process floor; `InProcessWorkers` is their source,
  given to `JevHost(workers=...)`). `InProcessGuest` is that context.
* `echo_until_done`: a real worker running a program, driven by a bare
  blocking loop that answers every host call at once with `null` — the
  process boundary and the guest's work, with no host logic.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio

from .._runtime_js import runtime_js_path
from . import _wire
from .connection import Listener
from .pool import Worker


class InProcessGuest:
    """One QuickJS context in this process, driven like a worker but without one."""

    def __init__(self) -> None:
        import _quickjs

        prelude = runtime_js_path("prelude.js").read_text(encoding="utf-8")
        self.ctx = _quickjs.Context()
        self.bridge = self.ctx.eval(prelude)
        self.lines = prelude.count("\n") + 1

    def load(self, code: str, input_json: str) -> str | None:
        failed: str | None = self.bridge("load", code, input_json, self.lines)
        return failed

    def step(self, ops: list[tuple[str, object, object, object]]) -> tuple[bool, str]:
        """Run one slice; return (ended, outbox text or "")."""
        self.ctx.set_time_limit(0.1)
        for op in ops:
            self.bridge(*op)
        while self.ctx.execute_pending_job():
            pass
        self.ctx.set_time_limit(-1)
        text: str = self.bridge("drain", None, None, None)
        newline = text.index("\n")
        return text[0] == "1", text[newline + 1:]


class _InProcessTransport:
    def __init__(self) -> None:
        self._guest: InProcessGuest | None = None
        self._frames = _wire.FrameBuffer()
        self._inbox: list[tuple[bytes, bytes]] = []
        self._ready = anyio.Event()
        self._listener: Listener | None = None
        self._scheduled = False

    def _push(self, data: bytes) -> None:
        self._frames.feed(data)
        self._inbox.extend(self._frames.frames())
        if self._listener is not None:
            # Delivered from the loop, as a socket's reader callback would be:
            # never from inside the send that produced it.
            if not self._scheduled:
                self._scheduled = True
                asyncio.get_running_loop().call_soon(self._deliver)
        else:
            self._ready.set()

    def _deliver(self) -> None:
        self._scheduled = False
        frames, self._inbox = self._inbox, []
        if self._listener is not None and frames:
            self._listener(frames, False)

    def listen(self, listener: Listener | None) -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        self._listener = listener
        if listener is not None and self._inbox:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._deliver)
        return True

    def send(self, data: bytes) -> None:
        incoming = _wire.FrameBuffer()
        incoming.feed(data)
        settles: list[tuple[str, Any, Any, Any]] = []
        for message in incoming.messages():
            if isinstance(message, _wire.Load):
                self._guest = InProcessGuest()
                failed = self._guest.load(message.code, message.input_json)
                if failed is not None:
                    self._push(_wire.encode(_wire.LoadFailed(failed)))
                    return
                self._push(_wire.encode(_wire.Ready()))
                self._slice([("go", None, None, None)])
            elif isinstance(message, _wire.Settle):
                settles.append(("settle", message.call_id, message.ok, message.text))
        if settles:
            self._slice(settles)

    def _slice(self, ops: list[tuple[str, Any, Any, Any]]) -> None:
        assert self._guest is not None
        _, text = self._guest.step(ops)
        if text:
            self._push(_wire.outbox_frame(text))

    async def receive(self) -> list[tuple[bytes, bytes]]:
        await self._ready.wait()
        self._ready = anyio.Event()
        frames, self._inbox = self._inbox, []
        return frames

    async def flusher(self) -> None:
        await anyio.sleep_forever()


class InProcessWorkers:
    """A worker source (`JevHost(workers=InProcessWorkers())`) whose workers run the guest in
    this process: the host, session and wire without the process boundary. The floor the host
    is measured against; there is no hard CPU bound (a runaway slice freezes the host), so never
    for programs you do not trust."""

    async def acquire(self) -> InProcessWorker:
        return InProcessWorker()


class InProcessWorker:
    """A stand-in for a pooled worker that runs the guest in this process."""

    pid = 0

    def __init__(self) -> None:
        self.connection = _InProcessTransport()

    async def exit_code(self, timeout: float) -> int | None:
        return 0

    def close(self) -> None:
        self.connection._guest = None


def first_call(guest: InProcessGuest, code: str) -> None:
    """Load `code` and run its first slice, which must make a host call."""
    if guest.load(code, "null") is not None:
        raise RuntimeError("the program does not compile")
    _, text = guest.step([("go", None, None, None)])
    if not json.loads(text)["c"]:
        raise RuntimeError("the guest made no host call")


def echo_until_done(worker: Worker, code: str, input_json: str) -> int:
    """Run `code` in `worker`, answering every host call with `null` from a bare blocking
    loop, until the program ends; returns how many calls were answered."""
    sock = worker.connection.socket
    sock.setblocking(True)
    inbox = _wire.FrameBuffer()

    def read() -> list[_wire.Message]:
        while True:
            messages = inbox.messages()
            if messages:
                return messages
            chunk = sock.recv(1 << 18)
            if not chunk:
                raise RuntimeError("the worker exited")
            inbox.feed(chunk)

    sock.sendall(_wire.encode(_wire.Load(
        code=code, input_json=input_json, slice_ms=100, hard_slice_ms=250,
        memory_bytes=64 << 20, stack_bytes=256 << 10)))
    answered = 0
    while True:
        replies = []
        for message in read():
            if isinstance(message, _wire.Outbox):
                if message.result is not None or message.fault is not None:
                    return answered
                for call in message.calls:
                    replies.append(_wire.encode(_wire.Settle(call.call_id, True, "null")))
            elif not isinstance(message, _wire.Ready):
                raise RuntimeError(f"the worker answered {message!r}")
        if replies:
            answered += len(replies)
            sock.sendall(b"".join(replies))
