"""The Ray actor of a batch: one JevHost with its own warm worker pool, in one node slot.

This module does not import Ray: `ray_backend` wraps `JevActor` with
`ray.remote` at run time, so the class travels by reference and every node
needs fabric-jev installed (docs/scale.md).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

import anyio

from ..contract.config import HostConfig
from ..contract.program import Program, parse_program
from ..evaluators.base import EvaluatorStatus
from .local_backend import run_item
from .records import BatchItem, BatchOutcome


class JevActor:
    """Owns a host and its evaluator for the actor's lifetime; `run` is called concurrently.

    The programs it runs are handed over once each (`add_program`), then named
    by their number in every `run`: an eval runs each variant of its program
    on the same actors, and a program's code does not travel with every input.
    The host is entered and exited by one task of its own (`_own`): a task
    group must be left by the task that entered it, and actor calls each run
    in a task of their own.
    """

    def __init__(self, config: dict[str, Any], evaluator: str | None) -> None:
        self._config = HostConfig.model_validate(config)
        self._evaluator = evaluator
        self._programs: dict[int, Program] = {}
        self._status: EvaluatorStatus | None = None
        self._host: Any = None
        self._ready: anyio.Event | None = None
        self._stop: anyio.Event | None = None
        self._failure: BaseException | None = None

    async def start(self) -> tuple[str, EvaluatorStatus]:
        """Start the host; returns the node's host name and the evaluator's status (route, model,
        credential presence only: never a key)."""
        import asyncio

        self._ready, self._stop = anyio.Event(), anyio.Event()
        self._owner = asyncio.get_running_loop().create_task(self._own())
        await self._ready.wait()
        if self._failure is not None:
            raise self._failure
        assert self._status is not None
        return socket.gethostname(), self._status

    async def _own(self) -> None:
        from ..evaluators.select import build_evaluator
        from ..host import JevHost

        assert self._ready is not None and self._stop is not None
        try:
            evaluator = build_evaluator(self._evaluator, self._config)
            async with JevHost(self._config, evaluator=evaluator) as host:
                self._status = evaluator.status()
                self._host = host
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:  # reported to the driver by start()
            self._failure = exc
        finally:
            self._host = None
            self._ready.set()

    async def add_program(self, number: int, program: Mapping[str, object]) -> None:
        self._programs[number] = parse_program(program)

    async def run(self, item: BatchItem, program: int, judgments: bool = False) -> BatchOutcome:
        """One input through program number `program`; with `judgments`, the outcome keeps the
        answers the program received (they travel back with it)."""
        if self._host is None:
            raise RuntimeError("the batch actor's host is not running")
        return await run_item(self._host, self._programs[program], item, judgments=judgments)

    async def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
            await self._owner
