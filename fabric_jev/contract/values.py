"""Values that cross the host boundary: finite JSON, size caps, schema checks."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeAlias, Union

# Re-exported: they were defined here first, and most of the package reads them from here.
from .._surrogates import without_lone_surrogates
from ..errors import JevError
from .json_basics import is_finite_number as is_finite_number
from .json_basics import key_names as key_names
from .json_basics import path_step as path_step
from .schema_match import matches

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

#: A JSON value as Python holds it after `json.loads`: what crosses every boundary.
JsonValue: TypeAlias = Union[bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"], None]  # noqa: UP007
#: A JSON object.
JsonObject: TypeAlias = dict[str, JsonValue]
#: JSON a caller hands in: any mapping or sequence of JSON will do (tuples become lists).
JsonInput: TypeAlias = Union[bool, int, float, str, Sequence["JsonInput"], Mapping[str, "JsonInput"], None]  # noqa: UP007


MAX_VALUE_BYTES = 32_768
class ValueRejected(JevError, ValueError):
    """A value is not finite JSON, too large, or off its schema (message says which side). Also a
    ValueError. At launch it is reported as InputInvalid, from a run as its error."""


# One encoder, built once: json.dumps with options builds a new one per call.
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


#: How deep a value may nest (the guest's own stack allows far more).
MAX_DEPTH = 256


def normalize_json(value: object, side: str) -> JsonValue:
    """Return `value` as plain finite JSON, or raise `ValueRejected`.

    Tuples become lists; lone UTF-16 surrogates (which a guest string may hold
    but UTF-8 cannot) become U+FFFD so envelopes can always be printed.
    """

    def walk(v: object, path: str, depth: int) -> JsonValue:
        if depth > MAX_DEPTH:
            raise ValueRejected(f"{side} is nested too deeply")
        if v is None or isinstance(v, bool):
            return v
        if isinstance(v, int):
            if not is_finite_number(v):
                raise ValueRejected(f"{side} is not finite JSON: an integer past the float range at {path}")
            return v
        if isinstance(v, float):
            if not math.isfinite(v):
                raise ValueRejected(f"{side} is not finite JSON: {v!r} at {path}")
            return v
        if isinstance(v, str):
            return without_lone_surrogates(v)
        if isinstance(v, list | tuple):
            return [walk(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(v)]
        if isinstance(v, dict):
            out: dict[str, JsonValue] = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    raise ValueRejected(f"{side} is not JSON: object key {k!r} at {path}")
                key = without_lone_surrogates(k)
                out[key] = walk(x, path + path_step(k), depth + 1)
            return out
        raise ValueRejected(f"{side} is not JSON: {type(v).__name__} at {path}")

    return walk(value, "$", 0)


@lru_cache(maxsize=1)
def _validator_class() -> type[Draft202012Validator]:
    # Imported here: jsonschema is a large import that commands not validating values never need.
    from jsonschema import Draft202012Validator, ValidationError, validators

    from .formats import pattern_matches

    def pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
        # RE2 instead of jsonschema's `re`: linear time whatever the pattern and the value.
        if isinstance(instance, str) and not pattern_matches(pattern, instance):
            yield ValidationError(f"{_short(instance)} does not match the pattern {pattern!r}")

    extend: Callable[..., type[Draft202012Validator]] = validators.extend  # jsonschema leaves it untyped
    return extend(Draft202012Validator, {"pattern": pattern})


def _short(value: str) -> str:
    return repr(value) if len(value) <= 80 else repr(value[:77] + "...")


@lru_cache(maxsize=256)
def _validator(schema_text: str) -> Draft202012Validator:
    # Imported here, as jsonschema is: needed only to say why a value does not match.
    from .formats import format_checker

    return _validator_class()(json.loads(schema_text), format_checker=format_checker())


@lru_cache(maxsize=256)
def _subset_schema(schema_text: str) -> dict[str, Any] | None:
    """The schema as jsonschema reads it, when it is in the subset (so `schema_match` may judge
    values against it); None otherwise."""
    from ..errors import SchemaInvalid
    from .schema_subset import check_schema

    schema: dict[str, Any] = json.loads(schema_text)
    try:
        check_schema(schema, "schema")
    except SchemaInvalid:
        return None
    return schema


def checked_json(value: object, schema: dict[str, Any], side: str,
                 max_bytes: int = MAX_VALUE_BYTES) -> tuple[JsonValue, str]:
    """A caller's value made plain finite JSON, capped and checked against `schema`,
    with its compact JSON text: encoded once, for both the size cap and the wire."""
    value = normalize_json(value, side)
    text = _COMPACT.encode(value)
    _check(value, text, schema, side, max_bytes)
    return value, text


def check_value(value: object, schema: dict[str, Any], side: str,
                max_bytes: int = MAX_VALUE_BYTES) -> JsonValue:
    """Normalize `value`, enforce the byte cap, and validate it against `schema`."""
    return checked_json(value, schema, side, max_bytes)[0]


def check_decoded(value: JsonValue, schema: dict[str, Any], side: str,
                  max_bytes: int = MAX_VALUE_BYTES) -> JsonValue:
    """A value parsed from the sandbox wire, where lone surrogates were already
    replaced: its nesting, size and schema are checked without a second scrub."""
    try:
        text = _COMPACT.encode(value)
    except RecursionError:
        raise ValueRejected(f"{side} is nested too deeply") from None
    if text.count("[") + text.count("{") > MAX_DEPTH:  # only then can it nest too deeply
        from .._json import JSONInputError, check_depth

        try:
            check_depth(text, MAX_DEPTH, side)
        except JSONInputError:
            raise ValueRejected(f"{side} is nested too deeply") from None
    _check(value, text, schema, side, max_bytes)
    return value


def _check(value: JsonValue, text: str, schema: dict[str, Any], side: str, max_bytes: int) -> None:
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > max_bytes:
        raise ValueRejected(f"{side} exceeds {max_bytes} bytes")
    if not schema:
        return  # {} accepts any finite JSON value (already checked above)
    schema_text = json.dumps(schema, sort_keys=True)
    subset = _subset_schema(schema_text)
    if subset is not None and matches(value, subset):
        return  # jsonschema's verdict without its import (contract/schema_match.py)
    validator = _validator(schema_text)
    error = next(iter(validator.iter_errors(value)), None)
    if error is not None:
        where = "$" + "".join(f"[{p}]" if isinstance(p, int) else path_step(str(p)) for p in error.path)
        raise ValueRejected(f"{side} does not match its declared schema: {error.message} at {where}")
