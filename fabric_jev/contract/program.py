"""The program artifact (contract §1) and its parsing into typed form."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .._patterns import LazyPattern
from ..errors import JevError, ProgramInvalid
from .json_basics import did_you_mean
from .schema_subset import check_schema
from .wire_model import WireModel, omit_none, validate_json_object

REF_PATTERN = LazyPattern(r"^[a-z][a-z0-9_-]*\.[a-zA-Z0-9_.$-]+$")
MAX_NAME_CHARS = 128
MAX_CODE_CHARS = 65_536
MAX_REFS = 64
#: The only `jev.*` refs a program may declare; the rest are lifecycle calls.
JEV_PROGRAM_REFS = frozenset({"jev.evaluate", "jev.advise"})


def not_granted(ref: str) -> str:
    """The refusal of a call to a ref the program does not hold (contract §1)."""
    return f"Capability not granted to Jev program: {ref}"


class ProgramLimits(WireModel):
    """Per-program limits; each is clamped to the host's ceiling at launch.

    JSON: ``timeoutMs``, ``maxEvaluations``, ``maxToolCalls``, ``maxTokens``.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    timeout_ms: int | None = Field(default=None, ge=1, exclude_if=omit_none)
    max_evaluations: int | None = Field(default=None, ge=0, exclude_if=omit_none)
    max_tool_calls: int | None = Field(default=None, ge=1, exclude_if=omit_none)
    max_tokens: int | None = Field(default=None, ge=1, exclude_if=omit_none)


class Program(WireModel):
    """A judgment program: code, schemas, declared capabilities and limits.

    Attributes are snake_case (`program.input_schema`); the artifact, read by
    `parse_program` and written by `to_json()`, keeps the contract's
    ``inputSchema`` and ``outputSchema``.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    code: str = Field(min_length=1, max_length=MAX_CODE_CHARS,
                      description="Body of an async function: may await jev.evaluate(...) and return a value.")
    input_schema: dict[str, Any] = Field(description="JSON Schema (the supported subset) of `input`.")
    output_schema: dict[str, Any] = Field(description="JSON Schema (the supported subset) of the result.")
    # Refs are checked by `_check_refs`, in the contract's words, before pydantic's own check of the
    # same constraints (which the JSON Schema shows); JSON Schema's uniqueItems has no type to say it.
    requires: tuple[Annotated[str, Field(min_length=3, max_length=256, pattern=REF_PATTERN.pattern)], ...] = Field(
        default=(), max_length=MAX_REFS, json_schema_extra={"uniqueItems": True},
        description="Capabilities the code calls, e.g. jev.evaluate.")
    limits: ProgramLimits | None = Field(default=None, exclude_if=omit_none)
    #: The language the code is written in: a program file's suffix gives it (`.ts` TypeScript,
    #: `.js` JavaScript; `fabric-jev pack` writes it). Without it, the code decides: TypeScript
    #: only when it has TypeScript-only syntax.
    language: Literal["javascript", "typescript"] | None = Field(
        default=None, exclude_if=omit_none,
        description="What the code is written in (a .ts file's is typescript: type-checked strictly). Omitted: "
                    "TypeScript only when the code has TypeScript syntax.")

    @field_validator("requires", mode="before")
    @classmethod
    def _check_refs(cls, value: Any) -> Any:
        return checked_refs(value)


def checked_refs(value: object) -> object:
    """`Program.requires` before pydantic's own check: a list becomes a tuple, and each ref is
    checked in the contract's words (ValueError)."""
    refs = tuple(value) if isinstance(value, list) else value
    if not isinstance(refs, tuple) or not all(isinstance(ref, str) for ref in refs):
        return refs  # not a list of strings: pydantic's own check says so
    seen: set[str] = set()
    for ref in refs:
        if not 3 <= len(ref) <= 256:
            raise ValueError(f"ref {ref[:64]!r} must be 3-256 characters")
        if not REF_PATTERN.fullmatch(ref):
            raise ValueError(
                f"ref {ref!r} must look like 'connector.capability' "
                f"(pattern {REF_PATTERN.pattern})"
            )
        if ref in seen:
            raise ValueError(f"ref {ref!r} is listed twice")
        seen.add(ref)
    return refs



