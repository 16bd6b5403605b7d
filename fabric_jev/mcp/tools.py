"""The MCP tools' names, descriptions and JSON Schemas (no I/O; the server lives in server.py)."""

from __future__ import annotations

from typing import Any

from ..contract.envelope import RunState
from ..contract.evaluation_shape import EvaluateRequest
from .schemas import derived_schema
from .session_tools import session_tools

PROGRAM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A judgment program (docs/programs.md): JavaScript code run in a QuickJS sandbox, "
                   "with JSON Schemas for its input and output.",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 128},
        "code": {"type": "string", "minLength": 1, "maxLength": 65536,
                 "description": "Body of an async function: may await jev.evaluate(...) and return a value."},
        "inputSchema": {"type": "object", "description": "JSON Schema (the supported subset) of `input`."},
        "outputSchema": {"type": "object", "description": "JSON Schema (the supported subset) of the result."},
        "requires": {"type": "array", "maxItems": 64, "uniqueItems": True,
                     "items": {"type": "string", "minLength": 3, "maxLength": 256,
                               "pattern": r"^[a-z][a-z0-9_-]*\.[a-zA-Z0-9_.$-]+$"},
                     "description": "Capabilities the code calls, e.g. jev.evaluate."},
        "limits": {
            "type": "object",
            "properties": {
                "timeoutMs": {"type": "integer", "minimum": 1},
                "maxEvaluations": {"type": "integer", "minimum": 0},
                "maxToolCalls": {"type": "integer", "minimum": 1},
                "maxTokens": {"type": "integer", "minimum": 1},
            },
            "additionalProperties": False,
        },
        "language": {"enum": ["javascript", "typescript"],
                     "description": "What the code is written in (a .ts file's is typescript: type-checked "
                                    "strictly). Omitted: TypeScript only when the code has TypeScript syntax."},
    },
    "required": ["name", "code", "inputSchema", "outputSchema"],
    "additionalProperties": False,
}

#: Any JSON value, with its types spelled out: a generic client (the MCP Inspector) reads an
#: untyped property as a string and would send `{"n": 1}` as that text. One `type` per branch
#: is the portable spelling (a `type` array is not, for single-type dialects).
def either(*types: str) -> dict[str, Any]:
    """A value of any of `types`, one `anyOf` branch each."""
    return {"anyOf": [{"type": t} for t in types]}


ANY_JSON: dict[str, Any] = either("object", "array", "string", "number", "boolean", "null")

_LAUNCH_PROPERTIES: dict[str, Any] = {
    "program": PROGRAM_SCHEMA,
    "programPath": {"type": "string", "minLength": 1, "maxLength": 4096,
                    "description": "A program JSON file, relative to the server's programs folder "
                                   "(fabric-jev mcp --programs DIR); nothing outside it is read."},
    "input": {**ANY_JSON, "description": "The program's input: any JSON value matching its inputSchema "
                                         "(at most 32,768 bytes). Omitted means null."},
}

_ONE_PROGRAM = {"oneOf": [{"required": ["program"]}, {"required": ["programPath"]}]}

#: What the user asked for: the user text the run's capability calls are judged against.
INTENT: dict[str, Any] = {
    "type": "string", "maxLength": 100_000,
    "description": "What the user asked for: the user text the auto-approval classifier judges the run's "
                   "capability calls against, and an asked user sees. Default: the open session's latest "
                   "real input (jev_session_post), read when each call is decided."}

RUN_ID = {"type": "string", "minLength": 1, "maxLength": 64, "description": "A run id from jev_spawn or jev_run."}

EVALUATOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Who answered: route, model (as the answerer named it), readout (logprobs, samples, "
                   "heuristic, systemone, fixture, recorded, unknown, mixed), calibration, profile; "
                   "lowMass lists questions whose valid labels got under half the probability mass.",
    "properties": {"route": {"type": "string"}, "model": {"type": "string"}, "readout": {"type": "string"},
                   "calibration": {"type": "string"}, "profile": {"type": "string"},
                   "samples": {"type": "integer"}, "lowMass": {"type": "array", "items": {"type": "string"}},
                   "replayed": {"type": "boolean"}},
    "required": ["route", "model", "readout"],
}

ENVELOPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "state": {"enum": [state.value for state in RunState]},
        "background": {"type": "boolean"},
        "startedAt": {"type": "string"},
        "endedAt": {"type": "string"},
        "result": {**ANY_JSON, "description": "Present when state is completed."},
        "error": {"type": "string"},
        "evaluations": {"type": "integer", "minimum": 0},
        "toolCalls": {"type": "integer", "minimum": 0},
        "usage": {"type": "object", "properties": {"input_tokens": {"type": "integer"},
                                                     "output_tokens": {"type": "integer"}}},
        "events": {"type": "array", "items": {"type": "object", "properties": {
            "sequence": {"type": "integer"}, "at": {"type": "string"}, "value": ANY_JSON},
            "required": ["sequence", "at", "value"]}},
        "nextSequence": {"type": "integer", "minimum": 1},
        "logs": {"type": "array", "items": {"type": "string"}},
        "observation": {"type": "object"},
        "approvals": {"type": "array", "items": {"type": "object"},
                      "description": "The newest policy decisions on the run's capability calls."},
        "approvalCounts": {"type": "object", "properties": {"allowed": {"type": "integer"},
                                                            "denied": {"type": "integer"}}},
        "evaluator": EVALUATOR_SCHEMA,
    },
    "required": ["id", "name", "state", "background", "startedAt", "evaluations", "toolCalls", "usage",
                 "events", "nextSequence", "logs"],
}

HOST_STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "credentials": {"type": ["object", "null"]},
        "model": {"type": ["string", "null"]},
        "route": {"type": ["string", "null"]},
        "runs": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["runs"],
}

EVALUATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answers": {"type": "object"},
        "usage": {"type": "object", "properties": {"input_tokens": {"type": "integer"},
                                                     "output_tokens": {"type": "integer"}}},
        "model": {"type": ["string", "null"]},
        "evaluator": EVALUATOR_SCHEMA,
    },
    "required": ["answers", "usage"],
}

DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"enum": ["allow", "ask", "deny"]},
        "reason": {"type": "string"},
        "probabilities": {"type": ["object", "null"]},
        "usage": {"type": "object"},
        "model": {"type": ["string", "null"]},
        "redacted": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["decision", "reason"],
}

CHECK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "clean": {"type": "boolean", "description": "No type errors: the program may run."},
        "language": {"enum": ["javascript", "typescript"]},
        "compiler": {"type": "string"},
        "errors": {"type": "integer", "minimum": 0},
        "cut": {"type": "boolean", "description": "There were more errors than were kept."},
        "stopped": {"type": "string", "description": "The check hit its time or memory cap."},
        "diagnostics": {"type": "array", "items": {"type": "object", "properties": {
            "line": {"type": "integer"}, "column": {"type": "integer"}, "code": {"type": "string"},
            "message": {"type": "string"}}, "required": ["line", "column", "code", "message"]}},
    },
    "required": ["name", "clean", "errors", "diagnostics"],
}

