"""JSON Schemas derived from the contract's models, for the MCP tools (as FastMCP derives its own).

pydantic writes a model's JSON Schema by its wire names; two changes make it what
every MCP client reads: references are written out in place (a generic client
such as the MCP Inspector renders an inline schema; a `$ref` into `$defs` it may
not follow), and the keywords that only name things for a reader of code —
`title` on every model and field, OpenAPI's `discriminator` (its mapping points
into the `$defs` that are gone) — are left out. The rest is pydantic's.
"""

from __future__ import annotations

from typing import Any, Literal

from ..contract.wire_model import wire_adapter

# Keywords whose value is one schema, a list of schemas, or a map of names to schemas.
_ONE = frozenset({"items", "additionalProperties", "not", "propertyNames", "contains", "if", "then", "else",
                  "unevaluatedItems", "unevaluatedProperties"})
_MANY = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_NAMED = frozenset({"properties", "patternProperties", "dependentSchemas"})
_DROPPED = frozenset({"title", "discriminator"})


def derived_schema(shape: Any, *, mode: Literal["validation", "serialization"] = "validation",
                   absent_not_null: bool = False) -> dict[str, Any]:
    """The JSON Schema of a model (or any type pydantic validates), as MCP tools advertise it.

    ``mode="serialization"`` is an output's: what the model writes (its `to_json`), which for a
    result is what a client reads. ``absent_not_null`` is for a tool's arguments, which the server
    checks against the schema itself: an optional one is offered without `null` (`_left_out`).
    A model that contains itself (a mixed `Provenance` lists its answerers) cannot be written out
    in place: that one definition stays in ``$defs``, referred to from where it recurs.
    """
    schema = wire_adapter(shape).json_schema(by_alias=True, mode=mode)
    definitions = schema.pop("$defs", {})
    kept: dict[str, Any] = {}
    out = _inline(schema, definitions, (), kept)
    if kept:
        out["$defs"] = kept
    if "anyOf" in out and all(branch.get("type") == "object" for branch in out["anyOf"]):
        # One of several objects is an object: MCP publishes only an output schema whose root says so.
        out = {"type": "object", **out}
    return _left_out(out) if absent_not_null else out


def _left_out(schema: Any) -> Any:
    """An argument that may be left out is offered without `null`: ``X | None = None`` in a model
    is "not given", which a client says by leaving the key out (a JSON Schema validator's message
    for a wrong value is then about X, not "not valid under any of the given schemas")."""
    if isinstance(schema, list):
        return [_left_out(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _left_out(value) for key, value in schema.items()}
    properties = out.get("properties")
    if isinstance(properties, dict):
        required = set(out.get("required", ()))
        out["properties"] = {name: _not_null(value) if name not in required else value
                             for name, value in properties.items()}
    return out


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    branches = schema.get("anyOf")
    if ("default" not in schema or schema["default"] is not None or not isinstance(branches, list)
            or len(branches) != 2 or {"type": "null"} not in branches):
        return schema
    [kept] = [b for b in branches if b != {"type": "null"}]
    return {**{k: v for k, v in schema.items() if k not in ("anyOf", "default")}, **kept}


def _inline(schema: dict[str, Any], definitions: dict[str, Any], inside: tuple[str, ...],
            kept: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        # pydantic refers only into its own $defs.
        name = ref.removeprefix("#/$defs/")
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        if name in inside:  # it recurs: refer to one copy, written out once in $defs
            if name not in kept:
                kept[name] = {}
                kept[name] = _inline(definitions[name], definitions, (), kept)
            return {"$ref": ref, **rest}
        return _inline({**definitions[name], **rest}, definitions, (*inside, name), kept)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROPPED:
            continue
        if key in _ONE and isinstance(value, dict):
            out[key] = _inline(value, definitions, inside, kept)
        elif key in _MANY and isinstance(value, list):
            out[key] = [_inline(v, definitions, inside, kept) for v in value]
        elif key in _NAMED and isinstance(value, dict):
            out[key] = {name: _inline(v, definitions, inside, kept) for name, v in value.items()}
        else:
            out[key] = value
    return out
