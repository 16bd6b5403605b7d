"""fabric-jev: a Python host for sandboxed, typed judgment programs."""

from ._sync import run_program
from .contract import (
    Envelope,
    Evaluation,
    EvaluationRequest,
    HostConfig,
    Program,
    ProgramLimits,
    ProgressEvent,
    RunState,
    Usage,
)
from .contract.observe import ToolResult
from .errors import (
    AnswerInvalid,
    BatchError,
    CapabilityError,
    CompileError,
    ConcurrencyLimitReached,
    ConfigError,
    CredentialError,
    EvaluationError,
    HostClosed,
    InputInvalid,
    JevError,
    LaunchRejected,
    ProgramInvalid,
    RequestInvalid,
    SandboxUnavailable,
    SchemaInvalid,
    UnknownRun,
    UpstreamError,
)
from .evaluators import Evaluator, FixtureEvaluator
from .host import Advice, CallContext, CapabilityRegistry, JevHost, MainSession

__version__ = "0.1.0"

__all__ = [
    "Advice",
    "AnswerInvalid",
    "BatchError",
    "CallContext",
    "CapabilityError",
    "CapabilityRegistry",
    "CompileError",
    "ConcurrencyLimitReached",
    "ConfigError",
    "CredentialError",
    "Envelope",
    "Evaluation",
    "EvaluationError",
    "EvaluationRequest",
    "Evaluator",
    "FixtureEvaluator",
    "HostClosed",
    "HostConfig",
    "InputInvalid",
    "JevError",
    "JevHost",
    "LaunchRejected",
    "MainSession",
    "Program",
    "ProgramInvalid",
    "ProgramLimits",
    "ProgressEvent",
    "RequestInvalid",
    "RunState",
    "SandboxUnavailable",
    "SchemaInvalid",
    "ToolResult",
    "UnknownRun",
    "UpstreamError",
    "Usage",
    "__version__",
    "run_program",
]
