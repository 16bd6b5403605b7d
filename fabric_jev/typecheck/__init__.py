"""Type-checking programs against their own contract with tsgo (docs/programs.md, "TypeScript").

`declarations.render` writes the guest API for one program; `checker.check`
asks the compiler for a verdict; `checker.check_for_launch` is what the host
calls before a program gets a worker. Names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .checker import CheckerUnavailable, check, check_for_launch
    from .compiler import CompilerStopped, locate
    from .declarations import render
    from .diagnostics import Diagnostic
    from .verdict import CheckReport, CompilerVerdict

_LAZY = {
    **dict.fromkeys(("CheckerUnavailable", "check", "check_for_launch"), ".checker"),
    **dict.fromkeys(("CompilerStopped", "locate"), ".compiler"),
    "render": ".declarations",
    "Diagnostic": ".diagnostics",
    **dict.fromkeys(("CheckReport", "CompilerVerdict"), ".verdict"),
}

__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "CheckReport",
    "CheckerUnavailable",
    "CompilerStopped",
    "CompilerVerdict",
    "Diagnostic",
    "check",
    "check_for_launch",
    "locate",
    "render",
]
