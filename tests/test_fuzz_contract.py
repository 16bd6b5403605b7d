"""Fuzzing the contract's validators: schema subset and values, programs, evaluation requests
and answers, and the key-echo check on answers.

Any input gives a result or the validator's documented error (`SchemaInvalid`,
`ValueRejected`, `ProgramInvalid`, `RequestInvalid`, `AnswerInvalid`), never
anything else; what is accepted keeps the contract. Examples that once broke a
validator are pinned with `@example`.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fabric_jev.approval.classifier import _bounded_timeout
from fabric_jev.approval.settings import check_threshold
from fabric_jev.contract.config import HostConfig
from fabric_jev.contract.evaluation import (
    PROBABILITY_TOLERANCE,
    EvaluationRequest,
    parse_response_bytes,
    validate_answers,
    validate_request,
)
from fabric_jev.contract.program import parse_program
from fabric_jev.contract.schema_subset import ALLOWED_KEYWORDS, check_schema
from fabric_jev.contract.values import ValueRejected, check_value, is_finite_number
from fabric_jev.errors import (
    AnswerInvalid,
    ConfigError,
    DictionaryInvalid,
    ProgramInvalid,
    RequestInvalid,
    SchemaInvalid,
)
from fabric_jev.redaction.key_echo import carries_key
from fabric_jev.verification.dictionary import parse_dictionary
from tests.fuzz_support import NASTY_TEXT, REQUEST, fuzz_timeout, json_values, mutated

pytestmark = fuzz_timeout

# ---------------------------------------------------------------- schema subset and values

_TYPES = st.sampled_from(["null", "boolean", "object", "array", "number", "string", "integer", "int", 1])


@st.composite
def _schemas(draw: st.DrawFn, depth: int = 0) -> Any:
    """Mostly in-subset schemas, with wrong types, unknown keywords and odd numbers mixed in."""
    if depth > 3 or draw(st.integers(0, 9)) == 0:
        return draw(json_values(4))
    keys = draw(st.lists(st.sampled_from([*sorted(ALLOWED_KEYWORDS), "pattern", "$ref", "format"]),
                         max_size=4, unique=True))
    schema: dict[str, Any] = {}
    for key in keys:
        if key == "type":
            schema[key] = draw(_TYPES)
        elif key in ("properties",):
            schema[key] = draw(st.dictionaries(st.text(max_size=5), _schemas(depth + 1), max_size=3))
        elif key in ("items", "additionalProperties"):
            schema[key] = draw(_schemas(depth + 1) | st.booleans())
        elif key in ("anyOf", "oneOf", "allOf"):
            schema[key] = draw(st.lists(_schemas(depth + 1), max_size=3))
        elif key == "required":
            schema[key] = draw(st.lists(st.text(max_size=5), max_size=3) | json_values(3))
        elif key in ("enum",):
            schema[key] = draw(st.lists(json_values(3), max_size=4) | json_values(3))
        elif key in ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems",
                     "minProperties", "maxProperties"):
            schema[key] = draw(st.integers(-3, 10) | st.floats(allow_nan=False) | st.sampled_from(
                [10**400, True, "3", -(10**30)]))
        else:
            schema[key] = draw(json_values(3))
    return schema


_PYTHON_JUNK = st.sampled_from([float("nan"), float("inf"), (1, 2), {1: "int key"}, b"bytes", {1, 2},
                                object(), 10**5000, [float("-inf")], {"a": (float("nan"),)}])


@given(_schemas(), json_values() | _PYTHON_JUNK)
@example({"maxLength": 10**400}, "x")
@example({"minimum": 1e308, "maximum": -1e308}, 10**400)
@example({"type": "string", "maxLength": 3}, "\ud800\ud800\ud800\ud800")
@example({"enum": [1, "a", None]}, 10**5000)  # past Python's int-to-text limit
@example({"properties": {"a\nb": {"enum": []}}}, None)  # a property name with a newline: a two-line message
@example({"properties": {"\ud800" * 100: {"type": 1}}}, None)
@example({"properties": {"a\nb": {"type": "string"}}}, {"a\nb": 1})
def test_a_schema_is_in_the_subset_or_refused_and_values_match_or_are_rejected(schema: Any, value: Any) -> None:
    try:
        check_schema(schema, "outputSchema")
    except SchemaInvalid as exc:
        assert str(exc).startswith("outputSchema") and "\n" not in str(exc)
        return
    try:
        out = check_value(value, schema, "output")
    except ValueRejected as exc:
        assert str(exc).startswith("output") and "\n" not in str(exc)
        return
    json.dumps(out, allow_nan=False, ensure_ascii=False).encode("utf-8")


def test_a_deep_schema_is_refused_not_a_recursion_error() -> None:
    schema: Any = {}
    for _ in range(5000):
        schema = {"items": schema}
    try:
        check_schema(schema, "inputSchema")
    except SchemaInvalid as exc:
        assert "inputSchema" in str(exc)


# ---------------------------------------------------------------- programs

PROGRAM = {"name": "p", "code": "return input;", "requires": ["jev.evaluate"],
           "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
           "outputSchema": {"anyOf": [{"type": "string"}, {"type": "null"}]},
           "limits": {"timeoutMs": 1000, "maxEvaluations": 0}}


@given(mutated(PROGRAM) | json_values())
@example({**PROGRAM, "limits": {"timeoutMs": 10**400}})
@example({**PROGRAM, "name": "\ud800"})
def test_a_program_is_valid_or_refused_in_one_message(raw: Any) -> None:
    try:
        program = parse_program(raw)
    except (ProgramInvalid, SchemaInvalid) as exc:
        assert str(exc)
        return
    json.dumps(program.model_dump(mode="json"), allow_nan=False)


# ---------------------------------------------------------------- evaluation requests



def _json_bytes_ok(value: Any) -> None:
    json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")


@given(mutated(REQUEST) | json_values(), st.booleans())
@example({**REQUEST, "questions": {"q": {"type": "choice", "instructions": "x", "criteria": {"": None}}}}, False)
@example({**REQUEST, "state": "\ud800"}, False)
@example({"\n": None}, False)  # an unknown key with a newline made a two-line message (long profile)
@example({**REQUEST, "questions": {"q": {"type": "noul", "instructions": "x", "a\nb": 1}}}, False)
@example({**REQUEST, "state": [float("nan")]}, True)
@example({**REQUEST, "questions": {"q": {"type": "noul", "instructions": "x", "criteria": {"true": 1}}}}, False)
def test_a_request_is_valid_or_refused_and_what_is_valid_stays_valid(raw: Any, wire: bool) -> None:
    try:
        request = validate_request(raw, wire=wire)
    except RequestInvalid as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    body = request.to_wire(request.model or "jev-latest")
    _json_bytes_ok(body)  # it can be sent
    again = validate_request(json.loads(json.dumps(body)), wire=wire)
    assert (again.state, again.questions) == (request.state, request.questions)


# ---------------------------------------------------------------- evaluation answers

VALID_REQUEST = validate_request(REQUEST)
KEY = "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"


def _answer_for(request: EvaluationRequest) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for q in request.questions:
        if q.type == "noul":
            answers[q.id] = {"noul": 0.25}
        else:
            keys = list(q.criteria) if q.type == "choice" else [str(i) for i in range(len(q.criteria))]
            probs = {k: 1 / len(keys) for k in keys}
            answers[q.id] = ({"choice": keys[0]} if q.type == "choice" else {"score": 1.0}) | {
                "probabilities": probs, "confidence": 0.5}
    return {"answers": answers, "usage": {"input_tokens": 10, "output_tokens": 2}, "model": "jev-1.13"}


ANSWER = _answer_for(VALID_REQUEST)


def _check_evaluation_keeps_the_contract(request: EvaluationRequest, out: Any) -> None:
    assert set(out.answers) == {q.id for q in request.questions}
    for q in request.questions:
        a = out.answers[q.id]
        assert a["type"] == q.type
        if q.type == "noul":
            assert 0 <= a["noul"] <= 1
            continue
        assert 0 <= a["confidence"] <= 1
        assert abs(sum(a["probabilities"].values()) - 1) <= PROBABILITY_TOLERANCE + 1e-9
        assert all(0 <= p <= 1 for p in a["probabilities"].values())
        if q.type == "choice":
            assert a["choice"] in q.criteria and set(a["probabilities"]) == set(q.criteria)
        else:
            assert 0 <= a["score"] <= len(q.criteria) - 1 and math.isfinite(a["score"])
    assert out.usage.input_tokens >= 0 and out.usage.output_tokens >= 0 and len(out.model) <= 128
    _json_bytes_ok(out.to_json())


@given(mutated(ANSWER) | json_values())
@example({**ANSWER, "answers": {**ANSWER["answers"], "team": {**ANSWER["answers"]["team"], "choice": []}}})
@example({**ANSWER, "answers": {**ANSWER["answers"], "team": {**ANSWER["answers"]["team"], "choice": {}}}})
@example({**ANSWER, "answers": {**ANSWER["answers"], "anger": {**ANSWER["answers"]["anger"], "type": []}}})
@example({**ANSWER, "model": "\ud800"})
@example({**ANSWER, "usage": {"input_tokens": 10**5000, "output_tokens": 1}})
def test_an_answer_is_accepted_only_when_it_keeps_the_contract(body: Any) -> None:
    try:
        out = validate_answers(VALID_REQUEST, body)
    except AnswerInvalid as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    _check_evaluation_keeps_the_contract(VALID_REQUEST, out)


_HIDDEN = st.sampled_from([KEY, KEY[::-1], KEY.upper(), " ".join(KEY), KEY[:30], KEY[-30:],
                           base64.b64encode(KEY.encode()).decode(), KEY.encode().hex()])


@st.composite
def _answer_bytes(draw: st.DrawFn) -> bytes:
    """Answer bodies: mutated answers, some hiding the key somewhere; sometimes spliced bytes."""
    body = draw(mutated(ANSWER))
    if draw(st.booleans()):
        hidden = draw(_HIDDEN)
        if isinstance(body, dict):
            body[draw(st.sampled_from(["model", "x_note", hidden]))] = hidden if draw(st.booleans()) else 1
    data = json.dumps(body, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(max_size=4)) + data[at:]
    return data


@given(_answer_bytes())
def test_answer_bytes_give_an_evaluation_or_a_refusal_and_never_the_key(data: bytes) -> None:
    try:
        out = parse_response_bytes(VALID_REQUEST, data, secret=KEY)
    except AnswerInvalid as exc:
        assert KEY not in str(exc) and "\n" not in str(exc)
        return
    _check_evaluation_keeps_the_contract(VALID_REQUEST, out)
    assert not carries_key(out.to_json(), KEY)


@given(json_values(), st.sampled_from(NASTY_TEXT[:12]))
def test_the_key_echo_check_takes_any_value(value: Any, key: str) -> None:
    carries_key(value, key)
    assert carries_key([value, {"m": KEY[5:40][::-1]}], KEY)


# ---------------------------------------------------------------- the same break, elsewhere
# The fuzzing found `math.isfinite` overflowing on an int past the float range in the schema
# and answer checks; every other number check had the same line. Each now refuses it.


def test_an_int_past_the_float_range_is_refused_by_every_number_check() -> None:
    big = 10**400
    assert not is_finite_number(big) and is_finite_number(10**300) and not is_finite_number(True)
    with pytest.raises(ConfigError, match="autoApprovalThreshold must be a finite number"):
        HostConfig.parse({"autoApprovalThreshold": big})
    with pytest.raises(ValueError, match="finite number"):
        check_threshold(big)
    assert _bounded_timeout(big) == 30.0
    check = {"id": "c", "description": "x", "assertion": {
        "kind": "observe", "observation": {"id": "o", "version": "1"}, "path": ["a"],
        "predicate": {"kind": "atLeast", "value": big}}}
    with pytest.raises(DictionaryInvalid, match="atLeast needs a finite number"):
        parse_dictionary({"id": "d", "version": "1", "checks": [check]})
    with pytest.raises(ValueRejected, match="an integer past the float range"):
        check_value({"n": -big}, {}, "input")
