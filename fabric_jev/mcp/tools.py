"""The MCP tools' names, descriptions and schemas (no I/O; the server lives in server.py).

Every input and output schema is derived from a typed model, as FastMCP derives its own
(`schemas.derived_schema`): the tools' arguments (`arguments.py`, `session_tools.py`), and what the
host returns — the envelope, the host's status, an evaluation, the classifier's decision, a type
check. What a model cannot state is listed in `arguments.py` (and docs/mcp.md).
"""

from __future__ import annotations

from typing import Any

from ..approval.classifier import Decision
from ..contract.envelope import Envelope
from ..contract.evaluation import Evaluation
from ..contract.evaluation_shape import EvaluateRequest
from ..host.status import HostStatus
from ..typecheck.verdict import CheckResult
from . import arguments as args
from .schemas import derived_schema
from .session_tools import SESSION_TOOL_MODELS, session_tools

#: Each tool's argument and result models (tests hold the advertised schemas to them). jev_status
#: without an id answers the host's status, with one a run's envelope.
TOOL_MODELS: dict[str, tuple[type[Any], Any]] = {
    "jev_run": (args.Launch, Envelope), "jev_spawn": (args.Launch, Envelope),
    "jev_status": (args.Status, Envelope | HostStatus), "jev_wait": (args.Wait, Envelope),
    "jev_join": (args.Wait, Envelope), "jev_stop": (args.Stop, Envelope), "jev_check": (args.Check, CheckResult),
    "jev_evaluate": (EvaluateRequest, Evaluation), "jev_approve": (args.Approve, Decision),
    **SESSION_TOOL_MODELS,
}

ENVELOPE_SCHEMA = derived_schema(Envelope, mode="serialization")


def arguments_schema(given: Any) -> dict[str, Any]:
    """A tool's input schema. jev_evaluate's model reads its arguments itself (an explicit null
    included, as the contract allows); the others are checked against the schema."""
    return derived_schema(given, absent_not_null=issubclass(given, args.Arguments))


def _spec(name: str, description: str) -> dict[str, Any]:
    given, result = TOOL_MODELS[name]
    return {"description": description, "input": arguments_schema(given),
            "output": derived_schema(result, mode="serialization")}


TOOLS: dict[str, dict[str, Any]] = {
    "jev_run": _spec("jev_run", (
        "Run a judgment program in the foreground and return its terminal envelope "
        "(state, result or error, evaluations, usage, events, logs). Progress events the "
        "program emits are sent as MCP progress notifications.")),
    "jev_spawn": _spec("jev_spawn", (
        "Start a judgment program in the background; returns the running envelope at once "
        "(queued when the host already runs maxConcurrentRuns programs: it starts in turn). "
        "Follow it with jev_status, jev_wait or jev_stop.")),
    "jev_status": _spec("jev_status", (
        "A run's envelope with only the events after `after`; without an id, the host's "
        "status (evaluator route, model, credential presence, runs).")),
    "jev_wait": _spec("jev_wait", (
        "Wait until a run is terminal and return its envelope (its events are sent as "
        "progress notifications meanwhile). With timeoutMs, return the still-running "
        "envelope when it passes. Cancelling the wait does not stop the run.")),
    "jev_stop": _spec("jev_stop", (
        "Stop a run (in-flight evaluations and sleeps are aborted) and return its terminal "
        "envelope. Idempotent. Not a rollback of effects already sent.")),
    "jev_check": _spec("jev_check", (
        "Type-check a judgment program against its own contract before running it (the "
        "TypeScript compiler, for TypeScript and JavaScript programs): a misspelled input "
        "field, a question type or choice option that does not exist, a ref not in "
        "requires, a result off its outputSchema, fetch. Each error has the program's own "
        "line and column. Nothing runs.")),
    "jev_evaluate": _spec("jev_evaluate", (
        "Ask Jev one typed batch of questions (choice, score, noul) about a state and "
        "return the validated answers with probabilities.")),
    "jev_approve": _spec("jev_approve", (
        "Decide whether an agent's proposed action may run without asking the user: allow, "
        "ask or deny, with the reason and the four probabilities. A probabilistic advisor, "
        "not a security boundary.")),
}
# Seed 001: "wait is canonical: jev.join({id}) aliases jev.wait({id})".
TOOLS["jev_join"] = {**TOOLS["jev_wait"],
                     "description": "Alias of jev_wait (wait is canonical): " + TOOLS["jev_wait"]["description"]}

# Observers over MCP: their specs live beside them (session_tools.py), served by sessions.py.
TOOLS.update(session_tools())

#: Tools whose arguments are read by the contract model their input schema is derived from: the
#: model's refusal, in the contract's words, is what the client is told (a JSON Schema validator
#: says only "is not valid under any of the given schemas" of a question with a wrong field).
CHECKED_BY_THEIR_MODEL = frozenset({"jev_evaluate"})
