"""`fabric-jev serve --workers N`: N processes answering on one port.

As uvicorn's own workers do it: the parent binds the socket once, and each worker, a process
started with multiprocessing's `spawn`, inherits it and accepts on it (the kernel hands each
connection to one of them). uvicorn's supervisor runs `uvicorn.Server.run` in each worker; this
one runs `serve()` instead, so that every worker has the guard in front of uvicorn's protocol, its
own evaluator and its own limits (per-client counts are per worker).

The parent stops every worker on SIGTERM or SIGINT (SIGTERM to each, then SIGKILL to one still
alive past the shutdown grace), and a worker stops by itself when its parent is gone: it watches
its end of a pipe whose other end only the parent holds. A worker that dies while serving is
replaced; one that dies before it is ready stops them all (it would fail the same way again).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import socket
from dataclasses import dataclass, field
from functools import partial
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .._signals import stopped_by_signals

if TYPE_CHECKING:
    from ..contract.config import HostConfig

log = logging.getLogger("fabric_jev.serve")
_spawn = multiprocessing.get_context("spawn")


@dataclass(frozen=True)
class WorkerOptions:
    """What a worker needs to build its evaluator and serve (pickled to it)."""

    evaluator: str | None
    config: HostConfig
    serve: dict[str, Any] = field(default_factory=dict)
    #: Seconds a worker gets to finish after SIGTERM before it is killed.
    grace_s: float = 6.0


class WorkerFailed(Exception):
    """A worker ended before it was ready to serve."""


def _worker(sock: socket.socket, options: WorkerOptions, conn: Connection) -> None:
    """A worker's process: serve on the inherited socket until SIGTERM/SIGINT or the parent's end."""
    # A SIGINT before the handlers are in place: the parent stops this worker anyway.
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(_work, sock, options, conn)


async def _work(sock: socket.socket, options: WorkerOptions, conn: Connection) -> None:
    from ..evaluators.select import build_evaluator
    from .server import serve

    evaluator = build_evaluator(options.evaluator, options.config)
    try:
        async with stopped_by_signals() as tg:
            async def stop_with_parent() -> None:
                await anyio.wait_readable(conn.fileno())  # EOF: the parent is gone
                tg.cancel_scope.cancel()

            tg.start_soon(stop_with_parent)
            await serve(evaluator, sock=sock, ready=lambda port: conn.send(port), **options.serve)
    finally:
        await evaluator.aclose()


class Workers:
    """The parent's side: start, watch, replace and stop the workers."""

    def __init__(self, count: int, sock: socket.socket, options: WorkerOptions) -> None:
        self.count, self.sock, self.options = count, sock, options
        self.processes: list[tuple[BaseProcess, Connection]] = []

    def _start_one(self) -> tuple[BaseProcess, Connection]:
        mine, theirs = _spawn.Pipe()
        process = _spawn.Process(target=_worker, args=(self.sock, self.options, theirs),
                                 name="fabric-jev-serve-worker")
        process.start()
        theirs.close()  # only the worker holds its end: it reads EOF when the parent is gone
        return process, mine

    async def _ready(self, process: BaseProcess, conn: Connection) -> None:
        def wait() -> None:
            from multiprocessing.connection import wait as wait_for

            wait_for([conn, process.sentinel])
            if not conn.poll():
                raise WorkerFailed(f"a serve worker ended before it was ready (exit code {process.exitcode})")
            try:
                conn.recv()
            except EOFError:
                raise WorkerFailed(f"a serve worker ended before it was ready (exit code {process.exitcode})") from None

        await anyio.to_thread.run_sync(wait, abandon_on_cancel=True)

    async def start(self) -> None:
        """Start every worker and return once all are ready (WorkerFailed if one is not)."""
        for _ in range(self.count):
            self.processes.append(self._start_one())
        for process, conn in self.processes:
            await self._ready(process, conn)

    async def watch(self) -> None:
        """Replace a worker that dies while serving; return never (cancel it to stop)."""
        while True:
            sentinels = [process.sentinel for process, _ in self.processes]
            await anyio.to_thread.run_sync(partial(multiprocessing.connection.wait, sentinels),
                                           abandon_on_cancel=True)
            for index, (process, conn) in enumerate(self.processes):
                if process.exitcode is not None:
                    log.warning("fabric-jev serve: worker %s ended (exit code %s); starting another",
                                process.pid, process.exitcode)
                    conn.close()
                    replacement = self._start_one()
                    self.processes[index] = replacement
                    await self._ready(*replacement)

    def stop(self) -> None:
        """SIGTERM to each worker, then wait for each (SIGKILL past the grace). Blocking."""
        for process, _ in self.processes:
            if process.exitcode is None:
                process.terminate()
        for process, conn in self.processes:
            process.join(self.options.grace_s)
            if process.exitcode is None:
                process.kill()
                process.join()
            conn.close()
        self.processes.clear()

    @property
    def pids(self) -> list[int]:
        return [process.pid for process, _ in self.processes if process.pid is not None]
