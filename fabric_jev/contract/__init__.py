"""Pure contract code: models and validators, no I/O.

Names load on first use: a command reads only the contract modules it needs
(a trivial `fabric-jev run` never builds the evaluation request's models).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .budget import RunBudget
    from .config import EffectiveLimits, HostConfig
    from .envelope import Envelope, ProgressEvent, RunState, Usage
    from .evaluation import Evaluation, EvaluationRequest, validate_answers, validate_request
    from .program import Program, ProgramLimits, parse_program
    from .provenance import Provenance
    from .schema_subset import check_schema
    from .values import ValueRejected, check_value, normalize_json

_LAZY = {
    "RunBudget": ".budget",
    **dict.fromkeys(("EffectiveLimits", "HostConfig"), ".config"),
    **dict.fromkeys(("Envelope", "ProgressEvent", "RunState", "Usage"), ".envelope"),
    **dict.fromkeys(("Evaluation", "EvaluationRequest", "validate_answers", "validate_request"), ".evaluation"),
    **dict.fromkeys(("Program", "ProgramLimits", "parse_program"), ".program"),
    "Provenance": ".provenance",
    "check_schema": ".schema_subset",
    **dict.fromkeys(("ValueRejected", "check_value", "normalize_json"), ".values"),
}

__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "EffectiveLimits",
    "Envelope",
    "Evaluation",
    "EvaluationRequest",
    "HostConfig",
    "Program",
    "ProgramLimits",
    "ProgressEvent",
    "Provenance",
    "RunBudget",
    "RunState",
    "Usage",
    "ValueRejected",
    "check_schema",
    "check_value",
    "normalize_json",
    "parse_program",
    "validate_answers",
    "validate_request",
]
