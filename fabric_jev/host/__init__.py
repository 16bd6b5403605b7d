"""The host: lifecycle, budgets, progress, capabilities, observers.

Names load on first use: a host that never binds a session does not pay for the
observer machinery (observe options, redaction rules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .host import JevHost
    from .observers import Advice, AdviceLatch, MainSession, Observer
    from .policy import Approver, CapabilityCall
    from .registry import CallContext, CapabilityRegistry

_LAZY = {
    "JevHost": ".host",
    **dict.fromkeys(("Advice", "AdviceLatch", "MainSession", "Observer"), ".observers"),
    "Approver": ".policy", "CapabilityCall": ".policy",
    "CallContext": ".registry", "CapabilityRegistry": ".registry",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fabric_jev.host' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = ["Advice", "AdviceLatch", "Approver", "CallContext", "CapabilityCall", "CapabilityRegistry",
           "JevHost", "MainSession", "Observer"]
