"""What an expected value asks of a result, field by field. Pure code, no I/O.

An expected object is *partial*: each field it gives is compared, each field
it leaves out is ignored, and a nested object is compared the same way, its
fields named by dotted paths (``address.city``). With `match = "whole"` a
field of the result that the expected value does not give fails too (an
`extra` verdict). An expected value that is not an object (a string, a
number, an array…) is compared with the whole result, as the field ``$``.

A leaf compares:
- booleans, strings and null by equality (``true`` is not ``1``);
- numbers within the field's tolerance (``|actual − expected| ≤ tolerance``;
  exact by default, give one per field or ``*`` for every number);
- arrays and objects inside a leaf element by element, with the same tolerance.

A line passes when its run completed and every verdict holds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal, TypeGuard, cast

from pydantic import (
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    SkipValidation,
    model_serializer,
)
from pydantic import JsonValue as Json  # a model field's JSON: pydantic's own recursive alias

from ..contract.json_basics import JsonNumber
from ..contract.values import JsonValue
from ..contract.wire_model import WireModel

#: The field name of a comparison with the whole result.
WHOLE = "$"
#: Every tolerance entry for all numeric fields at once.
ANY_FIELD = "*"
#: Floating-point slack on top of every tolerance: 0.1 + 0.2 is 0.3.
EPSILON = 1e-9
Match = Literal["partial", "whole"]
MATCHES: tuple[Match, ...] = ("partial", "whole")
#: The kinds of field the summary counts differently (a confusion matrix for enums and booleans,
#: a mean absolute error for numbers).
FieldKind = Literal["enum", "boolean", "number", "string", "value"]
#: A string field with at most this many distinct expected values is counted as an enum.
ENUM_LIKE = 20


def _sorted(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return dict(sorted(mapping.items()))


class EvalSettings(WireModel):
    """How expected values are compared, and which question answers which field.

    Its JSON (the summary's `settings`) says what applied: `match` "partial" when
    nothing said otherwise, the names in sorted order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: None: not said here (partial, unless merged settings say otherwise).
    match: Annotated[Match | None, PlainSerializer(lambda match: match or "partial")] = None
    #: Absolute tolerance per numeric field (dotted path, or `*` for every number).
    tolerance: Annotated[dict[str, JsonNumber], PlainSerializer(_sorted)] = Field(default_factory=dict)
    #: Question id → the field its answer maps to, where the names differ.
    questions: Annotated[dict[str, str], PlainSerializer(_sorted)] = Field(default_factory=dict)

    def tolerance_for(self, path: str) -> float:
        found = self.tolerance.get(path)
        if found is None:
            found = self.tolerance.get(ANY_FIELD, 0.0)
        return found

    def merged(self, other: EvalSettings | None) -> EvalSettings:
        """These settings with `other`'s given values on top."""
        if other is None:
            return self
        return EvalSettings(match=other.match or self.match,
                            tolerance={**self.tolerance, **other.tolerance},
                            questions={**self.questions, **other.questions})


def parse_settings(raw: object, where: str) -> EvalSettings:
    """Settings from JSON (a dataset's header, a settings file); ValueError names the problem."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be an object {{match?, tolerance?, questions?}}")
    unknown = sorted(set(raw) - {"match", "tolerance", "questions"})
    if unknown:
        raise ValueError(f"{where} has an unknown key {unknown[0]!r} (known: match, tolerance, questions)")
    match = raw.get("match")
    if match is not None and match not in MATCHES:
        raise ValueError(f"{where}: match must be 'partial' or 'whole'")
    tolerance = raw.get("tolerance", {})
    if isinstance(tolerance, int | float) and not isinstance(tolerance, bool):
        tolerance = {ANY_FIELD: tolerance}
    if not isinstance(tolerance, dict):
        raise ValueError(f"{where}: tolerance must be a number or an object of field → number")
    for name, value in tolerance.items():
        check_tolerance(value, f"{where}: tolerance of {name!r}")
    questions = raw.get("questions", {})
    if not isinstance(questions, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                  for k, v in questions.items()):
        raise ValueError(f"{where}: questions must map question ids to field names")
    return EvalSettings(match=match, tolerance=dict(tolerance), questions=dict(questions))


def check_tolerance(value: object, where: str) -> JsonNumber:
    """The tolerance as given (1 stays 1 in the manifest and summary.json), if it is one."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where} must be a finite number ≥ 0")
    return value


