"""Verification dictionaries (contract §11): a closed, checked-in set of assertions.

Persisted assertions accept only JSON strings — no regular expressions, no
code. Unknown keys anywhere are refused, so a pattern or a script cannot hide
in a dictionary.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from ..contract.program import validate_as
from ..contract.values import is_finite_number
from ..contract.wire_model import WireModel
from ..errors import DictionaryInvalid as DictionaryInvalid

ROLES = ("button", "link", "textbox", "checkbox", "switch", "menuitem", "tab", "option", "separator",
         "combobox", "listbox", "alert", "heading")
UNSAFE_STEPS = frozenset({"__proto__", "constructor", "prototype"})
MAX_PATH = 8
MAX_CHECKS = 32


class _Strict(WireModel):
    # Attributes are snake_case (`test_id`, `timeout_ms`); the dictionary file's keys camelCase.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class TargetSpec(_Strict):
    text: str | None = None
    role: Literal[ROLES] | None = None  # type: ignore[valid-type]
    label: str | None = None
    placeholder: str | None = None
    test_id: str | None = None
    nth: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _needs_a_locator(self) -> TargetSpec:
        if all(v is None for v in (self.text, self.role, self.label, self.placeholder, self.test_id)):
            raise ValueError("a target object needs at least one field besides nth")
        return self


Target = str | TargetSpec


class SeeOptions(_Strict):
    editable: bool | None = None
    value: str | None = None
    text: str | None = None
    timeout_ms: int = Field(default=5_000, ge=1, le=600_000)


class See(_Strict):
    kind: Literal["see"]
    target: Target
    options: SeeOptions = SeeOptions()


class NotSee(_Strict):
    kind: Literal["notSee"]
    target: Target
    timeout_ms: int = Field(default=3_000, ge=1, le=600_000)


class TextContains(_Strict):
    kind: Literal["textContains"]
    text: str = Field(min_length=1)
    timeout_ms: int = Field(default=10_000, ge=1, le=600_000)


class ObservationRef(_Strict):
    id: str = Field(min_length=1, max_length=128)
    version: str = Field(min_length=1, max_length=64)


class ObservePredicate(_Strict):
    kind: Literal["equals", "includes", "length", "atLeast", "atMost"]
    value: Any

    @model_validator(mode="after")
    def _value_fits(self) -> ObservePredicate:
        v = self.value
        if self.kind == "includes" and not isinstance(v, str):
            raise ValueError("includes needs a string value")
        if self.kind == "length" and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ValueError("length needs a non-negative integer")
        if self.kind in ("atLeast", "atMost") and (
                not is_finite_number(v)):
            raise ValueError(f"{self.kind} needs a finite number")
        return self


PathStep = Annotated[str | int, Field()]


class Observe(_Strict):
    kind: Literal["observe"]
    observation: ObservationRef
    path: tuple[PathStep, ...] = Field(default=(), max_length=MAX_PATH)
    predicate: ObservePredicate
    timeout_ms: int = Field(default=10_000, ge=1, le=600_000)

    @field_validator("path", mode="before")
    @classmethod
    def _tuple(cls, v: Any) -> Any:
        return tuple(v) if isinstance(v, list) else v

    @field_validator("path")
    @classmethod
    def _safe(cls, path: tuple[str | int, ...]) -> tuple[str | int, ...]:
        for step in path:
            if isinstance(step, str) and (step in UNSAFE_STEPS or not step):
                raise ValueError(f"unsafe path step {step!r}")
            if isinstance(step, int) and (isinstance(step, bool) or step < 0):
                raise ValueError("array path steps must be non-negative integers")
        return path


Assertion = Annotated[See | NotSee | TextContains | Observe, Field(discriminator="kind")]


class DictionaryCheck(_Strict):
    id: str = Field(min_length=1, max_length=128)
    description: str = Field(min_length=1, max_length=2_000)
    assertion: Assertion


class Dictionary(_Strict):
    id: str = Field(min_length=1, max_length=128)
    version: str = Field(min_length=1, max_length=64)
    checks: tuple[DictionaryCheck, ...] = Field(min_length=1, max_length=MAX_CHECKS)

    @field_validator("checks", mode="before")
    @classmethod
    def _tuple(cls, v: Any) -> Any:
        return tuple(v) if isinstance(v, list) else v

    @field_validator("checks")
    @classmethod
    def _unique(cls, checks: tuple[DictionaryCheck, ...]) -> tuple[DictionaryCheck, ...]:
        ids = [c.id for c in checks]
        if len(set(ids)) != len(ids):
            raise ValueError("check ids must be unique")
        return checks

    def check(self, check_id: str) -> DictionaryCheck:
        return next(c for c in self.checks if c.id == check_id)


def parse_dictionary(raw: Dictionary | Any) -> Dictionary:
    if isinstance(raw, Dictionary):
        return raw
    return validate_as(Dictionary, raw, DictionaryInvalid, "Invalid verification dictionary")
