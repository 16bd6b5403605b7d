"""Contract models: snake_case attributes in Python, the contract's camelCase on the wire.

A `WireModel` field `started_at` reads and writes the JSON key `startedAt`
(pydantic's `to_camel` alias generator). Python code constructs a model by
either name; every serialization (`model_dump`, `model_dump_json`, `to_json`)
writes the alias, so the JSON is the contract's byte for byte. `to_json` is the
one serializer of every wire shape: the keys in field order, and a key the
wire leaves out when it has nothing to say is a field declared with
``Field(exclude_if=...)`` (``omit_none`` for the usual test). JSON read from
outside (a program artifact, a config file, a dictionary) is validated by its
contract names only (`validate_json_object`): a snake_case key there is an
unknown key, as it always was.

Timestamps are `UtcTime`: a timezone-aware `datetime` in UTC, kept to the
millisecond, written as ISO 8601 with milliseconds and `Z`
(``2025-01-31T09:30:00.123Z``), the contract's one timestamp format.

Models whose JSON is snake_case already (`Usage`: ``input_tokens``) do not
derive from `WireModel`.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, PlainSerializer, TypeAdapter
from pydantic.alias_generators import to_camel


def wire_time(at: datetime) -> str:
    """A timestamp as the contract writes it: ISO 8601, UTC, milliseconds, `Z`."""
    if at.tzinfo is not UTC:
        at = at.astimezone(UTC)
    # Every event of every envelope passes here: cutting "+00:00" is cheaper than a replace.
    return at.isoformat(timespec="milliseconds")[:-6] + "Z"


def utc_time(seconds: float) -> datetime:
    """A `time.time()` reading as the contract keeps it: UTC, to the millisecond (floored)."""
    # Floored before the datetime is made: one object per event, not two.
    return datetime.fromtimestamp(math.floor(seconds * 1000) / 1000, UTC)


def utc_now() -> datetime:
    return _to_millisecond(datetime.now(UTC))


def _to_millisecond(at: datetime) -> datetime:
    # The wire shows milliseconds; keeping no more makes a model read back from its
    # own JSON equal to the model that wrote it.
    return at.replace(microsecond=at.microsecond - at.microsecond % 1000)


def _utc(at: datetime) -> datetime:
    return _to_millisecond(at.astimezone(UTC))


#: A timezone-aware UTC `datetime` (a naive one is refused); JSON: ``2025-01-31T09:30:00.123Z``.
UtcTime = Annotated[AwareDatetime, AfterValidator(_utc),
                    PlainSerializer(wire_time, return_type=str, when_used="json")]


#: The one wire configuration of both bases: camelCase keys (`to_camel`), both names construct, every
#: serialization writes the alias. The fifth is for the JSON Schema of what a shape writes (MCP
#: output schemas): a field is required there unless it may be left out (`exclude_if`), default or
#: not, as `to_json` does. Schemas are built on first use, not with the class: a trivial run
#: validates or serializes none of them (docs/performance.md, "Start-up of run").
WIRE_CONFIG = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True,
                         serialize_by_alias=True, json_schema_serialization_defaults_required=True,
                         defer_build=True)


class WireShape:
    """The root of every shape with a wire form (`WireModel`, `WireData`): its one serializer."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """The JSON object the wire shows (see the module doc)."""
        return wire_json(self)


def wire_json(shape: WireShape, *, exclude: set[str] | None = None, warnings: bool = True) -> dict[str, Any]:
    """The one serializer of the wire shapes: the JSON object pydantic's JSON mode writes, keys in
    field order, `exclude` (field names) left out. A model not built yet is written without building
    it when `wire_plain` knows every value; everything else is pydantic's (with `warnings` False, a
    value of another type than its field's is written as it is, without a warning)."""
    if isinstance(shape, BaseModel):
        if exclude is None and warnings and not type(shape).__pydantic_complete__:
            from .wire_plain import plain_dump

            plain = plain_dump(shape)
            if plain is not None:
                return plain
        dumped: dict[str, Any] = shape.model_dump(mode="json", exclude=exclude, warnings=warnings)
        return dumped
    result: dict[str, Any] = wire_adapter(type(shape)).dump_python(shape, mode="json", exclude=exclude,
                                                                    warnings=warnings)
    return result


