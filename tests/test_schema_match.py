"""contract/schema_match.py judges a value exactly as jsonschema does, on every schema of the subset.

The host decides that a value matches without importing jsonschema (a start-up
cost); jsonschema is still what words a refusal. These tests hold the two to
the same verdict: on random schemas of the subset and random values near them,
and on each keyword's edge cases (True is not 1, 1.0 is an integer, lengths
count code points).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from fabric_jev.contract.formats import FORMATS
from fabric_jev.contract.schema_match import matches
from fabric_jev.contract.schema_subset import JSON_TYPES, check_schema
from fabric_jev.contract.values import ValueRejected, _validator, check_value, path_step
from fabric_jev.errors import SchemaInvalid
from tests.fuzz_support import fuzz_timeout

pytestmark = fuzz_timeout

#: Strings that some formats accept and others (or a near miss) do not.
_FORMATTED = ["2025-06-01", "2025-13-01", "2025-06-01T09:30:00Z", "2025-06-01T24:00:00+01:00", "a@b.example",
              "a@@b", "https://example.com/a?b=c", "no scheme", "123e4567-e89b-12d3-a456-426614174000",
              "123e4567-e89b-12d3-a456-42661417400"]
_PATTERNS = ["^a", "b$", "a+", "^[ab]*$", "\\d", "\u00e9", "^$", "(a|b){2}", "^\\p{L}+$", "x?"]
#: Few names and small numbers, so that values often match and often just miss.
_NAMES = ["a", "b", "c", "\u00e9", "a b"]
_SCALARS = (st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False)
            | st.sampled_from([0, 1, 0.0, 1.0, -0.0, 2.5, 10**20, 1e20, -(10**30), "", "ab", "\U0001F600"])
            | st.text(alphabet="ab\u00e9", max_size=4) | st.sampled_from(_FORMATTED))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.sampled_from(_NAMES), inner, max_size=4), max_leaves=12)
_NUMBERS = st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False) | st.sampled_from([10**20, 0.5, -0.0])
_COUNTS = st.integers(0, 4) | st.sampled_from([10**400])


@st.composite
def _schemas(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    """A schema of the subset: any mix of its keywords, nested a few levels."""
    keywords = ["type", "enum", "const", "minimum", "maximum", "minLength", "maxLength", "minItems",
                "maxItems", "minProperties", "maxProperties", "required", "title", "description",
                "pattern", "format"]
    if depth < 3:
        keywords += ["properties", "additionalProperties", "items", "anyOf", "oneOf", "allOf"]
    schema: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(keywords), max_size=4, unique=True)):
        inner = _schemas(depth + 1)
        if key == "type":
            schema[key] = draw(st.sampled_from(sorted(JSON_TYPES)))
        elif key == "enum":
            schema[key] = draw(st.lists(_VALUES, min_size=1, max_size=4))
        elif key == "const":
            schema[key] = draw(_VALUES)
        elif key in ("minimum", "maximum"):
            schema[key] = draw(_NUMBERS)
        elif key.startswith(("min", "max")):
            schema[key] = draw(_COUNTS)
        elif key == "required":
            schema[key] = draw(st.lists(st.sampled_from(_NAMES), unique=True, max_size=3))
        elif key == "pattern":
            schema[key] = draw(st.sampled_from(_PATTERNS))
        elif key == "format":
            schema[key] = draw(st.sampled_from(sorted(FORMATS)))
        elif key in ("title", "description"):
            schema[key] = draw(st.text(max_size=3))
        elif key == "properties":
            schema[key] = draw(st.dictionaries(st.sampled_from(_NAMES), inner, max_size=3))
        elif key == "additionalProperties":
            schema[key] = draw(st.booleans() | inner)
        elif key == "items":
            schema[key] = draw(inner)
        else:
            schema[key] = draw(st.lists(inner, min_size=1, max_size=3))
    return schema


def _jsonschema(schema: dict[str, Any]) -> Draft202012Validator:
    """jsonschema's validator as the host builds it to word a refusal: keywords in sorted order,
    `pattern` matched by RE2, the subset's formats checked."""
    return _validator(json.dumps(schema, sort_keys=True))


def _jsonschema_outcome(value: Any, schema: dict[str, Any]) -> str | None:
    """What the host said before schema_match existed: jsonschema's first error, worded as the host words it."""
    error = next(iter(_jsonschema(schema).iter_errors(value)), None)
    if error is None:
        return None
    where = "$" + "".join(f"[{p}]" if isinstance(p, int) else path_step(str(p)) for p in error.path)
    return f"input does not match its declared schema: {error.message} at {where}"


@settings(max_examples=max(600, settings().max_examples))
@given(_schemas(), _VALUES)
@example({"enum": [1]}, True)
@example({"enum": [True]}, 1)
@example({"const": [0]}, [False])
@example({"const": {"a": 1}}, {"a": 1.0})
@example({"type": "integer"}, 1.0)
@example({"type": "integer"}, True)
@example({"type": "number"}, False)
@example({"maxLength": 1}, "\U0001F600")
@example({"oneOf": [{}, {"type": "null"}]}, None)
@example({"additionalProperties": False, "properties": {"a": {}}}, {"a": 1, "b": 2})
@example({"additionalProperties": {"type": "string"}}, {"a": "x", "b": 1})
@example({"minimum": 0.5}, 10**20)
@example({"pattern": "^a"}, "ba")
@example({"format": "date"}, "2025-02-30")
@example({"format": "email", "type": "string"}, 3)
def test_matches_exactly_when_jsonschema_finds_no_error(schema: dict[str, Any], value: Any) -> None:
    check_schema(schema, "inputSchema")  # what the strategy makes is in the subset
    expected = _jsonschema(schema).is_valid(value)
    assert matches(value, schema) is expected
    refusal = _jsonschema_outcome(value, schema)
    if refusal is None:
        assert check_value(value, schema, "input") == value
    else:
        with pytest.raises(ValueRejected) as rejected:
            check_value(value, schema, "input")
        assert str(rejected.value) == refusal


def test_a_keyword_outside_the_subset_is_left_to_jsonschema() -> None:
    assert matches(3, {"multipleOf": 2}) is None
    assert matches({"a": 1}, {"properties": {"a": {"$ref": "#"}}}) is None
    # jsonschema still judges a value against such a schema, as before.
    with pytest.raises(SchemaInvalid):
        check_schema({"multipleOf": 2}, "inputSchema")
    assert check_value(4, {"multipleOf": 2}, "input") == 4
    with pytest.raises(ValueRejected, match="3 is not a multiple of 2"):
        check_value(3, {"multipleOf": 2}, "input")


def test_a_matching_value_never_imports_jsonschema_and_a_refusal_does() -> None:
    import subprocess
    import sys

    code = "\n".join([
        "import sys",
        "from fabric_jev.contract.values import ValueRejected, check_value",
        "schema = {'type': 'object', 'properties': {'a': {'type': 'array', 'items': {'type': 'integer'}}},"
        " 'required': ['a']}",
        "check_value({'a': [1, 2]}, schema, 'input')",
        "print('jsonschema' in sys.modules)",
        "try:",
        "    check_value({'a': [1, 'x']}, schema, 'input')",
        "except ValueRejected as exc:",
        "    print(exc)",
        "print('jsonschema' in sys.modules)",
    ])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == [
        "False", "input does not match its declared schema: 'x' is not of type 'integer' at $.a[1]", "True"]
