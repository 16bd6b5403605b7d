"""Capabilities: exact refs mapped to async handlers, and the connector protocol.

`fabric_jev.protocol` re-exports the public names; they live here so the host
can type its connectors without importing the layer above it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from ..contract.program import REF_PATTERN
from ..errors import CapabilityError

CapabilityHandler = Callable[[Any, "CallContext"], Awaitable[Any]]
Risk = Literal["read", "write", "execute"]


@dataclass(frozen=True, slots=True)
class CallContext:
    """What a handler learns about its caller: the run, never the guest."""

    run_id: str
    run_name: str
    ref: str


class CapabilityRegistry:
    """Maps exact refs (``connector.capability``) to handlers. No wildcards."""

    def __init__(self) -> None:
        self._handlers: dict[str, CapabilityHandler] = {}

    def register(self, ref: str, handler: CapabilityHandler) -> None:
        if not REF_PATTERN.match(ref) or not 3 <= len(ref) <= 256:
            raise CapabilityError(f"invalid capability ref {ref!r}")
        if ref.startswith("jev."):
            raise CapabilityError(f"the jev.* namespace is reserved for the host: {ref}")
        if ref in self._handlers:
            raise CapabilityError(f"capability {ref} is already registered")
        self._handlers[ref] = handler

    def unregister(self, ref: str) -> None:
        self._handlers.pop(ref, None)

    def get(self, ref: str) -> CapabilityHandler | None:
        return self._handlers.get(ref)

    def __contains__(self, ref: object) -> bool:
        return ref in self._handlers

    def refs(self) -> list[str]:
        return sorted(self._handlers)


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