class FieldVerdict(WireModel):
    """One expected field against the result; its JSON is ``{ok, actual?, extra?}`` (a record's
    `fields` names it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str = Field(exclude=True)
    ok: bool
    #: The result's value; `present` is False when the result has no such field (or no result),
    #: and the JSON has no `actual` then.
    actual: SkipValidation[Json] = None  # a value of the result: JSON already
    present: bool = Field(default=True, exclude=True)
    #: A field of the result the expected value does not give (`match = "whole"` only).
    extra: bool = Field(default=False, exclude_if=lambda extra: not extra)
    #: |actual − expected| when both are numbers.
    error: float | None = Field(default=None, exclude=True)

    @model_serializer(mode="wrap")
    def _without_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self.present:  # an actual of None is a null the result holds: only presence tells
            del data["actual"]
        return data


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def values_match(expected: object, actual: object, tolerance: float) -> bool:
    """Whether `actual` is `expected`, numbers within `tolerance`, deep into arrays and objects."""
    if _number(expected):
        return _number(actual) and abs(actual - expected) <= tolerance + EPSILON
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(actual) == len(expected)
                and all(values_match(e, a, tolerance) for e, a in zip(expected, actual, strict=True)))
    if isinstance(expected, dict):
        return (isinstance(actual, dict) and actual.keys() == expected.keys()
                and all(values_match(v, actual[k], tolerance) for k, v in expected.items()))
    # bool, str, None: `True == 1` in Python, so the types must agree too.
    return type(actual) is type(expected) and actual == expected


def leaves(expected: JsonValue, prefix: str = "") -> Iterator[tuple[str, JsonValue]]:
    """The fields an expected value gives, as (dotted path, expected leaf)."""
    if not isinstance(expected, dict):
        yield (prefix or WHOLE), expected
        return
    for key, value in expected.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from leaves(value, path + ".")
        else:
            yield path, value


_MISSING = object()


def _at(value: object, path: str) -> object:
    if path == WHOLE:
        return value
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return _MISSING
        value = value[key]
    return value


def compare(expected: JsonValue, result: JsonValue, *, completed: bool,
            settings: EvalSettings) -> tuple[FieldVerdict, ...]:
    """One verdict per field the expected value gives (and per extra field under `whole`)."""
    verdicts: list[FieldVerdict] = []
    for path, want in leaves(expected):
        actual = _at(result, path) if completed else _MISSING
        if actual is _MISSING:
            verdicts.append(FieldVerdict(field=path, ok=False, present=False))
            continue
        error = abs(actual - want) if _number(actual) and _number(want) else None
        verdicts.append(FieldVerdict(field=path, ok=values_match(want, actual, settings.tolerance_for(path)),
                                     actual=cast("JsonValue", actual), error=error))
    if settings.match == "whole" and completed and isinstance(expected, dict):
        verdicts.extend(_extras(expected, result, ""))
    return tuple(verdicts)


def _extras(expected: dict[str, JsonValue], result: JsonValue, prefix: str) -> Iterator[FieldVerdict]:
    if not isinstance(result, dict):
        return
    for key, value in result.items():
        if key not in expected:
            yield FieldVerdict(field=f"{prefix}{key}", ok=False, actual=value, extra=True)
        else:
            inner = expected[key]
            if isinstance(inner, dict) and inner:
                yield from _extras(inner, value, f"{prefix}{key}.")


def passed(verdicts: tuple[FieldVerdict, ...], *, completed: bool) -> bool:
    return completed and all(v.ok for v in verdicts)


# ---------------------------------------------------------------- the output schema

def schema_at(schema: object, path: str) -> dict[str, Any] | None:
    """The outputSchema's own schema of a field, where it declares one (`properties` only)."""
    if path == WHOLE:
        return schema if isinstance(schema, dict) else None
    for key in path.split("."):
        if not isinstance(schema, dict):
            return None
        properties = schema.get("properties")
        if not isinstance(properties, dict) or key not in properties:
            extra = schema.get("additionalProperties")
            schema = extra if isinstance(extra, dict) else None
            continue
        schema = properties[key]
    return schema if isinstance(schema, dict) else None


def _declares(schema: object, key: str) -> bool:
    """False only when the schema closes its object and has no such property."""
    if not isinstance(schema, dict):
        return True
    properties = schema.get("properties")
    return (isinstance(properties, dict) and key in properties) or schema.get("additionalProperties") is not False


def check_expected(expected: JsonValue, output_schema: Mapping[str, object]) -> str | None:
    """Why an expected value can never be met by a result of this schema, or None."""
    from ..contract.schema_match import matches

    for path, want in leaves(expected):
        if path != WHOLE:
            parent: object = output_schema
            for key in path.split("."):
                if not _declares(parent, key):
                    return f"expected field {path!r} is not in the program's outputSchema"
                parent = schema_at(parent, key) if isinstance(parent, dict) else None
        sub = schema_at(output_schema, path)
        if sub is not None and matches(want, sub) is False:
            shown = path if path != WHOLE else "value"
            return f"expected {shown} {_short(want)} does not fit the program's outputSchema"
    return None


def _short(value: JsonValue) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def field_kind(path: str, output_schema: Mapping[str, object], expected_values: list[JsonValue]) -> FieldKind:
    """How a field is counted: from its schema where it says, else from the expected values."""
    sub = schema_at(output_schema, path)
    if sub is not None:
        if "enum" in sub:
            return "enum"
        kind = sub.get("type")
        if kind == "boolean":
            return "boolean"
        if kind in ("number", "integer"):
            return "number"
    if expected_values and all(isinstance(v, bool) for v in expected_values):
        return "boolean"
    if expected_values and all(_number(v) for v in expected_values):
        return "number"
    if expected_values and all(isinstance(v, str) for v in expected_values):
        return "enum" if len({str(v) for v in expected_values}) <= ENUM_LIKE else "string"
    return "value"
