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
* worker channel (``SOCK_STREAM``): the messages and framing of ``_wire.py``.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import select
import signal
import socket
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import _wire
    from ._confine import confine, die_with_parent
else:  # started by path: this directory is sys.path[0]
    import _wire
    from _confine import confine, die_with_parent

#: The JS heap limit is clamped to at most 64 MiB, so the address space cap can
#: be set before the run's own (possibly lower) limit is known.
_MAX_HEAP = 64 * 1024 * 1024


class _Channel:
    """Blocking framed socket used by the worker side; sends go out in batches."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbox = _wire.FrameBuffer()
        self.outbox: list[bytes] = []

    def flush(self) -> None:
        """Everything one slice produced, in one syscall."""
        if self.outbox:
            data = b"".join(self.outbox) if len(self.outbox) > 1 else self.outbox[0]
            self.outbox.clear()
            with contextlib.suppress(OSError):  # the host is gone: the next read says so
                self.sock.sendall(data)

    def fill(self) -> bool:
        chunk = self.sock.recv(1 << 18)
        if not chunk:
            return False
        self.inbox.feed(chunk)
        return True

    def read_one(self) -> _wire.Message:
        while True:
            frames = self.inbox.frames()
            if frames:
                (tag, payload), = frames  # the host sends nothing before Ready
                return _wire.decode(tag, payload)
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
    # The program is compiled below as many blank lines as the prelude has, so
    # the prelude's own stack frames can never be taken for the program's.
    prelude_lines = prelude.count("\n") + 1

    load = chan.read_one()
    if not isinstance(load, _wire.Load):
        os._exit(2)
    slice_s: float = load.slice_ms / 1000.0
    hard_s: float = load.hard_slice_ms / 1000.0
    ctx.set_memory_limit(load.memory_bytes)
    ctx.set_max_stack_size(load.stack_bytes)
    ctx.set_time_limit(slice_s)
    signal.setitimer(signal.ITIMER_PROF, hard_s)
    try:
        failed = bridge("load", load.code, load.input_json, prelude_lines, load.memory_bytes)
    except Exception as exc:  # an overrun or out of memory while compiling
        failed = _message(exc)
    signal.setitimer(signal.ITIMER_PROF, 0)
    if failed is not None:
        chan.outbox.append(_wire.encode(_wire.LoadFailed(str(failed))))
        chan.flush()
        os._exit(0)
    # Ready goes out before the program starts: a first slice that the kernel
    # has to kill must read as a timed-out run, not as a program that failed to load.
    chan.outbox.append(_wire.encode(_wire.Ready()))
    chan.flush()

    process_time = time.process_time
    monotonic = time.monotonic
    setitimer = signal.setitimer
    itimer_prof = signal.ITIMER_PROF
    outbox_frame = _wire.outbox_frame
    timer_heap: list[tuple[float, int, int]] = []
    timer_due: dict[int, int] = {}  # timer id -> generation, to skip stale heap entries
    generation = 0

    def run_slice(ops: list[tuple[str, object, object, object]]) -> None:
        # Each resumption of the guest is one CPU slice: the engine's own limit
        # is re-armed before every call and job, and the kernel's profiling
        # timer (SIGPROF, default action: terminate) is the hard backstop for
        # built-ins that never check the interrupt flag. The timer is re-armed
        # at every slice and not disarmed after one: between slices the worker
        # waits in the kernel, spending no CPU, so one syscall per slice is enough.
        start = process_time()
        setitimer(itimer_prof, hard_s)
        for op, a, b, c in ops:
            ctx.set_time_limit(max(1e-6, slice_s - (process_time() - start)) if len(ops) > 1
                               else slice_s)
            bridge(op, a, b, c)
        while True:
            left = slice_s - (process_time() - start)
            if left <= 0:
                raise _SliceOverrun
            ctx.set_time_limit(left)
            if not ctx.execute_pending_job():
                break

    def flush() -> bool:
        """Queue what the slice produced; return True when the program is done."""
        nonlocal generation
        ctx.set_time_limit(-1)
        text: str = bridge("drain", None, None, None)
        newline = text.index("\n")
        if newline > 1:  # timer changes
            changes = json.loads(text[1:newline])
            for tid, delay in changes["t"]:
                generation += 1
                timer_due[tid] = generation
                heapq.heappush(timer_heap, (monotonic() + delay / 1000.0, generation, tid))
            for tid in changes["x"]:
                timer_due.pop(tid, None)
            if len(timer_heap) > 4 * len(timer_due) + 64:
                timer_heap[:] = [e for e in timer_heap if timer_due.get(e[2]) == e[1]]
                heapq.heapify(timer_heap)
        if newline + 1 < len(text):
            chan.outbox.append(outbox_frame(text[newline + 1:]))
        return text[0] == "1"

    def guarded(ops: list[tuple[str, object, object, object]]) -> bool:
        """Run one slice and send its outbox; True when the program is over."""
        try:
            run_slice(ops)
            ended = flush()
        except _SliceOverrun:
            ended = _fatal(chan, _wire.FatalKind.SLICE, "")
        except Exception as exc:
            text = _message(exc)
            if "interrupted" in text:
                ended = _fatal(chan, _wire.FatalKind.SLICE, "")
            elif "out of memory" in text or (exc.__class__.__name__ == "JSException" and not text):
                ended = _fatal(chan, _wire.FatalKind.MEMORY, text)
            elif exc.__class__.__name__ == "StackOverflow":
                ended = _fatal(chan, _wire.FatalKind.STACK, text)
            else:
                ended = _fatal(chan, _wire.FatalKind.ERROR, text)
        chan.flush()
        return ended

    if guarded([("go", None, None, None)]):
        os._exit(0)

    sock_fd = sock.fileno()
    while True:
        frames = chan.inbox.frames()
        if frames:
            # Every answer that arrived together settles in one slice.
            settles: list[tuple[str, object, object, object]] = []
            for tag, payload in frames:
                message = _wire.decode(tag, payload)
                if type(message) is not _wire.Settle:
                    os._exit(2)
                settles.append(("settle", message.call_id, message.ok, message.text))
            if guarded(settles):
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
            if guarded([("timer", tid, None, None)]):
                os._exit(0)


def _message(exc: BaseException) -> str:
    """The engine's first line of an error. Errors of the binding itself (a
    SystemError naming a heap object, a UnicodeError) are reported by class only."""
    if exc.__class__.__name__ not in ("JSException", "StackOverflow"):
        return f"Jev sandbox bridge error ({exc.__class__.__name__})"
    try:
        text = str(exc)
    except Exception:
        return "unprintable error"
    return text.split("\n    at ", 1)[0].strip()


def _fatal(chan: _Channel, kind: _wire.FatalKind, message: str) -> bool:
    chan.outbox.append(_wire.encode(_wire.Fatal(kind, message)))
    return True


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
