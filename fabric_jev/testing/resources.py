"""Read what a test needs to see of the host and its connectors, through public faces only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..host import JevHost


def worker_pid(host: JevHost, run_id: str) -> int:
    """The process id of the worker that ran (or runs) `run_id`, from `JevHost.worker_pid`.

    For tests that watch or signal the worker: once the run is terminal the
    worker is gone and the id may belong to another process.
    """
    return host.worker_pid(run_id)


def open_connections(connector: object) -> dict[str, object]:
    """A connector's open connections by run id (a copy), from its public `open_connections`.

    The browser connector keeps one CDP connection per run that called
    `browser.connect`, until the run ends; a test that a run's connection did not
    outlive the run asserts this is empty.
    """
    found = getattr(connector, "open_connections", None)
    if not isinstance(found, Mapping):
        raise TypeError(f"{type(connector).__name__} does not report its open connections "
                        "(it has no open_connections mapping)")
    return dict(found)


__all__ = ["open_connections", "worker_pid"]
