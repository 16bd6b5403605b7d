"""The capability registry: exact refs mapped to async handlers, with their risks.

Only the host fills it. What a connector is and offers (`Connector`, `Capability`,
`CallContext`) is `fabric_jev.capabilities`, below the host and the plugins; the
names stay importable from here.
"""

from __future__ import annotations

from ..capabilities import CallContext, Capability, CapabilityHandler, Connector
from ..contract.policy import RISKS, Risk
from ..contract.program import REF_PATTERN
from ..errors import CapabilityError


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


__all__ = ["CallContext", "Capability", "CapabilityHandler", "CapabilityRegistry", "Connector"]
