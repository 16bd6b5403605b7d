"""The type checker's modes and the languages it reads (HostConfig.typecheck; docs/programs.md).

Per language, a mode: `error` refuses a program with type errors at launch,
`warn` runs it and reports the errors in its envelope, `off` does not check.
"""

from __future__ import annotations

import enum


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
