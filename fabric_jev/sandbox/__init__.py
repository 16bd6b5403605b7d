"""QuickJS guest workers: processes, framing, the warm pool."""

from .connection import WorkerConnection, WorkerGone
from .pool import Worker, WorkerPool

__all__ = ["Worker", "WorkerConnection", "WorkerGone", "WorkerPool"]
