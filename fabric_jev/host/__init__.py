"""The host: lifecycle, budgets, progress, capabilities, observers."""

from .host import JevHost
from .observers import Advice, AdviceLatch, MainSession, Observer
from .registry import CallContext, CapabilityRegistry

__all__ = ["Advice", "AdviceLatch", "CallContext", "CapabilityRegistry", "JevHost", "MainSession",
           "Observer"]
