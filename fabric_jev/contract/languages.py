"""The type checker's modes and the languages it reads (HostConfig.typecheck; docs/programs.md).

Per language, a mode: `error` refuses a program with type errors at launch,
`warn` runs it and reports the errors in its envelope, `off` does not check.
"""

from __future__ import annotations

import enum

from pydantic import ConfigDict, Field

from .wire_model import ReadAsDict, WireModel, omit_none


class CheckMode(enum.StrEnum):
    """What a type error does to a launch."""

    #: The launch is refused (TypeScriptError) and lists the errors.
    ERROR = "error"
    #: The program runs; its envelope lists the errors.
    WARN = "warn"
    #: Not checked at all.
    OFF = "off"


class Language(enum.StrEnum):
    """How the sandbox reads a program: JavaScript, or TypeScript whose annotations it erases."""

    JAVASCRIPT = "javascript"
    TYPESCRIPT = "typescript"


class TypeCheckOutcome(enum.StrEnum):
    """What a launch's type check came to (the envelope's `typecheck.outcome`)."""

    #: No type errors.
    CLEAN = "clean"
    #: Type errors, reported and not refused (mode warn).
    ERRORS = "errors"
    #: The language's mode is off: not checked.
    OFF = "off"
    #: No compiler is installed: the program runs unchecked.
    UNAVAILABLE = "unavailable"
    #: The compiler hit a cap or failed (mode warn): the program runs unchecked.
    STOPPED = "stopped"


class CheckerStatus(ReadAsDict, WireModel):
    """The type checker as the host's status shows it: the modes, and the compiler or why there is
    none."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    typescript: CheckMode
    javascript: CheckMode
    available: bool
    compiler: str | None = Field(default=None, exclude_if=omit_none)
    #: Why there is no compiler.
    reason: str | None = Field(default=None, exclude_if=omit_none)
