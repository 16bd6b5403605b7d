"""`Page`, the page users hold: a `Tab` (the page model, tab.py) that also gives
`fabric_jev.testing` what it looks at: a snapshot source for checks (`PageSource`)
and channels for plans (`BrowserChannels`). It stands above both, so the layers
below it never import upward."""

from __future__ import annotations

# EvaluationFailed, ELEMENT_DEFAULTS, expand_snapshot and snapshot_script were defined here
# before the connector was layered; they live below now and are still importable from here.
from .checks import PageSource
from .errors import EvaluationFailed
from .frames import ELEMENT_DEFAULTS, expand_snapshot
from .scripts import snapshot_script
from .tab import ActionHook, Tab
from .verification import BrowserChannels


class Page(Tab):
    """A page target (`Tab`) that checks and plans can be given directly."""

    def snapshot_source(self) -> PageSource:
        """A snapshot source on this page, tracking its actions (`PageSource`): what
        `fabric_jev.testing`'s checks take when given the page (once per page)."""
        return PageSource(self)

    def verification_channels(self) -> BrowserChannels:
        """Verification channels on this page: what `fabric_jev.testing`'s plans replay on."""
        return BrowserChannels(self)


__all__ = ["ELEMENT_DEFAULTS", "ActionHook", "EvaluationFailed", "Page", "expand_snapshot", "snapshot_script"]
