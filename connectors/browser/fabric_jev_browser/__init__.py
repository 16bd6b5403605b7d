"""fabric-jev's raw Chrome DevTools Protocol connector."""

from .cdp import CDPConnection
from .connector import BrowserConfig, BrowserConnector
from .errors import (
    BrowserError,
    BrowserPolicyError,
    CallTimeout,
    CDPError,
    ConnectionLost,
    LaunchError,
    NavigationError,
    NotConnected,
)
from .launcher import LaunchedBrowser, launch_chromium
from .page import EvaluationFailed, Page

__all__ = [
    "BrowserConfig", "BrowserConnector", "BrowserError", "BrowserPolicyError", "CDPConnection",
    "CDPError", "CallTimeout", "ConnectionLost", "EvaluationFailed", "LaunchError",
    "LaunchedBrowser", "NavigationError", "NotConnected", "Page", "launch_chromium",
]
