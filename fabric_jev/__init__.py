"""fabric-jev: a Python host for sandboxed, typed judgment programs.

Names are imported on first use (PEP 562): `import fabric_jev` stays cheap, and a
script that only needs `run_program` never pays for the HTTP client or numpy.

Extras (``pip install --find-links DIR 'fabric-jev[browser,mcp]'``, DIR being the
wheelhouse ``./scripts/wheelhouse DIR`` builds in a clone): ``browser`` (the CDP
browser connector, fabric-jev-browser), ``mcp`` (``fabric-jev mcp``), ``report``
(matplotlib charts for ``fabric-jev calibrate --report`` and ``fabric-jev eval
--report``), ``datasets`` (``fabric-jev eval`` on Hugging Face datasets exports),
``ray`` (``fabric-jev batch --ray``), ``gguf`` (``--evaluator gguf:FILE``),
``otel`` (OpenTelemetry traces), ``bench`` (the peers ``fabric-jev bench``
measures).
"""

import types as _types
import typing as _typing

from ._lazy import lazy_exports as _lazy_exports
from .errors import (
    AnswerInvalid,
    BatchError,
    CapabilityError,
    CassetteMiss,
    CheckFailed,
    CompileError,
    ConcurrencyLimitReached,
    ConfigError,
    CredentialError,
    DictionaryInvalid,
    EvalError,
    EvaluationError,
    HostCallRefused,
    HostClosed,
    InputInvalid,
    JevError,
    LabelsInvalid,
    LaunchRejected,
    PlanInvalid,
    ProfileInvalid,
    ProgramInvalid,
    QuerySyntaxError,
    ReaderFailed,
    RequestInvalid,
    SandboxUnavailable,
    SchemaInvalid,
    TypeScriptError,
    UnknownRun,
    UpstreamError,
)

if _typing.TYPE_CHECKING:
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
    from .contract.values import JsonInput, JsonObject, JsonValue
    from .evaluators import Evaluator, FixtureEvaluator
    from .evaluators.base import EvaluatorStatus
    from .evaluators.select import evaluator_from_spec
    from .host import Advice, Approver, CallContext, CapabilityCall, CapabilityRegistry, JevHost, MainSession
    from .host.status import HostStatus, RunSummary
    from .program_files import load_program

__version__ = "0.1.0"

#: Lazily exported name → the module that defines it.
_LAZY = {
    "run_program": "._sync",
    **dict.fromkeys(("Envelope", "Evaluation", "EvaluationRequest", "HostConfig", "Program",
                     "ProgramLimits", "ProgressEvent", "RunState", "Usage"), ".contract"),
    "ToolResult": ".contract.observe",
    "JsonInput": ".contract.values", "JsonObject": ".contract.values", "JsonValue": ".contract.values",
    "Evaluator": ".evaluators.base", "EvaluatorStatus": ".evaluators.base",
    "HostStatus": ".host.status", "RunSummary": ".host.status",
    "FixtureEvaluator": ".evaluators.fixture",
    "evaluator_from_spec": ".evaluators.select",
    "load_program": ".program_files",
    **dict.fromkeys(("Advice", "Approver", "CallContext", "CapabilityCall", "CapabilityRegistry", "JevHost",
                     "MainSession"), ".host"),
}


__getattr__ = _lazy_exports(__name__, _LAZY)


def __dir__() -> list[str]:
    loaded = {name for name, value in globals().items() if isinstance(value, _types.ModuleType)}
    return sorted(set(__all__) | loaded)


__all__ = [
    "Advice",
    "AnswerInvalid",
    "Approver",
    "BatchError",
    "CallContext",
    "CapabilityCall",
    "CapabilityError",
    "CapabilityRegistry",
    "CassetteMiss",
    "CheckFailed",
    "CompileError",
    "ConcurrencyLimitReached",
    "ConfigError",
    "CredentialError",
    "DictionaryInvalid",
    "Envelope",
    "EvalError",
    "Evaluation",
    "EvaluationError",
    "EvaluationRequest",
    "Evaluator",
    "EvaluatorStatus",
    "FixtureEvaluator",
    "HostCallRefused",
    "HostClosed",
    "HostConfig",
    "HostStatus",
    "InputInvalid",
    "JevError",
    "JevHost",
    "JsonInput",
    "JsonObject",
    "JsonValue",
    "LabelsInvalid",
    "LaunchRejected",
    "MainSession",
    "PlanInvalid",
    "ProfileInvalid",
    "Program",
    "ProgramInvalid",
    "ProgramLimits",
    "ProgressEvent",
    "QuerySyntaxError",
    "ReaderFailed",
    "RequestInvalid",
    "RunState",
    "RunSummary",
    "SandboxUnavailable",
    "SchemaInvalid",
    "ToolResult",
    "TypeScriptError",
    "UnknownRun",
    "UpstreamError",
    "Usage",
    "__version__",
    "evaluator_from_spec",
    "load_program",
    "run_program",
]
