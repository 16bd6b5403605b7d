"""jev.evaluate requests and answers (contract §5). Pure validation, no I/O.

An answer is rebuilt from validated fields only, so nothing an upstream adds
(extra keys, debug fields) ever reaches a program; a score's legend is taken
from the request, not from the response.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from .._json import JSONInputError, loads_bounded
from .._surrogates import has_lone_surrogate
from ..errors import AnswerInvalid, RequestInvalid
from ..questions import kind_of
from .json_basics import key_names, unknown_keys
from .model_id import MODEL_ID_RULE
from .provenance import Provenance
from .values import JsonValue, is_finite_number
from .wire_model import WireData, omit_none, wire_json

QuestionType = Literal["noul", "choice", "score"]
MAX_DEPTH = 32
MAX_NODES = 100_000
MAX_RESPONSE_BYTES = 1 << 20
PROBABILITY_TOLERANCE = 0.02


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    type: QuestionType
    instructions: Any
    criteria: Any  # dict for choice/noul, list for score, None when absent


@dataclass(frozen=True, slots=True)
class EvaluationRequest:
    state: JsonValue  # a string, array or object
    questions: tuple[Question, ...]
    model: str | None = None

    def to_wire(self, model: str) -> dict[str, Any]:
        questions: dict[str, Any] = {}
        for q in self.questions:
            body: dict[str, Any] = {"type": q.type}
            if q.instructions is not None:
                body["instructions"] = q.instructions
            if q.criteria is not None:
                body["criteria"] = q.criteria
            questions[q.id] = body
        return {"state": self.state, "questions": questions, "model": model}


@dataclass(frozen=True, slots=True)
class EvaluationUsage:
    # The contract spells these two in snake_case on the wire: its own (empty) pydantic config, not
    # the camelCase one of the evaluation it is part of.
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(json_schema_serialization_defaults_required=True)

    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Evaluation(WireData):
    """Validated answers, as `jev_evaluate` and a guest's `jev.evaluate` receive them (``to_json``)."""

    #: By question id: the answer as the contract shapes it for its type (noul, choice, score).
    answers: dict[str, dict[str, Any]]
    usage: EvaluationUsage = field(default_factory=EvaluationUsage)
    #: The model as the answerer named it.
    model: str = ""
    #: Who answered, and how (`contract.provenance`), under the wire key ``evaluator``. Every
    #: evaluator of fabric-jev fills it; None only from an application's own evaluator that does
    #: not say (a run's envelope then names the evaluator's route, readout "unknown").
    provenance: Annotated[Provenance | None, Field(alias="evaluator", exclude_if=omit_none)] = None

    def to_json(self, *, evaluator: bool = True) -> dict[str, Any]:
        """The wire shape; with `evaluator` (the default) and a provenance, its ``evaluator`` too."""
        # An application's own evaluator may return one with fields of the wrong types: they are
        # written as they are (no warning), and `validate_answers` refuses them in its own words.
        return wire_json(self, exclude=None if evaluator else {"provenance"}, warnings=False)


def _measure(value: Any) -> tuple[int, int]:
    """(nodes, depth) of a JSON value, refusing non-finite numbers and non-JSON types."""
    nodes = 0
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise RequestInvalid(f"jev.evaluate request has more than {MAX_NODES} JSON nodes")
        if depth > MAX_DEPTH:
            raise RequestInvalid(f"jev.evaluate request is nested deeper than {MAX_DEPTH} levels")
        deepest = max(deepest, depth)
        if isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    raise RequestInvalid("jev.evaluate request has a non-string object key")
                stack.append((x, depth + 1))
        elif isinstance(v, list | tuple):
            stack.extend((x, depth + 1) for x in v)
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise RequestInvalid("jev.evaluate request is not finite JSON (NaN or Infinity)")
        elif not (v is None or isinstance(v, bool | int | str)):
            raise RequestInvalid(f"jev.evaluate request is not JSON ({type(v).__name__})")
    return nodes, deepest


