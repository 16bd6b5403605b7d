"""A model's wire JSON written without building its pydantic schema (docs/performance.md, "Start-up
of run").

pydantic builds a model's validator and serializer together, the first time either is needed, and
the first build in a process loads its plugin machinery too (`importlib.metadata` and a scan of
every installed distribution). A trivial `fabric-jev run` writes one envelope and nothing else:
building the schemas cost more than the run did. `plain_dump(model)` writes what
``model.model_dump(mode="json")`` writes, reading the fields pydantic collected when the class was
made: their order, wire keys (the serialization alias), ``exclude``/``exclude_if``, and a wrap model
serializer (`Envelope._shown`) called around them. It knows the kinds of values the contract's
models hold (str, int, bool, finite float, None, a str enum or literal, `UtcTime`, JSON values,
tuples, lists and str-keyed dicts of those, nested models); for anything else (a value of another
type than its field's, a string UTF-8 cannot encode, a field serializer, extra fields) it returns
None and the caller asks pydantic, which then says the same or raises its own error.
tests/test_wire_plain.py holds it to pydantic's output.
"""

from __future__ import annotations

import enum
import inspect
import math
import types
import typing
from collections.abc import Callable
from datetime import datetime
from typing import Any

from annotated_types import BaseMetadata
from pydantic import AfterValidator, AwareDatetime, BaseModel, BeforeValidator, PlainSerializer, WrapValidator
from pydantic.fields import FieldInfo

Encoder = Callable[[Any], Any]
Dump = Callable[[BaseModel], dict[str, Any]]


class _NotPlain(Exception):
    """A value this module does not write as pydantic would: pydantic writes the whole model."""


def plain_dump(model: BaseModel) -> dict[str, object] | None:
    """``model.model_dump(mode="json")`` without a schema, or None when pydantic must write it."""
    dump = _dump_of(type(model))
    if dump is None:
        return None
    try:
        return dump(model)
    except (_NotPlain, RecursionError):
        return None


_DUMPS: dict[type[BaseModel], Dump | None] = {}


def _dump_of(cls: type[BaseModel]) -> Dump | None:
    if cls in _DUMPS:
        return _DUMPS[cls]
    dump = _DUMPS[cls] = _plan(cls)
    return dump


def _plan(cls: type[BaseModel]) -> Dump | None:
    decorators = cls.__pydantic_decorators__
    if decorators.field_serializers or decorators.computed_fields or cls.model_config.get("extra") == "allow":
        return None
    wrap: Callable[[BaseModel, Dump], dict[str, Any]] | None = None
    for decorator in decorators.model_serializers.values():
        func = decorator.func
        if (decorator.info.mode != "wrap" or decorator.info.when_used not in ("always", "json")
                or not inspect.isfunction(func) or len(inspect.signature(func).parameters) != 2):
            return None
        wrap = func
    by_alias = bool(cls.model_config.get("serialize_by_alias"))
    fields: list[tuple[str, str, Callable[[Any], bool] | None, Encoder]] = []
    for name, info in cls.__pydantic_fields__.items():
        if info.exclude is True:
            continue
        if info.exclude is not None:
            return None
        encode = _encoder(info.annotation, tuple(info.metadata))
        if encode is None:
            return None
        key = (info.serialization_alias or name) if by_alias else name
        fields.append((name, key, info.exclude_if, encode))

    def dump(model: BaseModel) -> dict[str, Any]:
        if type(model) is not cls or model.__pydantic_extra__:
            raise _NotPlain
        values = model.__dict__
        out: dict[str, Any] = {}
        for name, key, exclude_if, encode in fields:
            value = values[name]
            if exclude_if is not None and exclude_if(value):
                continue
            out[key] = encode(value)
        return out

    if wrap is None:
        return dump
    around = wrap
    return lambda model: around(model, dump)


