"""The auto-approval classifier."""

from .classifier import QUESTIONS, Decision, classify, decide
from .evidence import ApprovalRequest, ProposedAction, build_evidence
from .model_keys import ApprovalModel, parse_model_key
from .settings import ApprovalSettings, settings_path

__all__ = ["QUESTIONS", "ApprovalModel", "ApprovalRequest", "ApprovalSettings", "Decision",
           "ProposedAction", "build_evidence", "classify", "decide", "parse_model_key",
           "settings_path"]