TOOLS: dict[str, dict[str, Any]] = {
    "jev_run": {
        "description": "Run a judgment program in the foreground and return its terminal envelope "
                       "(state, result or error, evaluations, usage, events, logs). Progress events the "
                       "program emits are sent as MCP progress notifications.",
        "input": {"type": "object", "properties": {**_LAUNCH_PROPERTIES, "intent": INTENT}, **_ONE_PROGRAM,
                  "additionalProperties": False},
        "output": ENVELOPE_SCHEMA,
    },
    "jev_spawn": {
        "description": "Start a judgment program in the background; returns the running envelope at once "
                       "(queued when the host already runs maxConcurrentRuns programs: it starts in turn). "
                       "Follow it with jev_status, jev_wait or jev_stop.",
        "input": {"type": "object", "properties": {**_LAUNCH_PROPERTIES, "intent": INTENT}, **_ONE_PROGRAM,
                  "additionalProperties": False},
        "output": ENVELOPE_SCHEMA,
    },
    "jev_status": {
        "description": "A run's envelope with only the events after `after`; without an id, the host's "
                       "status (evaluator route, model, credential presence, runs).",
        "input": {"type": "object", "properties": {
            "id": RUN_ID, "after": {"type": "integer", "minimum": 0, "default": 0}},
            "additionalProperties": False},
        "output": {"anyOf": [ENVELOPE_SCHEMA, HOST_STATUS_SCHEMA]},
    },
    "jev_wait": {
        "description": "Wait until a run is terminal and return its envelope (its events are sent as "
                       "progress notifications meanwhile). With timeoutMs, return the still-running "
                       "envelope when it passes. Cancelling the wait does not stop the run.",
        "input": {"type": "object", "properties": {
            "id": RUN_ID, "timeoutMs": {"type": "integer", "minimum": 1, "maximum": 86_400_000}},
            "required": ["id"], "additionalProperties": False},
        "output": ENVELOPE_SCHEMA,
    },
    # Seed 001: "wait is canonical: jev.join({id}) aliases jev.wait({id})" (set below, after TOOLS).
    "jev_stop": {
        "description": "Stop a run (in-flight evaluations and sleeps are aborted) and return its terminal "
                       "envelope. Idempotent. Not a rollback of effects already sent.",
        "input": {"type": "object", "properties": {"id": RUN_ID}, "required": ["id"],
                  "additionalProperties": False},
        "output": ENVELOPE_SCHEMA,
    },
    "jev_check": {
        "description": "Type-check a judgment program against its own contract before running it (the "
                       "TypeScript compiler, for TypeScript and JavaScript programs): a misspelled input "
                       "field, a question type or choice option that does not exist, a ref not in "
                       "requires, a result off its outputSchema, fetch. Each error has the program's own "
                       "line and column. Nothing runs.",
        "input": {"type": "object", "properties": {
            "program": PROGRAM_SCHEMA, "programPath": _LAUNCH_PROPERTIES["programPath"],
            "observe": {"type": "boolean", "default": False,
                        "description": "Check as a run spawned with observe (program.nextEvent exists)."}},
            **_ONE_PROGRAM, "additionalProperties": False},
        "output": CHECK_SCHEMA,
    },
    "jev_evaluate": {
        "description": "Ask Jev one typed batch of questions (choice, score, noul) about a state and "
                       "return the validated answers with probabilities.",
        "input": derived_schema(EvaluateRequest),
        "output": EVALUATION_SCHEMA,
    },
    "jev_approve": {
        "description": "Decide whether an agent's proposed action may run without asking the user: allow, "
                       "ask or deny, with the reason and the four probabilities. A probabilistic advisor, "
                       "not a security boundary.",
        "input": {"type": "object", "properties": {
            "action": {"type": "object", "properties": {
                "ref": {"type": "string", "minLength": 1, "maxLength": 256},
                "risk": {"type": "string", "maxLength": 64, "default": "execute"},
                "description": {"type": "string", "maxLength": 4096},
                "arguments": {**ANY_JSON, "description": "The action's arguments (any JSON)."}},
                "required": ["ref"], "additionalProperties": False},
            "userText": {"type": "string", "description": "The current user turn's text."},
            "conversation": {"type": "array", "items": {"type": "object", "properties": {
                "role": {"type": "string"}, "text": {"type": "string"}},
                "required": ["role", "text"], "additionalProperties": False}},
            "sessionActions": {"type": "array", "items": {"type": "object"}},
            "policy": {"enum": ["auto", "ask", "deny", "allow"], "default": "auto"},
            "headless": {"type": "boolean", "default": False,
                         "description": "No human to ask: ask becomes deny."}},
            "required": ["action"], "additionalProperties": False},
        "output": DECISION_SCHEMA,
    },
}

TOOLS["jev_join"] = {**TOOLS["jev_wait"],
                     "description": "Alias of jev_wait (wait is canonical): " + TOOLS["jev_wait"]["description"]}

# Observers over MCP: their specs live beside them (session_tools.py), served by sessions.py.
TOOLS.update(session_tools(_LAUNCH_PROPERTIES, _ONE_PROGRAM, ENVELOPE_SCHEMA))

#: Tools whose arguments are read by the contract model their input schema is derived from: the
#: model's refusal, in the contract's words, is what the client is told (a JSON Schema validator
#: says only "is not valid under any of the given schemas" of a question with a wrong field).
CHECKED_BY_THEIR_MODEL = frozenset({"jev_evaluate"})
