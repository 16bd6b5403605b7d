"""Capabilities: exact refs mapped to async handlers, and the connector protocol.

`fabric_jev.protocol` re-exports the public names; they live here so the host
can type its connectors without importing the layer above it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..contract.policy import RISKS, Risk
from ..contract.program import REF_PATTERN
from ..errors import CapabilityError

CapabilityHandler = Callable[[Any, "CallContext"], Awaitable[Any]]


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
        self._risks: dict[str, Risk] = {}

    def register(self, ref: str, handler: CapabilityHandler, risk: Risk = "execute") -> None:
        """Register `ref`; its risk picks the approvals policy every call passes (default execute)."""
        if not REF_PATTERN.fullmatch(ref) or not 3 <= len(ref) <= 256:
            raise CapabilityError(f"invalid capability ref {ref!r}")
        if ref.startswith("jev."):
            raise CapabilityError(f"the jev.* namespace is reserved for the host: {ref}")
        if ref in self._handlers:
            raise CapabilityError(f"capability {ref} is already registered")
        if risk not in RISKS:
            raise CapabilityError(f"capability {ref} has an unknown risk {risk!r} "
                                  f"(risks: {', '.join(RISKS)})")
        self._handlers[ref] = handler
        self._risks[ref] = risk

    def risk(self, ref: str) -> Risk:
        """The declared risk of a registered ref; anything unknown counts as execute."""
        return self._risks.get(ref, "execute")

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
