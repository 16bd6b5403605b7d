"""The host: lifecycle, budgets, progress, capabilities, observers.

Names load on first use: a host that never binds a session does not pay for the
observer machinery (observe options, redaction rules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..approval.question import Approver, CapabilityCall, ClassifierVerdict, Unavailable
    from ..capabilities import CallContext
    from .calls import EvaluationListener
    from .host import JevHost
    from .observers import Advice, AdviceLatch, MainSession, Observer
    from .registry import CapabilityRegistry

_LAZY = {
    "JevHost": ".host", "EvaluationListener": ".calls",
    **dict.fromkeys(("Advice", "AdviceLatch", "MainSession", "Observer"), ".observers"),
    **dict.fromkeys(("Approver", "CapabilityCall", "Unavailable", "ClassifierVerdict"), "..approval.question"),
    "CallContext": "..capabilities", "CapabilityRegistry": ".registry",
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = ["Advice", "AdviceLatch", "Approver", "CallContext", "CapabilityCall", "CapabilityRegistry",
           "ClassifierVerdict", "EvaluationListener", "JevHost", "MainSession", "Observer", "Unavailable"]
