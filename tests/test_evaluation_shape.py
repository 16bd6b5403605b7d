"""A jev.evaluate request has one shape: the model the validator reads is the schema MCP clients are shown.

The validator's refusals keep contract §5's words, each rule its own message; and on fuzzed
requests the advertised JSON Schema and the validator accept exactly the same ones, but for the
rules no JSON Schema can state, which the validator checks around the model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fabric_jev.contract.evaluation import validate_request
from fabric_jev.contract.evaluation_shape import EvaluateRequest
from fabric_jev.errors import RequestInvalid
from fabric_jev.mcp.schemas import derived_schema
from tests.fuzz_support import REQUEST, fuzz_timeout, json_values, mutated

NOUL = {"type": "noul", "instructions": "OK?"}


def ask(**questions: Any) -> dict[str, Any]:
    return {"state": "x", "questions": questions}


@pytest.mark.parametrize(("raw", "message"), [
    ([], "jev.evaluate expects an object {state, questions, model?}"),
    ({**ask(q=NOUL), "modle": "m"}, "jev.evaluate request has unknown keys: modle (did you mean model?)"),
    ({"questions": {"q": NOUL}}, "jev.evaluate state must be a string, array or object"),
    ({"state": 3, "questions": {"q": NOUL}}, "jev.evaluate state must be a string, array or object"),
    ({"state": "x"}, "jev.evaluate needs 1-128 questions keyed by id"),
    (ask(), "jev.evaluate needs 1-128 questions keyed by id"),
    ({"state": "x", "questions": {f"q{i}": NOUL for i in range(129)}}, "jev.evaluate needs 1-128 questions keyed by id"),
    ({"state": "x", "questions": {"": NOUL}}, "jev.evaluate question ids must be 1-128 characters"),
    ({"state": "x", "questions": {"q" * 129: NOUL}}, "jev.evaluate question ids must be 1-128 characters"),
    (ask(q=["noul"]), "question 'q' must be an object {type, instructions, criteria?}"),
    (ask(q={"type": "text", "instructions": "Why?"}),
     "question 'q' has type 'text': choice, score and noul only — not free-text generation"),
    (ask(q={"instructions": "Why?"}),
     "question 'q' has type None: choice, score and noul only — not free-text generation"),
    # Unknown keys are named first, whatever else is wrong.
    (ask(q={"type": "text", "instruction": "Why?"}),
     "question 'q' has unknown keys: instruction (did you mean instructions?)"),
    (ask(q={"type": "noul"}), "question 'q' needs instructions (a string, array or object)"),
    (ask(q={"type": "noul", "instructions": 3}), "question 'q' needs instructions (a string, array or object)"),
    (ask(q={"type": "choice", "instructions": "?"}), "question 'q': choice criteria must be an object of 1-255 options"),
    (ask(q={"type": "choice", "instructions": "?", "criteria": {}}),
     "question 'q': choice criteria must be an object of 1-255 options"),
    (ask(q={"type": "choice", "instructions": "?", "criteria": {str(i): None for i in range(256)}}),
     "question 'q': choice criteria must be an object of 1-255 options"),
    (ask(q={"type": "choice", "instructions": "?", "criteria": {"": None}}),
     "question 'q': option names must be 1-256 characters"),
    (ask(q={"type": "choice", "instructions": "?", "criteria": {"a": 1}}),
     "question 'q': option 'a' needs a description or null"),
    (ask(q={"type": "score", "instructions": "?", "criteria": ["low"]}),
     "question 'q': score criteria must be an array of 2-10 levels"),
    (ask(q={"type": "score", "instructions": "?", "criteria": {"low": 1}}),
     "question 'q': score criteria must be an array of 2-10 levels"),
    (ask(q={"type": "score", "instructions": "?", "criteria": ["low", None]}),
     "question 'q': every score level needs a description"),
    (ask(q={**NOUL, "criteria": {"yes": "y"}}), "question 'q': noul criteria may only have 'true' and 'false' keys"),
    (ask(q={**NOUL, "criteria": ["y"]}), "question 'q': noul criteria may only have 'true' and 'false' keys"),
    (ask(q={**NOUL, "criteria": {"true": 1}}), "question 'q': noul criteria values must be descriptions or null"),
    ({**ask(q=NOUL), "model": "a..b"}, "jev.evaluate model must be a model id of 1-128 characters: an optional '~', "
                                        "a name and at most one '/name' (letters, digits, '.', '_', '-'; no '..')"),
    ({**ask(q=NOUL), "model": "jev\n"}, "jev.evaluate model must be a model id"),
    # The rules around the model.
    ({"state": "\ud800", "questions": {"q": NOUL}}, "jev.evaluate request contains a lone surrogate"),
    ({"state": [float("nan")], "questions": {"q": NOUL}}, "jev.evaluate request is not finite JSON (NaN or Infinity)"),
    ({"state": "x" * 131_072, "questions": {"q": NOUL}}, "jev.evaluate request exceeds 131072 bytes"),
])
def test_each_broken_rule_is_refused_in_its_own_words(raw: Any, message: str) -> None:
    with pytest.raises(RequestInvalid) as info:
        validate_request(raw)
    assert str(info.value).startswith(message)


def test_the_same_questions_read_the_same_as_before() -> None:
    request = validate_request({
        "state": {"ticket": "refund"}, "model": "~typesafe/jev-latest",
        "questions": {"route": {"type": "choice", "instructions": ["Which?"], "criteria": {"b": None, "a": "A"}},
                      "level": {"type": "score", "instructions": "How?", "criteria": ["low", {"x": 1}]},
                      "ok": {"type": "noul", "instructions": "OK?", "criteria": {"false": None}},
                      "plain": NOUL}})
    assert request.model == "~typesafe/jev-latest" and request.state == {"ticket": "refund"}
    assert [(q.id, q.type, q.instructions, q.criteria) for q in request.questions] == [
        ("route", "choice", ["Which?"], {"b": None, "a": "A"}), ("level", "score", "How?", ["low", {"x": 1}]),
        ("ok", "noul", "OK?", {"false": None}), ("plain", "noul", "OK?", None)]


def test_the_wire_reading_ignores_unknown_fields_and_lets_a_noul_go_without_instructions() -> None:
    request = validate_request({"state": "x", "questions": {"q": {"type": "noul", "criteria": {"true": "yes"}}},
                                "stream": True}, wire=True)
    assert [(q.instructions, q.criteria) for q in request.questions] == [(None, {"true": "yes"})]
    with pytest.raises(RequestInvalid, match="needs instructions"):
        validate_request({"state": "x", "questions": {"q": {"type": "noul"}}})


# ---------------------------------------------------------------- the advertised schema

ADVERTISED = derived_schema(EvaluateRequest)


def _ecma_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    # JSON Schema's patterns are ECMA-262's, whose `$` is the end of the text; Python's `$` (which
    # jsonschema uses) also matches before a final newline.
    if validator.is_type(instance, "string"):
        python = pattern[:-1] + r"\Z" if pattern.endswith("$") and not pattern.endswith(r"\$") else pattern
        if re.search(python, instance) is None:
            yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _ecma_pattern})
SCHEMA = _Validator(ADVERTISED)

#: What the validator checks around the model, which no JSON Schema can state.
OUTSIDE_THE_MODEL = ("lone surrogate", "not finite JSON", "exceeds", "nested deeper", "JSON nodes", "is not JSON",
                     "non-string object key")


def test_the_advertised_schema_is_a_valid_schema_written_inline() -> None:
    jsonschema.Draft202012Validator.check_schema(ADVERTISED)
    text = json.dumps(ADVERTISED)
    assert "$ref" not in text and "$defs" not in text and '"title"' not in text
    assert SCHEMA.is_valid(REQUEST)


_text = st.text(max_size=3) | st.lists(st.integers(), max_size=2) | st.dictionaries(st.text(max_size=2), st.none(),
                                                                                   max_size=2)
_described = _text | st.none() | st.integers()


@st.composite
def near_the_limits(draw: st.DrawFn) -> dict[str, Any]:
    """Requests built near each limit of the shape: counts, lengths and types just inside or outside."""
    def key(lo: int, hi: int) -> str:
        return draw(st.sampled_from("kq")) * draw(st.sampled_from([lo - 1, lo, hi, hi + 1]))

    questions: dict[str, Any] = {}
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["choice", "score", "noul", "text"]))
        question: dict[str, Any] = {"type": kind, "instructions": draw(_text)}
        if kind == "choice":
            question["criteria"] = {key(1, 256): draw(_described) for _ in range(draw(st.sampled_from([0, 1, 2])))}
        elif kind == "score":
            question["criteria"] = draw(st.lists(_described, min_size=1, max_size=11))
        elif draw(st.booleans()):
            question["criteria"] = draw(st.dictionaries(st.sampled_from(["true", "false", "maybe"]), _described))
        if draw(st.integers(0, 9)) == 0:
            del question[draw(st.sampled_from(sorted(question)))]
        questions[key(1, 128)] = question
    request: dict[str, Any] = {"state": draw(_text), "questions": questions}
    if draw(st.booleans()):
        request["model"] = draw(st.sampled_from(["jev-latest", "~a/b", "a/b/c", "a..b", "-a", "a" * 129, None, 1]))
    return request


@fuzz_timeout
@given(mutated(REQUEST) | json_values() | near_the_limits())
@example(REQUEST)
@example({**REQUEST, "model": "a..b"})
@example({**REQUEST, "model": "jev\n"})
@example({**REQUEST, "questions": {"q": {"type": "choice", "instructions": "x", "criteria": {"": None}}}})
@example({**REQUEST, "questions": {"q": {"type": "noul", "instructions": "x", "criteria": None}}})
@example({**REQUEST, "questions": {"q": {"type": "noul", "instructions": "x", "criteria": {"true": 1}}}})
def test_the_advertised_schema_accepts_what_the_validator_accepts(raw: Any) -> None:
    try:
        validate_request(raw)
    except RequestInvalid as exc:
        if not any(words in str(exc) for words in OUTSIDE_THE_MODEL):
            assert not SCHEMA.is_valid(raw), f"the schema accepts what the validator refuses: {exc}"
        return
    assert SCHEMA.is_valid(raw), [e.message for e in SCHEMA.iter_errors(raw)]


@pytest.mark.anyio
async def test_the_mcp_tool_advertises_the_model_and_refuses_in_its_words(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install -e '.[mcp]')")
    from tests.test_mcp import error_text, server

    async with server(tmp_path) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        wrong = error_text(await session.call_tool("jev_evaluate", ask(q={"type": "score", "instructions": "?",
                                                                          "criteria": ["low"]})))
    assert tools["jev_evaluate"].input_schema == ADVERTISED
    assert wrong == "invalid arguments for jev_evaluate: question 'q': score criteria must be an array of 2-10 levels"
