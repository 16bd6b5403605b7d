"""A task group that SIGINT or SIGTERM cancels: how a long-lived command (a server, its workers)
stops cleanly, its `finally` blocks and the host's close running, instead of dying mid-write."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.abc


@asynccontextmanager
async def stopped_by_signals() -> AsyncIterator[anyio.abc.TaskGroup]:
    """A task group whose scope the first SIGINT or SIGTERM cancels. The handlers are in place
    before the body runs, so a server announced inside it can always be stopped by a signal."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:
            async def stop_on_signal() -> None:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

            tg.start_soon(stop_on_signal)
            yield tg
            tg.cancel_scope.cancel()  # the body ended: stop waiting for a signal
