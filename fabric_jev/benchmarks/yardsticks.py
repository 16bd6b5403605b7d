"""What the host's speed is measured against (`fabric-jev bench host`), timed here.

* the in-process floor: the guest's QuickJS context in this process, loaded and
  run to its first host call (`sandbox.inprocess.InProcessGuest`);
* the bare echo: a real pooled worker running the same program, answered by a
  bare blocking loop (`sandbox.inprocess.echo_until_done`) — the process
  boundary and the guest's work, with no host logic.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..sandbox.inprocess import InProcessGuest, echo_until_done, first_call
from ..sandbox.pool import WorkerPool


def in_process_launch(code: str) -> float:
    """Milliseconds from nothing to the guest's first host call, in this process."""
    start = time.perf_counter()
    first_call(InProcessGuest(), code)
    return (time.perf_counter() - start) * 1000


async def bare_echo_round_trip(code: str, value: Any, calls: int) -> float:
    """Microseconds per host call: a real worker runs `code`, a bare loop answers."""
    async with WorkerPool(warm=1) as pool:
        worker = await pool.acquire()
        try:
            start = time.perf_counter()
            answered = echo_until_done(worker, code, json.dumps(value))
            return (time.perf_counter() - start) / max(1, answered) * 1e6
        finally:
            worker.close()
