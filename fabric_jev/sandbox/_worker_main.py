"""Zygote and guest worker processes.

This file is started by path (``python _worker_main.py CTL_FD PRELUDE``), never
imported by the host, so the zygote and its forked workers load only the
standard library and the ``_quickjs`` C module: no pydantic, no anyio, and no
``quickjs`` package (whose import starts a thread pool that slows SIGKILL).

Protocol with the host:

* control channel (the zygote's inherited ``SOCK_SEQPACKET`` socket), one JSON
  object per packet. Host -> zygote: ``{"fork": n}``. Zygote -> host:
  ``{"ready": pid}``, ``{"worker": pid}`` with the host's end of a fresh
  socketpair attached as SCM_RIGHTS, ``{"exit": pid, "code": c}`` where ``c`` is
  ``os.waitstatus_to_exitcode`` (negative for a signal).
* worker channel (``SOCK_STREAM``), frames of a 4-byte big-endian length, one
  tag byte and a payload. Host -> worker: ``L`` load (JSON), ``G`` go, ``S``
  settle (JSON ``[id, ok, text]``). Worker -> host: ``R`` ready after load,
  ``E`` load error (text), ``O`` outbox after a slice (JSON), ``F`` fatal
  (JSON ``[kind, message]``).
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import select
import signal
import socket
import struct
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._confine import confine, die_with_parent
else:  # started by path: this directory is sys.path[0]
    from _confine import confine, die_with_parent

_HEADER = struct.Struct(">I")
#: The JS heap limit is clamped to at most 64 MiB, so the address space cap can
#: be set before the run's own (possibly lower) limit is known.
_MAX_HEAP = 64 * 1024 * 1024


def _frame(tag: bytes, payload: bytes) -> bytes:
    return _HEADER.pack(len(payload) + 1) + tag + payload


class _Channel:
    """Blocking framed socket used by the worker side."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def send(self, tag: bytes, payload: bytes) -> None:
        self.sock.sendall(_frame(tag, payload))

    def frames(self) -> list[tuple[bytes, bytes]]:
        out = []
        buf = self.buf
        while len(buf) >= 4:
            (size,) = _HEADER.unpack_from(buf, 0)
            if len(buf) < 4 + size:
                break
            out.append((bytes(buf[4:5]), bytes(buf[5 : 4 + size])))
            del buf[: 4 + size]
        return out

    def fill(self) -> bool:
        chunk = self.sock.recv(1 << 18)
        if not chunk:
            return False
        self.buf += chunk
        return True

    def read_one(self) -> tuple[bytes, bytes]:
        while True:
            got = self.frames()
            if got:
                # Load and go are sent one at a time; keep any extra frames.
                first, rest = got[0], got[1:]
                if rest:
                    self.buf[0:0] = b"".join(_frame(t, p) for t, p in rest)
                return first
            if not self.fill():
                os._exit(0)


class _SliceOverrun(Exception):
    pass


