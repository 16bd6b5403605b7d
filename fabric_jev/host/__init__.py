"""The host: lifecycle, budgets, progress, capabilities, observers."""

from .host import JevHost
from .observers import Advice, AdviceLatch, MainSession, Observer
from .policy import Approver, CapabilityCall
from .registry import CallContext, CapabilityRegistry

__all__ = ["Advice", "AdviceLatch", "Approver", "CallContext", "CapabilityCall", "CapabilityRegistry",
           "JevHost", "MainSession", "Observer"]
