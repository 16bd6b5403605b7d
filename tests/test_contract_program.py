from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fabric_jev import ProgramInvalid, SchemaInvalid
from fabric_jev.contract import parse_program
from fabric_jev.contract.program import Program, plain_program, validate_as
from tests.conftest import program


def test_minimal_program_parses() -> None:
    p = parse_program(program("return 1", requires=["jev.evaluate"]))
    assert p.name == "test" and p.requires == ("jev.evaluate",)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 129}, "name"),
        ({"code": ""}, "code"),
        ({"code": "x" * 65_537}, "code"),
        ({"requires": ["ab"]}, "3-256"),
        ({"requires": ["a." + "b" * 255]}, "3-256"),
        ({"requires": ["Browser.cdp"]}, "connector.capability"),
        ({"requires": ["nodot"]}, "connector.capability"),
        ({"requires": ["a.b", "a.b"]}, "twice"),
        ({"requires": [f"c.r{i}" for i in range(65)]}, "requires"),
        ({"limits": {"timeoutMs": 0}}, "timeoutMs"),
        ({"limits": {"maxToolCalls": 1.5}}, "maxToolCalls"),
        ({"limits": {"maxTokens": True}}, "maxTokens"),
        ({"limits": {"other": 1}}, "other"),
        ({"extra": 1}, "extra"),
        ({"name": 5}, "name"),
    ],
)
def test_program_rules(change: dict[str, Any], needle: str) -> None:
    with pytest.raises(ProgramInvalid) as err:
        parse_program({**program("return 1"), **change})
    assert needle in str(err.value)
    assert str(err.value).startswith("Invalid Jev program")


def test_max_evaluations_may_be_zero() -> None:
    p = parse_program(program("return 1", limits={"maxEvaluations": 0}))
    assert p.limits is not None and p.limits.max_evaluations == 0


def test_missing_schema_is_rejected() -> None:
    raw = program("return 1")
    del raw["outputSchema"]
    with pytest.raises(ProgramInvalid, match="outputSchema"):
        parse_program(raw)


def test_non_object_program_is_rejected() -> None:
    with pytest.raises(ProgramInvalid, match="expected a JSON object"):
        parse_program([1, 2])


def test_schema_errors_name_the_side() -> None:
    with pytest.raises(SchemaInvalid, match="outputSchema"):
        parse_program(program("return 1", outputSchema={"pattern": "(?=x)"}))


# ------------------------------------------------ a program read without building its schema

_ANY_TEXT = st.text(alphabet=st.characters(codec=None, categories=None), max_size=6)
_REFS = st.sampled_from(["jev.evaluate", "demo.read", "a.b", "ab", "A.b", "x.y\n", "demo.read"]) | _ANY_TEXT
_ODD: st.SearchStrategy[Any] = st.none() | st.booleans() | st.integers(-2, 3) | st.floats(allow_nan=False) | _ANY_TEXT | st.just([]) | st.just({})
_LIMIT = st.none() | st.integers(-1, 2) | st.booleans() | st.floats(0, 2) | st.just(2**70)
_LIMITS = st.none() | _ODD | st.dictionaries(
    st.sampled_from(["timeoutMs", "maxEvaluations", "maxToolCalls", "maxTokens", "timeout", "max_tokens"]),
    _LIMIT, max_size=3)
_FIELDS: dict[str, Any] = {
    "name": st.sampled_from(["p", "x" * 128, "x" * 129, "", "n\ud800", "ü ✓"]) | _ODD,
    "code": st.sampled_from(["return 1", "", "c\udfff"]) | _ODD,
    "inputSchema": st.just({}) | st.dictionaries(_ANY_TEXT, st.none() | st.just("string"), max_size=2) | _ODD,
    "outputSchema": st.just({"type": "integer"}) | _ODD,
    "requires": st.lists(_REFS, max_size=4) | st.tuples(_REFS) | st.just(["a.b"] * 65) | _ODD,
    "limits": _LIMITS,
    "language": st.sampled_from(["javascript", "typescript", "python", None]) | _ODD,
    "input_schema": st.just({}),
    "extra": st.just(1),
}
_VALID = {"name": "p", "code": "return 1", "inputSchema": {}, "outputSchema": {}}


@st.composite
def _artifacts(draw: st.DrawFn) -> dict[str, Any]:
    raw = dict(_VALID)
    for key in draw(st.lists(st.sampled_from(sorted(_FIELDS)), max_size=3, unique=True)):
        raw[key] = draw(_FIELDS[key])
    for key in draw(st.lists(st.sampled_from(sorted(_VALID)), max_size=1)):
        raw.pop(key, None)
    return raw


@settings(max_examples=300, deadline=None)
@given(raw=_artifacts())
@example(raw={**_VALID, "requires": ["jev.evaluate", "demo.read"], "limits": {"timeoutMs": 5, "maxEvaluations": 0},
              "language": "typescript"})
@example(raw={**_VALID, "limits": None, "language": None, "requires": []})
def test_a_program_read_without_a_schema_is_the_one_pydantic_makes(raw: dict[str, Any]) -> None:
    plain = plain_program(raw)
    try:
        validated = validate_as(Program, raw, ProgramInvalid, "Invalid Jev program")
    except ProgramInvalid:
        assert plain is None  # refused by pydantic, in its words
        return
    if plain is None:  # left to pydantic, which accepts it: only for what the plain reader does not know
        return
    assert plain == validated
    assert plain.model_fields_set == validated.model_fields_set
    assert plain.limits == validated.limits
    if plain.limits is not None and validated.limits is not None:
        assert plain.limits.model_fields_set == validated.limits.model_fields_set
    assert plain.to_json() == validated.model_dump(mode="json")
    assert plain.input_schema is not raw["inputSchema"]  # a copy, as pydantic makes one


def test_a_well_formed_program_is_read_without_pydantic() -> None:
    raw = {**_VALID, "requires": ["jev.evaluate"], "limits": {"maxTokens": 9}, "language": "javascript"}
    read = plain_program(raw)
    assert read is not None and read.requires == ("jev.evaluate",) and read.limits is not None
    assert read.limits.max_tokens == 9
