"""JSON Schemas derived from the contract's models, for the MCP tools (as FastMCP derives its own).

pydantic writes a model's JSON Schema by its wire names; two changes make it what
every MCP client reads: references are written out in place (a generic client
such as the MCP Inspector renders an inline schema; a `$ref` into `$defs` it may
not follow), and the keywords that only name things for a reader of code —
`title` on every model and field, OpenAPI's `discriminator` (its mapping points
into the `$defs` that are gone) — are left out. The rest is pydantic's.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

# Keywords whose value is one schema, a list of schemas, or a map of names to schemas.
_ONE = frozenset({"items", "additionalProperties", "not", "propertyNames", "contains", "if", "then", "else",
                  "unevaluatedItems", "unevaluatedProperties"})
_MANY = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_NAMED = frozenset({"properties", "patternProperties", "dependentSchemas"})
_DROPPED = frozenset({"title", "discriminator"})


def derived_schema(shape: Any) -> dict[str, Any]:
    """The JSON Schema of a model (or any type pydantic validates), as MCP tools advertise it."""
    schema = TypeAdapter(shape).json_schema(by_alias=True, mode="validation")
    definitions = schema.pop("$defs", {})
    return _inline(schema, definitions)


def _inline(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        # pydantic refers only into its own $defs, and the contract's models do not recur.
        target = definitions[ref.removeprefix("#/$defs/")]
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return _inline({**target, **rest}, definitions)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROPPED:
            continue
        if key in _ONE and isinstance(value, dict):
            out[key] = _inline(value, definitions)
        elif key in _MANY and isinstance(value, list):
            out[key] = [_inline(v, definitions) for v in value]
        elif key in _NAMED and isinstance(value, dict):
            out[key] = {name: _inline(v, definitions) for name, v in value.items()}
        else:
            out[key] = value
    return out
