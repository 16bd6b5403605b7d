"""Errors of the browser connector (all are fabric_jev JevErrors)."""

from __future__ import annotations

from fabric_jev import JevError


class BrowserError(JevError):
    """Base class of browser connector errors."""


class CDPError(BrowserError):
    """The browser answered a command with a protocol error."""

    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(f"CDP {method} failed: {message} (code {code})")
        self.method = method
        self.code = code
        self.cdp_message = message


class NavigationError(BrowserError):
    """Page.navigate reported `errorText` (the page did not load)."""

    def __init__(self, url: str, error_text: str) -> None:
        super().__init__(f"navigation to {url} failed: {error_text}")
        self.url = url
        self.error_text = error_text


class CallTimeout(BrowserError):
    def __init__(self, method: str, timeout_ms: int) -> None:
        super().__init__(f"CDP {method} timed out after {timeout_ms} ms")
        self.method = method


class ConnectionLost(BrowserError):
    """The websocket dropped; every pending call failed. Reconnect explicitly."""


class NotConnected(BrowserError):
    pass


class EvaluationFailed(BrowserError):
    """The page threw while evaluating an expression."""


class BrowserPolicyError(BrowserError):
    """A call the connector's configuration does not allow."""


class LaunchError(BrowserError):
    pass