def validate_request(raw: object, *, max_bytes: int = 131_072, wire: bool = False,
                     measured: bool = False) -> EvaluationRequest:
    """Check a jev.evaluate request against every rule of contract §5.

    Its shape is the typed model in `evaluation_shape` (the one MCP clients are shown); what no
    model states — size in bytes, depth, node count, finite numbers, Unicode text — is checked
    here first. ``wire=True`` is the server's reading of the same request: unknown top-level
    fields are ignored and a noul may omit instructions, as the wire spec asks.
    ``measured=True``: `raw` was just parsed from at most `max_bytes` bytes of JSON by
    `loads_bounded` (depth ≤ MAX_DEPTH, every number finite, no lone surrogate) and its bytes
    counted at most MAX_NODES values (`_json.values_at_most`), so the walk that measures it
    again and the serialization that sizes it again are skipped: the server's hot path.
    """
    from pydantic import ValidationError

    from .evaluation_shape import EvaluateRequest, WireEvaluateRequest

    if not isinstance(raw, dict):
        raise RequestInvalid("jev.evaluate expects an object {state, questions, model?}")
    fields = EvaluateRequest.model_fields
    if wire and not raw.keys() <= fields.keys():  # neither measured nor kept: the server does not read them
        raw = {k: v for k, v in raw.items() if k in fields}
    if not measured:
        _measure(raw)
        try:
            size = len(json.dumps(raw, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
        except UnicodeEncodeError:
            raise RequestInvalid("jev.evaluate request contains a lone surrogate (an unpaired "
                                 "\\uD800-\\uDFFF), which is not Unicode text") from None
        if size > max_bytes:
            raise RequestInvalid(f"jev.evaluate request exceeds {max_bytes} bytes")
    try:
        shape = (WireEvaluateRequest if wire else EvaluateRequest).model_validate(raw)
    except ValidationError as exc:
        raise RequestInvalid(_refusal(exc, raw)) from None
    return EvaluationRequest(
        state=shape.state,
        questions=tuple([Question(id=qid, type=q.type, instructions=q.instructions, criteria=q.criteria)
                         for qid, q in shape.questions.items()]),
        model=shape.model,
    )


def _refusal(exc: Any, raw: dict[str, Any]) -> str:
    """The first rule a request breaks, in contract §5's words, from the model's errors (in the
    order of its fields: state, then each question in turn, then model)."""
    from .evaluation_shape import MAX_QUESTION_ID_CHARS, MAX_QUESTIONS, EvaluateRequest, NoulQuestion

    errors: list[dict[str, Any]] = exc.errors(include_url=False, include_context=False, include_input=False)
    extra = [e["loc"][0] for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
    if extra:
        return f"jev.evaluate request has unknown keys: {unknown_keys(set(extra), tuple(EvaluateRequest.model_fields))}"
    loc = errors[0]["loc"]
    if loc[0] == "state":
        return "jev.evaluate state must be a string, array or object"
    if loc[0] == "model":
        return f"jev.evaluate model must be {MODEL_ID_RULE}"
    if len(loc) == 1:
        return f"jev.evaluate needs 1-{MAX_QUESTIONS} questions keyed by id"
    if loc[2:] == ("[key]",):
        return f"jev.evaluate question ids must be 1-{MAX_QUESTION_ID_CHARS} characters"
    qid, where = loc[1], f"question {loc[1]!r}"
    question = raw["questions"][qid]
    # The same keys in every type of question: unknown ones are named first, whatever else is wrong.
    fields = tuple(NoulQuestion.model_fields)
    if isinstance(question, dict) and set(question) - set(fields):
        return f"{where} has unknown keys: {unknown_keys(set(question) - set(fields), fields)}"
    if len(loc) == 2:
        if errors[0]["type"] in ("union_tag_invalid", "union_tag_not_found"):
            from ..questions import KINDS  # the table as it stands: "choice, score and noul"

            *first, last = KINDS
            kinds = f"{', '.join(first)} and {last}"
            return f"{where} has type {question.get('type')!r}: {kinds} only — not free-text generation"
        return f"{where} must be an object {{type, instructions, criteria?}}"
    qtype, field, inside = loc[2], loc[3], loc[4:]
    if field == "instructions":
        return f"{where} needs instructions (a string, array or object)"
    return kind_of(qtype).refusal(where, inside)


# The messages below are made only when a check fails: a server validates every answer it gives,
# and formatting a name per probability was a tenth of serving a small request.

def _probability(v: Any, where: str, what: str) -> float:
    """`v` as a float in [0, 1]; the error names `where` and `what` (``noul``, ``confidence``...)."""
    if v.__class__ is float and 0.0 <= v <= 1.0:  # the common case; NaN fails the comparison
        return v
    if not is_finite_number(v):
        raise AnswerInvalid(f"{where} {what} is not a finite number")
    if not 0.0 <= v <= 1.0:
        raise AnswerInvalid(f"{where} {what} is outside [0, 1]")
    return float(v)


def _distribution(raw: Any, keys: list[str], where: str) -> dict[str, float]:
    if not isinstance(raw, dict) or set(raw) != set(keys):
        raise AnswerInvalid(f"{where} probabilities must have exactly the keys {keys[:8]}")
    probs: dict[str, float] = {}
    for k in keys:
        v = raw[k]
        probs[k] = v if v.__class__ is float and 0.0 <= v <= 1.0 else _probability(v, where, f"probability {k!r}")
    total = sum(probs.values())
    if abs(total - 1.0) > PROBABILITY_TOLERANCE:
        raise AnswerInvalid(f"{where} probabilities sum to {total:.3f}, not 1 ± 0.02")
    return probs


class _Checks:
    """The contract's number rules, as a question kind checks its answer with them."""

    probability = staticmethod(_probability)
    distribution = staticmethod(_distribution)
    finite = staticmethod(is_finite_number)
    key_names = staticmethod(key_names)

    @staticmethod
    def invalid(message: str) -> Exception:
        return AnswerInvalid(message)


_CHECKS = _Checks()


def _answer(q: Question, raw: Any) -> dict[str, Any]:
    where = f"answer to {q.id!r}"
    if not isinstance(raw, dict):
        raise AnswerInvalid(f"{where} is not an object")
    if raw.get("type", q.type) != q.type:
        raise AnswerInvalid(f"{where} has type {raw.get('type')!r}, expected {q.type!r}")
    return kind_of(q.type).answer(q, raw, where, _CHECKS)


#: Token counts past this are no integer a JSON reader holds exactly (2**53 - 1).
MAX_TOKEN_COUNT = 9_007_199_254_740_991


def _count(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_TOKEN_COUNT:
        raise AnswerInvalid(f"{where} is not a non-negative integer (at most 2**53 - 1)")
    return v


def validate_answers(request: EvaluationRequest, body: object, *,
                     provenance: Provenance | None = None) -> Evaluation:
    """Check an upstream response and rebuild the evaluation from validated fields.

    `provenance` is who answered, as the caller knows it: nothing in `body` (an upstream's
    ``evaluator``, say) is ever taken for it.
    """
    if not isinstance(body, dict):
        raise AnswerInvalid("evaluator response is not a JSON object")
    answers = body.get("answers")
    if not isinstance(answers, dict):
        raise AnswerInvalid("evaluator response has no answers object")
    wanted = {q.id for q in request.questions}
    missing = wanted - set(answers)
    if missing:
        raise AnswerInvalid(f"evaluator response is missing answers for {sorted(missing)[:8]}")
    extra = set(answers) - wanted
    if extra:
        raise AnswerInvalid(f"evaluator response has answers nobody asked for: {sorted(extra)[:8]}")
    rebuilt = {q.id: _answer(q, answers[q.id]) for q in request.questions}
    return checked_evaluation(body, rebuilt, provenance=provenance)


def check_answer(q: Question, raw: object) -> dict[str, object]:
    """One answer to `q`, checked and rebuilt as `validate_answers` does it (AnswerInvalid in its
    words): for an answerer that keeps the answers it checked (the fixture evaluator)."""
    return _answer(q, raw)


def checked_evaluation(body: Mapping[str, object], answers: dict[str, dict[str, object]], *,
                       provenance: Provenance | None = None) -> Evaluation:
    """The evaluation of a response whose `answers` are checked already (one per question, from
    `check_answer`): the rest of `body` (usage, model) is checked here, as `validate_answers` does."""
    usage_raw = body.get("usage")
    if not isinstance(usage_raw, dict):
        raise AnswerInvalid("evaluator response has no usage")
    usage = EvaluationUsage(
        input_tokens=_count(usage_raw.get("input_tokens"), "usage.input_tokens"),
        output_tokens=_count(usage_raw.get("output_tokens"), "usage.output_tokens"),
    )
    model = body.get("model", "")
    if not isinstance(model, str) or len(model) > 128 or has_lone_surrogate(model):
        raise AnswerInvalid("evaluator response model is not a string of at most 128 characters")
    return Evaluation(answers=answers, usage=usage, model=model, provenance=provenance)


def parse_response_bytes(request: EvaluationRequest, raw: bytes, *, secret: str | None = None,
                         provenance: Provenance | None = None) -> Evaluation:
    """Parse and validate a raw response body (≤ 1 MiB, finite JSON, nested ≤ MAX_DEPTH).

    `secret` is the credential the request was sent with: an answer that
    carries it anywhere, in any reversible form or in pieces (an upstream
    echoing it reversed or base64-encoded in `model`, say; see `key_echo`),
    is refused, so it can never reach a program or an envelope.
    """
    try:
        body = loads_bounded(raw, what="evaluator response", max_bytes=MAX_RESPONSE_BYTES, max_depth=MAX_DEPTH)
    except JSONInputError as exc:
        raise AnswerInvalid(str(exc)) from None
    if secret:
        from ..redaction.key_echo import carries_key  # RE2 and the folding tables: only where a key was sent

        if carries_key(body, secret):
            raise AnswerInvalid("evaluator response contains the credential it was sent with; refused")
    return validate_answers(request, body, provenance=provenance)
