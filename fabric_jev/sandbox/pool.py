"""A warm pool of guest worker processes forked by a zygote.

The zygote is a small Python process that has already loaded the QuickJS C
module; forking it costs a few milliseconds, far less than starting Python.
Idle workers wait, context created, for a program. Every run gets a process
of its own and the process is discarded afterwards, so nothing of one run can
reach the next.

Process hygiene: the zygote dies with its parent (PR_SET_PDEATHSIG) and
workers die with the zygote, so neither can outlive a killed host. The host
kills workers through a pidfd (no pid-reuse race) and learns exit codes from
the zygote, which reaps them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from contextvars import ContextVar
from pathlib import Path
from types import TracebackType

import anyio
import anyio.abc

from .._process import wait_process_exit
from .._runtime_js import runtime_js_path
from ..errors import SandboxUnavailable
from .connection import WorkerConnection

_WORKER_MAIN = Path(__file__).with_name("_worker_main.py")
_EXIT_CODES_KEPT = 1024


class Zygote:
    """A started zygote process and the host's end of its control socket.

    Started by the pool as it is entered, or earlier by a command that will
    need a worker (`early_zygote`), so the zygote imports the engine on the
    other core while the command imports the host. The process is the same
    either way: a child of this thread, dying with it (PR_SET_PDEATHSIG).
    """

    def __init__(self, forks: int = 0) -> None:
        host_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process: subprocess.Popen[bytes] = subprocess.Popen(
                [sys.executable, "-s", str(_WORKER_MAIN), str(zygote_end.fileno()),
                 str(runtime_js_path("prelude.js"))],
                pass_fds=[zygote_end.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                close_fds=True,
            )
        except BaseException:
            host_end.close()
            raise
        finally:
            zygote_end.close()
        host_end.setblocking(False)
        self.ctl = host_end
        #: Workers asked for before a pool took the zygote over (the zygote reads them once ready).
        self.requested = 0
        self.adopted = False
        if forks > 0:
            with suppress(OSError):
                self.ctl.send(json.dumps({"fork": forks}).encode())
                self.requested = forks

    async def aclose(self) -> None:
        """Kill a zygote no pool took over (its workers die with it) and reap it."""
        with suppress(ProcessLookupError):
            self.process.kill()
        self.ctl.close()
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await wait_process_exit(self.process)


#: A zygote started ahead of its pool: the next pool entered in this context takes it over.
_EARLY: ContextVar[Zygote | None] = ContextVar("fabric_jev_early_zygote", default=None)


@asynccontextmanager
async def early_zygote(forks: int = 1) -> AsyncIterator[None]:
    """Start the zygote now, with `forks` workers asked for, for the first pool entered inside.

    For a command that will run a program but has a lot to import first. On
    leaving, a zygote no pool took over is killed and reaped; one a pool took
    over is that pool's to close.
    """
    zygote = Zygote(forks)
    token = _EARLY.set(zygote)
    try:
        yield
    finally:
        _EARLY.reset(token)
        if not zygote.adopted:
            await zygote.aclose()


#: How long after a worker is taken its replacement is asked for (see `WorkerPool._top_up_soon`).
_TOP_UP_PAUSE_S = 0.005


class Worker:
    """One forked guest process, owned by a single run."""

    def __init__(self, pid: int, sock: socket.socket, pool: WorkerPool) -> None:
        self.pid = pid
        self.connection = WorkerConnection(sock)
        self._pool = pool
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except OSError:
            self._pidfd = None  # already gone; the socket will say so

    def kill(self) -> None:
        """SIGKILL the worker. Safe to call twice and after it has exited."""
        if self._pidfd is not None:
            with suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    async def exit_code(self, timeout: float) -> int | None:
        return await self._pool.exit_code(self.pid, timeout)

    def close(self) -> None:
        self.kill()
        self.connection.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        self._pool.forget(self.pid)


class WorkerPool:
    """Keeps ``warm`` idle workers ready; used as an async context manager."""

    def __init__(self, warm: int = 2) -> None:
        self._warm = max(0, warm)
        self._idle: deque[Worker] = deque()
        self._requested = 0
        self._waiters: deque[anyio.Event] = deque()
        self._exits: OrderedDict[int, int] = OrderedDict()
        self._exit_events: dict[int, anyio.Event] = {}
        self._ctl: socket.socket | None = None
        self._zygote: subprocess.Popen[bytes] | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._closing = False
        self._broken: str | None = None
        self._top_up_due = False

    async def __aenter__(self) -> WorkerPool:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self._start_zygote()
        except BaseException:
            await self.aclose()  # the zygote too, if it was started
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _start_zygote(self) -> None:
        zygote = _EARLY.get()
        if zygote is None or zygote.adopted or zygote.process.poll() is not None:
            zygote = Zygote()
        zygote.adopted = True
        self._zygote, self._ctl, self._requested = zygote.process, zygote.ctl, zygote.requested
        with anyio.fail_after(30):
            msg = await self._recv_ctl()
        if msg is None or "ready" not in msg[0]:
            raise SandboxUnavailable("the sandbox zygote did not start")
        assert self._tg is not None
        self._tg.start_soon(self._read_ctl)
        self._request(self._warm - self._requested)

    async def _recv_ctl(self) -> tuple[dict[str, int], list[int]] | None:
        assert self._ctl is not None
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self._ctl, 4096, 4)
            except BlockingIOError:
                await anyio.wait_readable(self._ctl)
                continue
            except OSError:
                return None
            if not data:
                return None
            return json.loads(data), fds

    async def _read_ctl(self) -> None:
        while True:
            got = await self._recv_ctl()
            if got is None:
                if not self._closing:
                    self._broken = "the sandbox zygote exited unexpectedly"
                    for waiter in self._waiters:
                        waiter.set()
                return
            msg, fds = got
            if "worker" in msg and fds:
                self._requested = max(0, self._requested - 1)
                worker = Worker(msg["worker"], socket.socket(fileno=fds[0]), self)
                for extra in fds[1:]:
                    os.close(extra)
                if self._closing:
                    worker.close()
                    continue
                self._idle.append(worker)
                if self._waiters:
                    self._waiters.popleft().set()
            elif "exit" in msg:
                self._exits[msg["exit"]] = msg["code"]
                while len(self._exits) > _EXIT_CODES_KEPT:
                    self._exits.popitem(last=False)
                event = self._exit_events.pop(msg["exit"], None)
                if event is not None:
                    event.set()

    def _request(self, count: int) -> None:
        if count <= 0 or self._ctl is None:
            return
        self._requested += count
        with suppress(OSError):
            self._ctl.send(json.dumps({"fork": count}).encode())

    async def acquire(self) -> Worker:
        """Take an idle worker (forking one if none is ready) and top the pool up."""
        while True:
            if self._closing:
                raise SandboxUnavailable("the sandbox pool is closed")
            if self._broken is not None:
                raise SandboxUnavailable(self._broken)
            if self._idle:
                worker = self._idle.popleft()
                self._top_up_soon()
                return worker
            event = anyio.Event()
            self._waiters.append(event)
            self._request(len(self._waiters) - self._requested)
            try:
                await event.wait()
            finally:
                with suppress(ValueError):
                    self._waiters.remove(event)

    def _top_up_soon(self) -> None:
        # The spare that replaces a worker just taken is asked for a moment later: forked at once,
        # the zygote's fork and the new worker's start ran on the two cores while the launch that
        # took the worker loaded its program, and its first tick waited for them
        # (docs/performance.md, "Start-up of run"). A launch that finds no idle worker still asks
        # for one at once.
        if self._tg is None:
            self._request(self._warm + len(self._waiters) - len(self._idle) - self._requested)
        elif not self._top_up_due:
            self._top_up_due = True
            self._tg.start_soon(self._top_up)

    async def _top_up(self) -> None:
        await anyio.sleep(_TOP_UP_PAUSE_S)
        self._top_up_due = False
        self._request(self._warm + len(self._waiters) - len(self._idle) - self._requested)

    async def exit_code(self, pid: int, timeout: float) -> int | None:
        if pid not in self._exits:
            event = self._exit_events.setdefault(pid, anyio.Event())
            with anyio.move_on_after(timeout):
                await event.wait()
        return self._exits.get(pid)

    def forget(self, pid: int) -> None:
        self._exits.pop(pid, None)
        self._exit_events.pop(pid, None)

    async def aclose(self) -> None:
        if self._closing:
            return
        self._closing = True
        for waiter in self._waiters:
            waiter.set()
        while self._idle:
            self._idle.popleft().close()
        try:
            # Stop the control reader before its fd is closed and its number reused. Leaving the
            # group re-raises a cancellation of the caller's scope, once the reader has ended:
            # the zygote must still go, so the rest is in `finally`.
            if self._tg is not None:
                tg, self._tg = self._tg, None
                tg.cancel_scope.cancel()
                await tg.__aexit__(None, None, None)
        finally:
            while self._idle:  # any that arrived while the reader was stopping
                self._idle.popleft().close()
            if self._ctl is not None:
                self._ctl.close()
            zygote = self._zygote
            if zygote is not None:
                with suppress(ProcessLookupError):
                    zygote.kill()
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    await wait_process_exit(zygote)
