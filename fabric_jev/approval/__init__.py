"""The auto-approval classifier.

Names load on first use: reading the user's approval settings (every `run`) does
not pay for the classifier, its evidence builder and the redaction rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .classifier import QUESTIONS, Decision, classify, decide
    from .evidence import ApprovalRequest, ProposedAction, build_evidence
    from .model_keys import ApprovalModel, parse_model_key
    from .settings import ApprovalSettings, settings_path

_LAZY = {
    **dict.fromkeys(("QUESTIONS", "Decision", "classify", "decide"), ".classifier"),
    **dict.fromkeys(("ApprovalRequest", "ProposedAction", "build_evidence"), ".evidence"),
    "ApprovalModel": ".model_keys", "parse_model_key": ".model_keys",
    "ApprovalSettings": ".settings", "settings_path": ".settings",
}

__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = ["QUESTIONS", "ApprovalModel", "ApprovalRequest", "ApprovalSettings", "Decision",
           "ProposedAction", "build_evidence", "classify", "decide", "parse_model_key",
           "settings_path"]
