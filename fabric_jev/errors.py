"""The exception tree. Every error fabric-jev raises derives from JevError.

Defined here and exported from `fabric_jev`, but for the few a room defines for its own
callers, which name the room and are exported from it.

    JevError
    ├── LaunchRejected            a run was not created (contract §2)
    │   ├── HostClosed
    │   ├── ConcurrencyLimitReached
    │   ├── ProgramInvalid        malformed program, arguments or observe options
    │   ├── SchemaInvalid         a schema outside the supported subset
    │   ├── InputInvalid          input not finite JSON, too large, or off-schema
    │   ├── CapabilityError       bad, recursive or missing refs
    │   └── CompileError          the code does not compile
    │       └── TypeScriptError   type errors (`diagnostics`), a check that could not finish,
    │                             or TypeScript that annotation erasure refused
    ├── UnknownRun                unknown or expired run id
    ├── ConfigError               an invalid host configuration
    │   └── ProfileInvalid        a local-evaluator profile that cannot be used
    ├── LabelsInvalid             a labels file (or cassette read as labels) with a bad line
    ├── SandboxUnavailable        worker processes cannot be started
    ├── WorkerGone                (sandbox) a worker's socket closed: the session ends the run killed or crashed
    ├── ValueRejected             (contract) a value not finite JSON, too large or off its schema (a ValueError)
    ├── CheckerUnavailable        (typecheck) no TypeScript compiler is installed
    ├── CompilerStopped           (typecheck) the compiler hit its time or memory cap, or failed
    ├── ListenError               (serve) the port cannot be listened on (an OSError, with its errno)
    ├── RuleError                 (approval.rules) a permission rule that cannot be read (a ValueError)
    ├── BatchError                a batch's files or cluster cannot be used (fabric_jev.batch)
    ├── EvalError                 an eval's dataset, settings, results or summary cannot be used
    ├── HostCallRefused           a guest's host call was refused (the guest sees the message)
    ├── EvaluationError           jev.evaluate failed (see evaluators)
    │   ├── RequestInvalid        the request breaks contract §5
    │   ├── AnswerInvalid         the upstream answer breaks contract §5
    │   │   ├── NoValidLabel      (evaluators.readout) none of the labels among the next tokens
    │   │   └── DistributionRefused (evaluators.readout) listed next tokens that are not a distribution
    │   ├── UpstreamError         HTTP status, timeout, transport (no bodies)
    │   ├── CredentialError       a key could not be found or produced
    │   └── CassetteMiss          a request a cassette does not hold, in a mode that may not record it
    ├── QuerySyntaxError          an assertion query that does not parse
    ├── VisionError               (assertions) a vision endpoint could not be asked, or answered off shape
    ├── DictionaryInvalid         a verification dictionary, plan or binding breaks the rules
    │   └── PlanInvalid
    ├── ReaderFailed              a verification reader raised (terminal for its check)
    └── CheckFailed               a required check did not hold (also an AssertionError)
        ├── AssertionFailed       (assertions) a required smart assertion failed
        └── VerificationFailed    (verification) a replayed verification check failed

Messages never carry credentials, response bodies or host stack traces.
"""

from __future__ import annotations

from typing import Any

MAX_ERROR_CHARS = 2000


def clip_error(message: str) -> str:
    """Error strings that reach an envelope are cut to 2,000 characters."""
    return message if len(message) <= MAX_ERROR_CHARS else message[: MAX_ERROR_CHARS - 1] + "…"


class JevError(Exception):
    """Base class of every fabric-jev error."""


class LaunchRejected(JevError):
    """The run was not launched; nothing was created."""


class HostClosed(LaunchRejected):
    pass


class ConcurrencyLimitReached(LaunchRejected):
    pass


class ProgramInvalid(LaunchRejected):
    pass


class SchemaInvalid(LaunchRejected):
    pass


class InputInvalid(LaunchRejected):
    pass


class CapabilityError(LaunchRejected):
    pass


class CompileError(LaunchRejected):
    pass


class TypeScriptError(CompileError):
    """The TypeScript compiler found type errors (listed, and in `diagnostics`), could not finish
    its check, or erasure refused TypeScript it cannot run (enum, namespace, ...)."""

    def __init__(self, message: str, *, diagnostics: tuple[Any, ...] = ()) -> None:
        super().__init__(message)
        #: The errors as `fabric_jev.typecheck.Diagnostic`s (line, column, code, message), if any.
        self.diagnostics = diagnostics


class UnknownRun(JevError):
    def __init__(self, run_id: str = "") -> None:
        super().__init__("Unknown or expired Jev run ID")
        self.run_id = run_id


class ConfigError(JevError):
    pass


class SandboxUnavailable(JevError):
    pass


class EvaluationError(JevError):
    pass


class RequestInvalid(EvaluationError):
    pass


class AnswerInvalid(EvaluationError):
    pass


class UpstreamError(EvaluationError):
    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class CredentialError(EvaluationError):
    pass


class CassetteMiss(EvaluationError):
    """A request a cassette does not hold, in a mode that may not record it (`cassette:FILE`, or
    a pytest cassette under `none`); `digest` is the request's cassette digest."""

    def __init__(self, message: str, digest: str) -> None:
        super().__init__(message)
        self.digest = digest


class HostCallRefused(JevError):
    """A guest's host call was refused; the guest receives the message as a catchable error."""


class QuerySyntaxError(JevError):
    """A query that does not parse; `column` is 1-based."""

    def __init__(self, query: str, column: int, message: str) -> None:
        pointer = " " * (column - 1) + "^"
        super().__init__(f"{message} at column {column}\n  {query}\n  {pointer}")
        self.query = query
        self.column = column


class DictionaryInvalid(JevError):
    """A dictionary (or a plan, or a binding) that breaks the rules; raised before any check runs."""


class PlanInvalid(DictionaryInvalid):
    pass


class ReaderFailed(JevError):
    """A reader raised: terminal for the check, never evidence of absence."""


class CheckFailed(JevError, AssertionError):
    """A required check did not hold. Also an `AssertionError`, so test runners report a failure."""


class BatchError(JevError):
    """A batch cannot go on: an unreadable inputs or output file, or no Ray actor left."""


class EvalError(JevError):
    """An eval cannot go on: its dataset, its settings, its variants, or the results or summary
    files it reads back (fabric_jev.evals). A bad line of a dataset is not one: it is counted."""


class ProfileInvalid(ConfigError):
    pass


class LabelsInvalid(JevError):
    pass
