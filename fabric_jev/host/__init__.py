"""The host: lifecycle, budgets, progress, capabilities."""

from .host import JevHost
from .registry import CallContext, CapabilityRegistry

__all__ = ["CallContext", "CapabilityRegistry", "JevHost"]
