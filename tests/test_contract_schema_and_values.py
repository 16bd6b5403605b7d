from __future__ import annotations

from typing import Any

import pytest

from fabric_jev import SchemaInvalid
from fabric_jev.contract import ValueRejected, check_schema, check_value


def nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth - 1):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize("schema", [
    {},
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}},
     "required": ["a"], "additionalProperties": False},
    {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "null"}]},
    {"enum": [1, "a", None]},
    {"const": {"x": 1}, "title": "t", "description": "d"},
    {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 3},
    {"type": "object", "additionalProperties": {"type": "boolean"}, "minProperties": 1},
    nested(12),
])
def test_subset_accepts(schema: dict[str, Any]) -> None:
    check_schema(schema, "inputSchema")


@pytest.mark.parametrize(("schema", "needle"), [
    ({"$ref": "#/x"}, "'$ref' is not supported"),
    ({"type": "string", "pattern": "(?=a)"}, "no lookaround and no backreferences"),
    ({"type": "string", "pattern": "(a)\\1"}, "RE2 cannot compile it"),
    ({"type": "string", "pattern": "a" * 1001}, "at most 1000 characters"),
    ({"type": "string", "pattern": 5}, "pattern must be a string"),
    ({"type": "string", "format": "ipv4"}, "format must be one of date-time, date, email, uri, uuid"),
    ({"patternProperties": {"a": {}}}, "'patternProperties' is not supported"),
    ({"properties": {"a": {"unknownKey": 1}}}, "'unknownKey' is not supported"),
    ({"type": ["string", "null"]}, "single string"),
    ({"type": "date"}, "type must be one of"),
    ({"enum": []}, "1-256"),
    ({"enum": list(range(257))}, "1-256"),
    ({"anyOf": []}, "1-16"),
    ({"oneOf": [{}] * 17}, "1-16"),
    ({"minLength": -1}, "non-negative integer"),
    ({"minimum": "1"}, "finite number"),
    ({"required": ["a", "a"]}, "unique strings"),
    ({"items": [{}]}, "must be a JSON object"),
    (nested(13), "deeper than 12"),
    ({"properties": {f"p{i}": {} for i in range(128)}}, "more than 128 schema nodes"),
    ({"description": "x" * 16_400}, "exceeds 16384 bytes"),
])
def test_subset_rejects_with_named_subset(schema: dict[str, Any], needle: str) -> None:
    with pytest.raises(SchemaInvalid) as err:
        check_schema(schema, "inputSchema")
    assert needle in str(err.value)
    assert str(err.value).startswith("inputSchema")


def test_unsupported_keyword_message_names_the_subset() -> None:
    with pytest.raises(SchemaInvalid, match="only the JSON Schema subset"):
        check_schema({"not": {}}, "outputSchema")


def test_empty_schema_accepts_any_finite_json() -> None:
    assert check_value({"a": [1, 2.5, None, True, "s"]}, {}, "input") == \
        {"a": [1, 2.5, None, True, "s"]}


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {"a": [float("-inf")]}])
def test_non_finite_values_are_rejected(bad: Any) -> None:
    with pytest.raises(ValueRejected, match="input is not finite JSON"):
        check_value(bad, {}, "input")


def test_non_json_values_are_rejected() -> None:
    with pytest.raises(ValueRejected, match="output is not JSON"):
        check_value({1: "a"}, {}, "output")
    with pytest.raises(ValueRejected, match="input is not JSON: set"):
        check_value({1, 2}, {}, "input")


def test_size_cap_names_the_side() -> None:
    check_value("x" * 32_766, {}, "input")  # 32,768 bytes with quotes
    with pytest.raises(ValueRejected, match="input exceeds 32768 bytes"):
        check_value("x" * 32_767, {}, "input")
    with pytest.raises(ValueRejected, match="output exceeds 32768 bytes"):
        check_value("é" * 16_384, {}, "output")


def test_schema_mismatch_names_the_side_and_place() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    with pytest.raises(ValueRejected) as err:
        check_value({"n": "x"}, schema, "output")
    assert "output does not match its declared schema" in str(err.value)
    assert "$.n" in str(err.value)


def test_lone_surrogates_become_replacement_characters() -> None:
    assert check_value("a\ud800b", {}, "output") == "a\ufffdb"
