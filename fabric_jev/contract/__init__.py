"""Pure contract code: models and validators, no I/O."""

from .budget import RunBudget
from .config import EffectiveLimits, HostConfig
from .envelope import Envelope, ProgressEvent, RunState, Usage
from .evaluation import Evaluation, EvaluationRequest, validate_answers, validate_request
from .program import Program, ProgramLimits, parse_program
from .schema_subset import check_schema
from .values import ValueRejected, check_value, normalize_json

__all__ = [
    "EffectiveLimits",
    "Envelope",
    "Evaluation",
    "EvaluationRequest",
    "HostConfig",
    "Program",
    "ProgramLimits",
    "ProgressEvent",
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