def _encoder(annotation: Any, metadata: tuple[Any, ...] = ()) -> Encoder | None:
    """How a field of this annotation is written, or None when only pydantic knows."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _encoder(args[0], metadata + tuple(args[1:]))
    known = _unpacked(metadata)
    if known is None:
        return None
    if any(isinstance(m, PlainSerializer) for m in known):
        return _aware_time(known) if annotation is AwareDatetime else None
    if annotation is Any:
        return _json
    if annotation in (str, int, bool):
        return _exactly(annotation)
    if annotation is float:
        return _float
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return _member_of(annotation)
        if issubclass(annotation, BaseModel):
            return _model(annotation)
        return None
    if origin in (typing.Union, types.UnionType):
        others = [arg for arg in args if arg is not type(None)]
        inner = _encoder(others[0]) if len(others) == 1 and len(args) == 2 else None
        return None if inner is None else _optional(inner)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _encoder(args[0])
        return None if item is None else _sequence(tuple, item)
    if origin is list and len(args) == 1:
        item = _encoder(args[0])
        return None if item is None else _sequence(list, item)
    if origin is dict and len(args) == 2 and args[0] is str:
        item = _encoder(args[1])
        return None if item is None else _mapping(item)
    if origin is typing.Literal and all(type(arg) is str for arg in args):
        return _one_of(frozenset(args))
    return None


def _text(value: str) -> str:
    # pydantic refuses a string that UTF-8 cannot encode (a lone surrogate): so must this.
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _NotPlain from None
    return value


def _exactly(kind: type[Any]) -> Encoder:
    if kind is str:
        def text(value: Any) -> Any:
            if type(value) is not str:
                raise _NotPlain
            return _text(value)
        return text

    def same(value: Any) -> Any:
        if type(value) is not kind:
            raise _NotPlain
        return value
    return same


def _float(value: Any) -> Any:
    if type(value) is not float or not math.isfinite(value):
        raise _NotPlain
    return value


def _unpacked(metadata: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The metadata of an annotation with a nested `Field(...)` opened, or None when some of it may
    change what pydantic writes. Constraints (`annotated_types`: lengths, bounds, pydantic's pattern
    and strictness) and validators act only on what is read; a plain serializer is looked at by the
    caller."""
    found: list[Any] = []
    for item in metadata:
        if isinstance(item, FieldInfo):
            inner = _unpacked(tuple(item.metadata))
            if inner is None:
                return None
            found += inner
        elif isinstance(item, BaseMetadata | AfterValidator | BeforeValidator | WrapValidator | PlainSerializer):
            found.append(item)
        else:
            return None
    return tuple(found)


def _aware_time(metadata: tuple[Any, ...]) -> Encoder | None:
    # `UtcTime` (wire_model): validators, which writing does not run, and one plain serializer of
    # the JSON mode, which writes the text. Read from the metadata, not imported: wire_model
    # imports this module.
    writers = [m for m in metadata if isinstance(m, PlainSerializer)]
    if len(writers) != 1:
        return None
    writer = writers[0]
    if writer.when_used not in ("always", "json") or writer.return_type is not str:
        return None
    write = writer.func
    if not inspect.isfunction(write) or len(inspect.signature(write).parameters) != 1:
        return None

    def time(value: Any) -> Any:
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise _NotPlain
        text = write(value)
        if type(text) is not str:
            raise _NotPlain
        return text
    return time


def _member_of(kind: type[enum.Enum]) -> Encoder:
    def member(value: Any) -> Any:
        if not isinstance(value, kind):
            raise _NotPlain
        return _json(value.value)
    return member


def _one_of(allowed: frozenset[str]) -> Encoder:
    def literal(value: Any) -> Any:
        if type(value) is not str or value not in allowed:
            raise _NotPlain
        return value
    return literal


def _model(kind: type[BaseModel]) -> Encoder:
    def nested(value: Any) -> Any:
        dump = _dump_of(kind)  # looked up on use: a model may hold its own kind (Provenance.answerers)
        if dump is None:
            raise _NotPlain
        return dump(value)
    return nested


def _optional(inner: Encoder) -> Encoder:
    return lambda value: None if value is None else inner(value)


def _sequence(kind: type[Any], item: Encoder) -> Encoder:
    def sequence(value: Any) -> Any:
        if type(value) is not kind:
            raise _NotPlain
        return [item(x) for x in value]
    return sequence


def _mapping(item: Encoder) -> Encoder:
    def mapping(value: Any) -> Any:
        if type(value) is not dict:
            raise _NotPlain
        return {_key(k): item(x) for k, x in value.items()}
    return mapping


def _key(key: Any) -> str:
    if type(key) is not str:
        raise _NotPlain  # pydantic writes other keys as strings of its own making
    return _text(key)


def _json(value: Any) -> Any:
    """A JSON value (a field typed Any), copied as pydantic copies it."""
    kind = type(value)
    if kind is str:
        return _text(value)
    if value is None or kind is int or kind is bool:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise _NotPlain
        return value
    if kind is dict:
        return {_key(k): _json(x) for k, x in value.items()}
    if kind is list or kind is tuple:
        return [_json(x) for x in value]
    raise _NotPlain
