"""The JSON Schema subset accepted for inputSchema/outputSchema (contract §4).

Anything outside the subset is refused, never silently trusted: a schema that
used `$ref` or an unknown `format` would otherwise validate less than its
author meant. `pattern` (on RE2) and the formats of `formats.FORMATS` are
checked on input and output alike.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import SchemaInvalid
from .json_basics import did_you_mean, is_finite_number, path_step

MAX_SCHEMA_BYTES = 16_384
MAX_SCHEMA_NODES = 128
MAX_SCHEMA_DEPTH = 12
#: How deep an `enum` entry or a `const` may nest (as deep as a jev.evaluate request): every
#: reader of a schema (validation, the type checker's declarations) may walk it recursively.
MAX_VALUE_DEPTH = 32

JSON_TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})
_SCHEMA_MAP = "properties"
_SCHEMA_ONE = ("items",)
_SCHEMA_LIST = ("anyOf", "oneOf", "allOf")
_NUMBERS = ("minimum", "maximum")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
_TEXT = ("description", "title")
ALLOWED_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const",
     "pattern", "format", *_SCHEMA_LIST, *_NUMBERS, *_COUNTS, *_TEXT}
)
_SUBSET_NOTE = (
    "fabric-jev accepts only the JSON Schema subset: " + ", ".join(sorted(ALLOWED_KEYWORDS))
)


class _Walk:
    def __init__(self, side: str) -> None:
        self.side = side
        self.nodes = 0

    def fail(self, path: str, message: str) -> SchemaInvalid:
        return SchemaInvalid(f"{self.side} at {path}: {message}")

    def schema(self, node: Any, path: str, depth: int) -> None:
        if not isinstance(node, dict):
            raise self.fail(path, "a schema must be a JSON object")
        self.nodes += 1
        if self.nodes > MAX_SCHEMA_NODES:
            raise SchemaInvalid(f"{self.side} has more than {MAX_SCHEMA_NODES} schema nodes")
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaInvalid(f"{self.side} is nested deeper than {MAX_SCHEMA_DEPTH} levels")
        for key, value in node.items():
            where = f"{path}.{key}"
            if key not in ALLOWED_KEYWORDS:
                guess = did_you_mean(key, ALLOWED_KEYWORDS)
                hint = f" (did you mean {guess}?)" if guess else ""
                raise self.fail(path, f"keyword {key!r} is not supported{hint}; {_SUBSET_NOTE}")
            if key == "type":
                if (isinstance(value, list) and value and len(value) <= 7
                        and all(isinstance(t, str) and t in JSON_TYPES for t in value)):
                    # JSON Schema's type array: the subset spells "one of several types" once, as anyOf.
                    branches = ", ".join(f'{{"type": "{t}"}}' for t in value)
                    raise self.fail(where, "type must be a single string; for a value of any of several "
                                    f'types write anyOf instead: {{"anyOf": [{branches}]}}')
                if not isinstance(value, str) or value not in JSON_TYPES:
                    guess = did_you_mean(value, JSON_TYPES) if isinstance(value, str) else None
                    raise self.fail(where, "type must be one of " + ", ".join(sorted(JSON_TYPES))
                                    + " (a single string)" + (f"; did you mean {guess}?" if guess else ""))
            elif key == _SCHEMA_MAP:
                if not isinstance(value, dict):
                    raise self.fail(where, "properties must be an object of schemas")
                for name, sub in value.items():
                    self.schema(sub, where + path_step(name), depth + 1)
            elif key == "required":
                if (not isinstance(value, list) or not all(isinstance(v, str) for v in value)
                        or len(set(value)) != len(value)):
                    raise self.fail(where, "required must be an array of unique strings")
            elif key == "additionalProperties":
                if not isinstance(value, bool):
                    self.schema(value, where, depth + 1)
            elif key in _SCHEMA_ONE:
                self.schema(value, where, depth + 1)
            elif key in _SCHEMA_LIST:
                if not isinstance(value, list) or not 1 <= len(value) <= 16:
                    raise self.fail(where, f"{key} must be an array of 1-16 schemas")
                for i, sub in enumerate(value):
                    self.schema(sub, f"{where}[{i}]", depth + 1)
            elif key == "enum":
                if not isinstance(value, list) or not 1 <= len(value) <= 256:
                    raise self.fail(where, "enum must be an array of 1-256 values")
                if _nesting(value) > MAX_VALUE_DEPTH + 1:
                    raise self.fail(where, f"an enum value nests deeper than {MAX_VALUE_DEPTH} levels")
            elif key == "const":
                if _nesting(value) > MAX_VALUE_DEPTH:
                    raise self.fail(where, f"const nests deeper than {MAX_VALUE_DEPTH} levels")
            elif key in _NUMBERS:
                if not is_finite_number(value):
                    raise self.fail(where, f"{key} must be a finite number")
            elif key in _COUNTS:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise self.fail(where, f"{key} must be a non-negative integer")
            elif key == "pattern":
                self.pattern(value, where)
            elif key == "format":
                from .formats import FORMATS

                if not isinstance(value, str) or value not in FORMATS:
                    raise self.fail(where, "format must be one of " + ", ".join(FORMATS)
                                    + " (other formats are not checked, so they are refused)")
            elif key in _TEXT and not isinstance(value, str):
                raise self.fail(where, f"{key} must be a string")

    def pattern(self, value: Any, where: str) -> None:
        from .formats import PatternInvalid, compile_pattern

        if not isinstance(value, str):
            raise self.fail(where, "pattern must be a string (an RE2 regular expression)")
        try:
            compile_pattern(value)
        except PatternInvalid as exc:
            raise self.fail(where, f"pattern {value[:80]!r}: {exc}") from None


def _nesting(value: Any) -> int:
    """How many containers deep `value` goes (a scalar: 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, depth + 1)
            if deepest > MAX_VALUE_DEPTH + 1:
                return deepest  # deep enough to refuse: the rest is not walked
            stack.extend((item, depth + 1) for item in node)
    return deepest


def check_schema(schema: object, side: str) -> None:
    """Raise `SchemaInvalid` unless `schema` is inside the supported subset."""
    try:
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        raise SchemaInvalid(f"{side} is not finite JSON") from None
    except RecursionError:  # a Python caller's schema, thousands of levels deep
        raise SchemaInvalid(f"{side} is nested deeper than {MAX_SCHEMA_DEPTH} levels") from None
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SCHEMA_BYTES:
        raise SchemaInvalid(f"{side} exceeds {MAX_SCHEMA_BYTES} bytes")
    _Walk(side).schema(schema, "$", 1)
