"""fabric-jev's raw Chrome DevTools Protocol connector.

Names load on first use, so `fabric-jev --help` (which imports the plugin
record in `plugin.py`) does not pay for websockets.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cdp import CDPConnection
    from .connector import BrowserConfig, BrowserConnector
    from .errors import (
        BrowserError,
        BrowserPolicyError,
        CallTimeout,
        CDPError,
        ConnectionLost,
        EvaluationFailed,
        LaunchError,
        NavigationError,
        NotConnected,
    )
    from .launcher import LaunchedBrowser, launch_chromium
    from .page import Page
    from .tab import Tab

_LAZY = {
    "CDPConnection": ".cdp",
    "BrowserConfig": ".connector", "BrowserConnector": ".connector",
    **dict.fromkeys(("BrowserError", "BrowserPolicyError", "CallTimeout", "CDPError", "ConnectionLost",
                     "EvaluationFailed", "LaunchError", "NavigationError", "NotConnected"), ".errors"),
    "LaunchedBrowser": ".launcher", "launch_chromium": ".launcher",
    "Page": ".page", "Tab": ".tab",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fabric_jev_browser' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "BrowserConfig", "BrowserConnector", "BrowserError", "BrowserPolicyError", "CDPConnection",
    "CDPError", "CallTimeout", "ConnectionLost", "EvaluationFailed", "LaunchError",
    "LaunchedBrowser", "NavigationError", "NotConnected", "Page", "Tab", "launch_chromium",
]
