"""Whether a value matches a schema of the subset, answered without jsonschema.

jsonschema stays the authority on what a refusal says (`values.py` asks it
for the message), but importing it costs a command more than the sandbox's
engine costs to start (docs/performance.md, "Start-up of run"), and a value
that matches needs no message. So a match is decided here, by the rule
jsonschema's Draft 2020-12 validator applies to each keyword of the subset,
and jsonschema is imported only for a value that does not match.

The answer must be exactly jsonschema's: tests/test_schema_match.py holds it
against jsonschema on random schemas of the subset and values near them. Only
schemas `check_schema` accepts are judged here (values.py sees to it), so
every keyword value has its documented shape; a keyword this module does not
know is no answer (`None`), and the caller asks jsonschema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

_TYPES: dict[str, Callable[[Any], bool]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    # Draft 6 and later: a float with no fractional part is an integer too.
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
}
#: Keywords that only annotate: jsonschema has no rule for them.
_ANNOTATIONS = frozenset({"title", "description"})


class _Unknown(Exception):
    """Something outside what this module judges: jsonschema must answer."""


def matches(value: Any, schema: Any) -> bool | None:
    """True or False as jsonschema's Draft 2020-12 validator judges `value` against a schema of
    the subset; None for a keyword this module does not judge."""
    try:
        return _valid(value, schema)
    except _Unknown:
        return None


def _valid(v: Any, schema: dict[str, Any]) -> bool:
    for key, rule in schema.items():
        check = _KEYWORDS.get(key)
        if check is None:
            if key in _ANNOTATIONS:
                continue
            raise _Unknown
        if not check(v, rule, schema):
            return False
    return True


def _equal(one: Any, two: Any) -> bool:
    """jsonschema's equality: JSON's, so True is not 1 and False is not 0, at any depth."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(k in two and _equal(x, two[k]) for k, x in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return False  # `one is two` above was the only way for a boolean to be equal
    return bool(one == two)


def _type(v: Any, rule: str, _: dict[str, Any]) -> bool:
    return _TYPES[rule](v)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _minimum(v: Any, rule: float, _: dict[str, Any]) -> bool:
    return not _number(v) or not v < rule


def _maximum(v: Any, rule: float, _: dict[str, Any]) -> bool:
    return not _number(v) or not v > rule


def _sized(kind: type[str | list[Any] | dict[str, Any]],
           at_least: bool) -> Callable[[Any, int, dict[str, Any]], bool]:
    """minLength and the like: a bound on the length of a value of one kind (others pass)."""
    def check(v: Any, rule: int, _: dict[str, Any]) -> bool:
        if not isinstance(v, kind):
            return True
        return not len(v) < rule if at_least else not len(v) > rule
    return check


def _enum(v: Any, rule: list[Any], _: dict[str, Any]) -> bool:
    return any(_equal(each, v) for each in rule)


def _const(v: Any, rule: Any, _: dict[str, Any]) -> bool:
    return _equal(v, rule)


def _properties(v: Any, rule: dict[str, Any], _: dict[str, Any]) -> bool:
    return not isinstance(v, dict) or all(_valid(v[name], sub) for name, sub in rule.items() if name in v)


def _required(v: Any, rule: list[str], _: dict[str, Any]) -> bool:
    return not isinstance(v, dict) or all(name in v for name in rule)


def _additional(v: Any, rule: bool | dict[str, Any], schema: dict[str, Any]) -> bool:
    if not isinstance(v, dict):
        return True
    declared = schema.get("properties", {})
    extras = [name for name in v if name not in declared]
    if isinstance(rule, dict):
        return all(_valid(v[name], rule) for name in extras)
    return rule or not extras


def _items(v: Any, rule: dict[str, Any], _: dict[str, Any]) -> bool:
    return not isinstance(v, list) or all(_valid(item, rule) for item in v)


def _pattern(v: Any, rule: str, _: dict[str, Any]) -> bool:
    # Matched by RE2, as values.py has jsonschema match it (contract/formats.py says why).
    from .formats import pattern_matches

    return not isinstance(v, str) or pattern_matches(rule, v)


def _format(v: Any, rule: str, _: dict[str, Any]) -> bool:
    from .formats import FORMATS

    return not isinstance(v, str) or FORMATS[rule](v)


def _all_of(v: Any, rule: list[Any], _: dict[str, Any]) -> bool:
    return all(_valid(v, sub) for sub in rule)


def _any_of(v: Any, rule: list[Any], _: dict[str, Any]) -> bool:
    return any(_valid(v, sub) for sub in rule)


def _one_of(v: Any, rule: list[Any], _: dict[str, Any]) -> bool:
    return sum(1 for sub in rule if _valid(v, sub)) == 1


#: Each keyword's rule: (value, the keyword's value, the whole schema node) -> whether it holds.
_KEYWORDS: dict[str, Callable[[Any, Any, dict[str, Any]], bool]] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "properties": _properties,
    "required": _required,
    "additionalProperties": _additional,
    "items": _items,
    "allOf": _all_of,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "minimum": _minimum,
    "maximum": _maximum,
    "minLength": _sized(str, True),
    "maxLength": _sized(str, False),
    "minItems": _sized(list, True),
    "maxItems": _sized(list, False),
    "minProperties": _sized(dict, True),
    "maxProperties": _sized(dict, False),
    "pattern": _pattern,
    "format": _format,
}
