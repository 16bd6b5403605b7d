"""What a connector is and offers: its capabilities, the handler's context, the protocol.

The plugins (`fabric_jev.plugins`), which build connectors, and the host, which
registers them, both type against these names; they live below both so that
imports run one way: the host imports the plugins, and neither imports the other
for a type. `fabric_jev.protocol` re-exports them as the public protocol.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .contract.policy import Risk

CapabilityHandler = Callable[[Any, "CallContext"], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class CallContext:
    """What a handler learns about its caller: the run, never the guest."""

    run_id: str
    run_name: str
    ref: str


@dataclass(frozen=True, slots=True)
class Capability:
    """One capability a connector offers."""

    handler: CapabilityHandler
    risk: Risk = "execute"
    description: str = ""


@runtime_checkable
class Connector(Protocol):
    name: str

    def capabilities(self) -> Mapping[str, Capability]: ...

    async def run_ended(self, run_id: str) -> None:
        """Release what a run held (connections, handles). Called once per run."""
        ...

    async def aclose(self) -> None: ...


__all__ = ["CallContext", "Capability", "CapabilityHandler", "Connector"]