class WireModel(WireShape, BaseModel):
    """Base of the contract models whose JSON keys are camelCase (see the module doc): validated
    when made, by keyword."""

    model_config = WIRE_CONFIG

    if not TYPE_CHECKING:  # type checkers know only the snake_case names, as they should
        def __getattr__(self, name: str) -> Any:
            # Deprecated since 0.2.0, removed in 0.3.0 (CHANGELOG.md): the camelCase attributes of
            # 0.1.0 (`envelope.startedAt`, `program.inputSchema`) still read, with a warning naming
            # the snake_case one. Timestamps read as the strings they were then.
            field = _camel_fields(type(self)).get(name)
            if field is None:
                return super().__getattr__(name)
            import warnings

            warnings.warn(f"{type(self).__name__}.{name} is deprecated and will be removed in 0.3.0: "
                          f"use .{field}", DeprecationWarning, stacklevel=2)
            value = getattr(self, field)
            return wire_time(value) if isinstance(value, datetime) else value


class ReadAsDict:
    """Mixin of a model that 0.1.0 gave as a JSON dict (an envelope's `typecheck`, `evaluator`,
    `observation`, `approvals` entries): reading it by key still works until 0.3.0, with a
    DeprecationWarning naming the attribute."""

    __slots__ = ()

    if not TYPE_CHECKING:  # type checkers should see the attributes only
        def __getitem__(self, key: str) -> Any:
            import warnings

            from pydantic.alias_generators import to_snake

            what = type(self).__name__
            warnings.warn(f"{what}[{key!r}] is deprecated and will be removed in 0.3.0: {what} is typed now; "
                          f"read .{to_snake(key)}, or to_json()[{key!r}] for the JSON", DeprecationWarning,
                          stacklevel=2)
            return self.to_json()[key]


class WireData(WireShape):
    """Base of a frozen dataclass with a wire shape: the same configuration and serializer as a
    `WireModel` (camelCase aliases, `Field(exclude_if=...)` in an ``Annotated`` field), constructed
    by position and not validated when it is made. For the public records constructed by position
    since 0.1.0 (`Evaluation`, `HostStatus`), which a `BaseModel` (keywords only) would break."""

    __slots__ = ()
    __pydantic_config__: ClassVar[ConfigDict] = WIRE_CONFIG


def wire_adapter(shape: type[Any]) -> TypeAdapter[Any]:
    """The one adapter per shape (building one costs a schema)."""
    adapter = _ADAPTERS.get(shape)
    if adapter is None:
        adapter = _ADAPTERS[shape] = TypeAdapter(shape)
    return adapter


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def omit_none(value: object) -> bool:
    """`Field(exclude_if=omit_none)`: a key the wire leaves out while it is None."""
    return value is None


def omit_empty(value: object) -> bool:
    """`Field(exclude_if=omit_empty)`: a key the wire leaves out while it is empty or false."""
    return not value


def _camel_fields(model: type[BaseModel]) -> dict[str, str]:
    """A model's camelCase aliases that differ from their field's name: alias → field."""
    found = _CAMEL_FIELDS.get(model)
    if found is None:
        found = _CAMEL_FIELDS[model] = {info.alias: name for name, info in model.model_fields.items()
                                        if info.alias is not None and info.alias != name}
    return found


_CAMEL_FIELDS: dict[type[BaseModel], dict[str, str]] = {}


ModelT = TypeVar("ModelT", bound=BaseModel)


def validate_json_object(model: type[ModelT], raw: object) -> ModelT:
    """Validate JSON from outside by the contract's key names only (raises pydantic's ValidationError)."""
    return model.model_validate(raw, by_alias=True, by_name=False)