def describe_validation_error(prefix: str, exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """pydantic's errors in one line; with the `model`, an unknown key says which one was likely
    meant (`limits.timeout: Extra inputs are not permitted (did you mean timeoutMs?)`)."""
    parts = []
    for err in exc.errors(include_url=False)[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "(root)"
        message = err["msg"]
        if err["type"] == "extra_forbidden" and model is not None and err["loc"]:
            guess = did_you_mean(str(err["loc"][-1]), _keys_at(model, err["loc"][:-1]))
            if guess is not None:
                message += f" (did you mean {guess}?)"
        parts.append(f"{where}: {message}")
    more = exc.error_count() - len(parts)
    if more > 0:
        parts.append(f"and {more} more")
    return f"{prefix}: " + "; ".join(parts)


def _keys_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The JSON keys of the object at `loc` inside `model` (empty when it is not a model)."""
    import typing

    current: Any = model
    for step in loc:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        fields = {info.alias or name: info for name, info in current.model_fields.items()}
        info = fields.get(str(step))
        if info is None:
            return []
        candidates = [a for a in (typing.get_args(info.annotation) or (info.annotation,)) if a is not type(None)]
        current = candidates[0] if len(candidates) == 1 else None
    if not (isinstance(current, type) and issubclass(current, BaseModel)):
        return []
    return [info.alias or name for name, info in current.model_fields.items()]


ModelT = TypeVar("ModelT", bound=BaseModel)


def validate_as(model: type[ModelT], raw: object, error: type[JevError], what: str) -> ModelT:
    """Validate a JSON object as `model`, rephrasing pydantic's errors as `error("<what>: …")`.

    Keys are the contract's (camelCase): JSON never sets a field by its Python name.
    """
    if not isinstance(raw, dict):
        raise error(f"{what}: expected a JSON object")
    try:
        return validate_json_object(model, raw)
    except ValidationError as exc:
        raise error(describe_validation_error(what, exc, model)) from None


def parse_program(data: Program | Any) -> Program:
    """Validate a program (a `Program` or its JSON form) and both its schemas.

    Raises `ProgramInvalid` for the artifact and `SchemaInvalid` for a schema
    outside the supported subset.
    """
    if isinstance(data, Program):
        program = data
    else:
        program = plain_program(data) or validate_as(Program, data, ProgramInvalid, "Invalid Jev program")
    check_schema(program.input_schema, "inputSchema")
    check_schema(program.output_schema, "outputSchema")
    return program


# ---------------------------------------------------------------- without a schema

#: JSON key → field, for the artifact and its limits.
_PROGRAM_FIELDS = {"name": "name", "code": "code", "inputSchema": "input_schema", "outputSchema": "output_schema",
                   "requires": "requires", "limits": "limits", "language": "language"}
_LIMIT_FIELDS = {"timeoutMs": ("timeout_ms", 1), "maxEvaluations": ("max_evaluations", 0),
                 "maxToolCalls": ("max_tool_calls", 1), "maxTokens": ("max_tokens", 1)}
_LANGUAGES = ("javascript", "typescript")


def plain_program(raw: object) -> Program | None:
    """The `Program` pydantic would make of a well-formed artifact, made without building its
    schema; None for anything else, which `validate_as` then accepts or refuses in its own words.

    A command runs one program: validating it through pydantic would first build the validators of
    `Program` and `ProgramLimits` (docs/performance.md, "Start-up of run"). This accepts only what
    pydantic accepts, and makes what it makes: the JSON keys and nothing else, exact types (strict,
    as `Program` is), strings UTF-8 can encode, the lengths and bounds the fields declare, the refs
    `checked_refs` accepts; the schemas are copied, as pydantic copies a dict.
    tests/test_contract_program.py holds it to pydantic's verdict."""
    if type(raw) is not dict or not raw.keys() <= _PROGRAM_FIELDS.keys():
        return None
    name, code = raw.get("name"), raw.get("code")
    if not (_text(name, 1, MAX_NAME_CHARS) and _text(code, 1, MAX_CODE_CHARS)):
        return None
    schemas = raw.get("inputSchema"), raw.get("outputSchema")
    if not all(type(schema) is dict and all(_text(key, 0, None) for key in schema) for schema in schemas):
        return None
    values: dict[str, Any] = {"name": name, "code": code,
                              "input_schema": dict(schemas[0]), "output_schema": dict(schemas[1])}  # type: ignore[arg-type]
    if "requires" in raw:
        refs = raw["requires"]
        if type(refs) not in (list, tuple) or len(refs) > MAX_REFS or not all(type(ref) is str for ref in refs):
            return None
        try:
            values["requires"] = checked_refs(refs)
        except ValueError:
            return None
    if "limits" in raw:
        limits = _plain_limits(raw["limits"])
        if limits is False:
            return None
        values["limits"] = limits
    if "language" in raw:
        language = raw["language"]
        if language is not None and (type(language) is not str or language not in _LANGUAGES):
            return None
        values["language"] = language
    return Program.model_construct({_PROGRAM_FIELDS[key] for key in raw}, **values)


def _plain_limits(raw: Any) -> ProgramLimits | bool | None:
    """`ProgramLimits` of a well-formed `limits` (None for null), or False."""
    if raw is None:
        return None
    if type(raw) is not dict or not raw.keys() <= _LIMIT_FIELDS.keys():
        return False
    values = {}
    for key, value in raw.items():
        field, lowest = _LIMIT_FIELDS[key]
        if value is not None and (type(value) is not int or value < lowest):
            return False
        values[field] = value
    return ProgramLimits.model_construct(set(values), **values)


def _text(value: Any, shortest: int, longest: int | None) -> bool:
    """A str of that many characters that UTF-8 can encode (pydantic refuses a lone surrogate)."""
    if type(value) is not str or len(value) < shortest or (longest is not None and len(value) > longest):
        return False
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True
