"""compile_verification: ONE evaluator request selects checks for an intent (contract §11).

Only the intent and each check's id, version and description leave the host —
never targets, expected values, readers or page data.

Compile holds its own deadline and cancel event around the evaluator (which
it cancels through its task's scope), so a custom evaluator that ignores
`timeout` or cancellation cannot make it hang, and
an answer that arrives after either is not used. Whatever the evaluator
returns is validated as an upstream answer would be: anything malformed
(`None` included) or any exception it raises gives `incomplete`, never an
exception and never a plan.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

from ..contract.evaluation import Evaluation, EvaluationRequest, validate_answers, validate_request
from ..contract.json_basics import JsonNumber
from ..contract.values import is_finite_number
from ..contract.wire_model import WireModel
from ..errors import EvaluationError, RequestInvalid
from ..evaluators.base import Evaluator
from .dictionary import Dictionary, parse_dictionary
from .digest import dictionary_digest

SELECT = 0.9
EXCLUDE = 0.1
COVERAGE = 0.9
MAX_INTENT_CHARS = 4_000

COVERAGE_INSTRUCTIONS = (
    "The state holds a verification intent written by a person and a dictionary of checks, each "
    "with an id and a description of exactly what it asserts. Can the intent be verified entirely "
    "by some selection of these checks? Answer no if any part of the intent asks for something the "
    "checks cannot assert, and answer no if the intent asks to perform an action (clicking, typing, "
    "sending, creating, deleting, navigating) rather than to verify a state."
)


def relevance_instructions(check_id: str, description: str) -> str:
    return (f"Consider only the dictionary check {check_id!r}, whose description is: "
            f"{description!r}. Is this check requested by the verification intent, or necessary "
            "to verify it? Judge only relevance to the intent, not whether the described state is "
            "currently true in the application.")


class Plan(WireModel):
    """A compiled plan; `to_json()` is the plan file (camelCase keys, as `load_plan` reads them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = 1
    dictionary_digest: str
    intent: str
    check_ids: tuple[str, ...]
    probabilities: dict[str, JsonNumber]

    def __init__(self, dictionary_digest: str, intent: str, check_ids: tuple[str, ...],
                 probabilities: dict[str, JsonNumber], schema_version: int = 1) -> None:
        # By position as well, as when it was a dataclass (the file's order puts the version first).
        BaseModel.__init__(self, schema_version=schema_version, dictionary_digest=dictionary_digest,
                           intent=intent, check_ids=check_ids, probabilities=probabilities)


class CompileResult(WireModel):
    """What `compile_verification` came to; `to_json()` is what `verify compile --json` prints."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["ready", "incomplete"]
    plan: Plan | None = None
    reason: str | None = None
    probabilities: dict[str, JsonNumber] = Field(default_factory=dict)
    request_count: int = 0
    usage: dict[str, int] = Field(default_factory=dict)
    model: str | None = None


def build_request(intent: str, dictionary: Dictionary) -> dict[str, object]:
    state = {"intent": intent,
             "dictionary": {"id": dictionary.id, "version": dictionary.version,
                            "checks": [{"key": f"check_{i}", "id": c.id, "description": c.description}
                                       for i, c in enumerate(dictionary.checks)]}}
    questions: dict[str, Any] = {"coverage": {"type": "noul", "instructions": COVERAGE_INSTRUCTIONS}}
    for i, c in enumerate(dictionary.checks):
        questions[f"check_{i}"] = {"type": "noul",
                                   "instructions": relevance_instructions(c.id, c.description)}
    return {"state": state, "questions": questions}


def decide(dictionary: Dictionary, probabilities: dict[str, float]) -> tuple[tuple[str, ...] | None, str]:
    """The threshold rule; returns (selected ids, "") or (None, reason)."""
    coverage = probabilities["coverage"]
    if coverage < COVERAGE:
        return None, f"coverage {coverage:.2f} is below {COVERAGE}: the dictionary cannot express the intent"
    unsure = [c.id for i, c in enumerate(dictionary.checks)
              if EXCLUDE < probabilities[f"check_{i}"] < SELECT]
    if unsure:
        return None, f"relevance is uncertain for {', '.join(unsure)} (between {EXCLUDE} and {SELECT})"
    selected = tuple(c.id for i, c in enumerate(dictionary.checks) if probabilities[f"check_{i}"] >= SELECT)
    if not selected:
        return None, "no check was selected"
    return selected, ""


async def _ask(evaluator: Evaluator, request: EvaluationRequest, timeout: float,
               cancel: anyio.Event | None) -> Evaluation | str:
    """The evaluator's validated answer, or why there is none (see the module doc)."""
    got: list[Any] = []
    failure: list[Exception] = []
    stopped = False
    deadline = time.monotonic() + timeout
    with anyio.move_on_after(timeout) as scope:
        async with anyio.create_task_group() as tg:
            if cancel is not None:
                async def watch() -> None:
                    nonlocal stopped
                    await cancel.wait()
                    stopped = True
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
            try:
                got.append(await evaluator.evaluate(request, timeout=timeout))
            except anyio.get_cancelled_exc_class():
                raise  # ours (the deadline or the event) or the caller's: the scopes sort it out
            except Exception as exc:  # provider errors of any kind are an incomplete compile
                failure.append(exc)
            tg.cancel_scope.cancel()
    # Checked before the answer: an evaluator that swallowed the cancellation and
    # answered late gives no plan.
    if stopped or (cancel is not None and cancel.is_set()):
        return "the evaluator failed: cancelled"
    if scope.cancelled_caught or time.monotonic() > deadline:
        return f"the evaluator failed: no answer within {timeout:g} s"
    if failure:
        error = failure[0]
        detail = str(error) if isinstance(error, EvaluationError) else f"{type(error).__name__}: {error}"
        return f"the evaluator failed: {detail}"[:2000]
    answer = got[0]
    if not isinstance(answer, Evaluation):
        return f"the evaluator failed: it returned {type(answer).__name__}, not an Evaluation"
    try:
        return validate_answers(request, answer.to_json())
    except EvaluationError as exc:
        return f"the evaluator failed: {exc}"
    except Exception as exc:  # fields of the wrong types that to_json cannot even read
        return f"the evaluator failed: malformed Evaluation ({type(exc).__name__})"


async def compile_verification(intent: str, dictionary: Dictionary | Mapping[str, object],
                               evaluator: Evaluator | str, *, timeout: float = 30.0,
                               cancel: anyio.Event | None = None) -> CompileResult:
    """Compile an intent into a plan. Invalid caller data raises before any request;
    after that every failure is `incomplete` with a reason (see the module doc).

    `evaluator` is an Evaluator or a spec string (``"typesafe"``, ``"fixture:FILE"``, ...),
    built for this call and closed after it."""
    if isinstance(evaluator, str):
        from ..evaluators.select import evaluator_for

        async with evaluator_for(evaluator) as built:
            return await compile_verification(intent, dictionary, built, timeout=timeout, cancel=cancel)
    if not isinstance(intent, str) or not intent.strip() or len(intent) > MAX_INTENT_CHARS:
        raise RequestInvalid(f"the intent must be a non-empty string of at most {MAX_INTENT_CHARS} characters")
    if not is_finite_number(timeout) or timeout <= 0:
        raise RequestInvalid("the compile timeout must be a positive number of seconds")
    parsed = parse_dictionary(dictionary)
    request = validate_request(build_request(intent, parsed), max_bytes=1_048_576)
    if cancel is not None and cancel.is_set():
        return CompileResult(status="incomplete", reason="cancelled before the request was sent")
    result = CompileResult(status="incomplete", request_count=1)
    evaluation = await _ask(evaluator, request, float(timeout), cancel)
    if isinstance(evaluation, str):
        result.reason = evaluation
        return result
    probabilities = {qid: float(answer["noul"]) for qid, answer in evaluation.answers.items()}
    result.probabilities = probabilities
    result.usage = {"input_tokens": evaluation.usage.input_tokens,
                    "output_tokens": evaluation.usage.output_tokens}
    result.model = evaluation.model
    selected, reason = decide(parsed, probabilities)
    if selected is None:
        result.reason = reason
        return result
    by_id = {"coverage": probabilities["coverage"]}
    by_id.update({c.id: probabilities[f"check_{i}"] for i, c in enumerate(parsed.checks)})
    result.status = "ready"
    result.plan = Plan(dictionary_digest(parsed), intent, selected, by_id)
    return result