def _worker(sock: socket.socket, prelude: str) -> None:
    import _quickjs

    # Confined while idle in the warm pool, before any program exists, so the
    # limits cost nothing at launch.
    confine(_MAX_HEAP, sock.fileno())
    chan = _Channel(sock)
    ctx = _quickjs.Context()
    bridge = ctx.eval(prelude)

    tag, payload = chan.read_one()
    if tag != b"L":
        os._exit(2)
    load = json.loads(payload)
    slice_s: float = load["sliceMs"] / 1000.0
    hard_s: float = load["hardSliceMs"] / 1000.0
    ctx.set_memory_limit(load["memoryBytes"])
    ctx.set_max_stack_size(load["stackBytes"])
    ctx.set_time_limit(slice_s)
    signal.setitimer(signal.ITIMER_PROF, hard_s)
    try:
        bridge("load", load["code"], load["input"], None)
    except Exception as exc:  # a compile error or an overrun while compiling
        signal.setitimer(signal.ITIMER_PROF, 0)
        chan.send(b"E", _message(exc).encode("utf-8", "replace"))
        os._exit(0)
    signal.setitimer(signal.ITIMER_PROF, 0)
    chan.send(b"R", b"")

    tag, _ = chan.read_one()
    if tag != b"G":
        os._exit(2)

    process_time = time.process_time
    monotonic = time.monotonic
    timer_heap: list[tuple[float, int, int]] = []
    timer_due: dict[int, int] = {}  # timer id -> generation, to skip stale heap entries
    generation = 0

    def run_slice(op: str, a: object, b: object, c: object) -> None:
        # Each resumption of the guest is one CPU slice: the engine's own limit
        # is re-armed before every call and job, and the kernel's profiling
        # timer (SIGPROF, default action: terminate) is the hard backstop for
        # built-ins that never check the interrupt flag.
        start = process_time()
        signal.setitimer(signal.ITIMER_PROF, hard_s)
        try:
            ctx.set_time_limit(slice_s)
            bridge(op, a, b, c)
            while True:
                left = slice_s - (process_time() - start)
                if left <= 0:
                    raise _SliceOverrun
                ctx.set_time_limit(left)
                if not ctx.execute_pending_job():
                    break
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)

    def flush() -> bool:
        """Send what the slice produced; return True when the program is done."""
        nonlocal generation
        ctx.set_time_limit(-1)
        text = bridge("drain", None, None, None)
        out = json.loads(text)
        for tid, delay in out["t"]:
            generation += 1
            timer_due[tid] = generation
            heapq.heappush(timer_heap, (monotonic() + delay / 1000.0, generation, tid))
        for tid in out["x"]:
            timer_due.pop(tid, None)
        if len(timer_heap) > 4 * len(timer_due) + 64:
            timer_heap[:] = [e for e in timer_heap if timer_due.get(e[2]) == e[1]]
            heapq.heapify(timer_heap)
        if out["f"] is not None:
            chan.send(b"O", text.encode())
            chan.send(b"F", json.dumps(["error", out["f"]]).encode())
            return True
        if out["c"] or out["l"] or out["d"] is not None:
            chan.send(b"O", text.encode())
        return out["d"] is not None

    def guarded(op: str, a: object = None, b: object = None, c: object = None) -> bool:
        try:
            run_slice(op, a, b, c)
        except _SliceOverrun:
            _fatal(chan, "slice", "")
            return True
        except Exception as exc:
            text = _message(exc)
            if "interrupted" in text:
                _fatal(chan, "slice", "")
            elif "out of memory" in text or (exc.__class__.__name__ == "JSException" and not text):
                _fatal(chan, "memory", text)
            elif exc.__class__.__name__ == "StackOverflow":
                _fatal(chan, "stack", text)
            else:
                _fatal(chan, "error", text)
            return True
        try:
            return flush()
        except Exception as exc:
            _fatal(chan, "memory" if "out of memory" in _message(exc) else "error", _message(exc))
            return True

    if guarded("go"):
        os._exit(0)

    sock_fd = sock.fileno()
    while True:
        for tag, payload in chan.frames():
            if tag == b"S":
                call_id, ok, text = payload.split(b" ", 2)
                if guarded("settle", int(call_id), ok == b"1", text.decode("utf-8", "surrogatepass")):
                    os._exit(0)
        while timer_heap and timer_due.get(timer_heap[0][2]) != timer_heap[0][1]:
            heapq.heappop(timer_heap)
        if not timer_heap:
            # Nothing scheduled: a blocking recv is one syscall instead of two.
            if not chan.fill():
                os._exit(0)
            continue
        timeout = max(0.0, timer_heap[0][0] - monotonic())
        if select.select([sock_fd], [], [], timeout)[0] and not chan.fill():
            os._exit(0)
        now = monotonic()
        while timer_heap and timer_heap[0][0] <= now:
            _, gen, tid = heapq.heappop(timer_heap)
            if timer_due.get(tid) != gen:
                continue
            del timer_due[tid]
            if guarded("timer", tid):
                os._exit(0)


def _message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        return "unprintable error"
    return text.split("\n    at ", 1)[0].strip()


def _fatal(chan: _Channel, kind: str, message: str) -> None:
    with contextlib.suppress(OSError):
        chan.send(b"F", json.dumps([kind, message]).encode())


def _zygote(ctl_fd: int, prelude_path: str) -> None:
    die_with_parent()
    import _quickjs  # noqa: F401  (loaded once here so every fork shares it)

    with open(prelude_path, encoding="utf-8") as f:
        prelude = f.read()
    ctl = socket.socket(fileno=ctl_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ctl.send(json.dumps({"ready": os.getpid()}).encode())

    def fork_worker() -> None:
        host_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.signal(signal.SIGPROF, signal.SIG_DFL)
                ctl.close()
                host_end.close()
                os.close(wake_r)
                os.close(wake_w)
                die_with_parent()
                _worker(worker_end, prelude)
            except BaseException:
                code = 3
            finally:
                os._exit(code)
        worker_end.close()
        try:
            socket.send_fds(ctl, [json.dumps({"worker": pid}).encode()], [host_end.fileno()])
        finally:
            host_end.close()

    while True:
        readable, _, _ = select.select([ctl.fileno(), wake_r], [], [], 1.0)
        if wake_r in readable:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            try:
                ctl.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode())
            except OSError:
                os._exit(0)
        if ctl.fileno() in readable:
            try:
                data = ctl.recv(65536)
            except OSError:
                data = b""
            if not data:
                os._exit(0)
            request = json.loads(data)
            for _ in range(int(request.get("fork", 0))):
                fork_worker()
        if os.getppid() == 1:
            os._exit(0)


if __name__ == "__main__":
    _zygote(int(sys.argv[1]), sys.argv[2])
