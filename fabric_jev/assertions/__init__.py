"""Smart assertions over page snapshots: queries, predicates, eventually, reasons, diffs."""

from .check import (
    REASONS,
    AssertionFailed,
    Attempt,
    Check,
    CheckResult,
    ProposingVisionProvider,
    SnapshotSource,
    VisionFallback,
    VisionProvider,
    check,
)
from .escalation import Escalation, EscalationPolicy, FailureEvent, FailureKind, RecoveryAction
from .nearest import Near, nearest
from .predicates import (
    Predicate,
    PredicateOutcome,
    all_of,
    any_of,
    element_count,
    exists,
    is_checked,
    is_collapsed,
    is_disabled,
    is_enabled,
    is_expanded,
    is_mixed,
    is_pressed,
    is_selected,
    is_unchecked,
    not_,
    not_exists,
    url_contains,
    url_matches,
    value_contains,
    value_equals,
)
from .query import Condition, Query, QuerySyntaxError, where
from .snapshot import Confidence, Element, Snapshot, confidence
from .snapshot_diff import SnapshotDiff, added, changed, modified, removed
from .vision import AnthropicVision, GeminiVision, OpenAIVision, VisionError, vision_provider

__all__ = [
    "REASONS", "AnthropicVision", "AssertionFailed", "Attempt", "Check", "CheckResult", "Condition", "Confidence",
    "Element", "Escalation", "EscalationPolicy", "FailureEvent", "FailureKind", "GeminiVision", "Near",
    "OpenAIVision", "Predicate", "PredicateOutcome", "ProposingVisionProvider", "Query", "QuerySyntaxError",
    "RecoveryAction", "Snapshot", "SnapshotDiff",
    "SnapshotSource", "VisionError", "VisionFallback", "VisionProvider", "added", "all_of", "any_of", "changed",
    "check", "confidence", "element_count", "exists", "is_checked", "is_collapsed",
    "is_disabled", "is_enabled", "is_expanded", "is_mixed", "is_pressed", "is_selected",
    "is_unchecked", "modified", "nearest", "not_", "not_exists", "removed", "url_contains", "url_matches",
    "value_contains", "value_equals", "vision_provider", "where",
]
