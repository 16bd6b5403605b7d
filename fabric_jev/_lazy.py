"""Package exports that load on first use: `import fabric_jev` and the CLI's start-up
pay only for the modules a command actually touches."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: `table` maps an exported name to the
    submodule (relative, e.g. ".host") that defines it. A loaded name is stored in
    the package's namespace, so later lookups never reach this function again."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    return __getattr__


def moved_module(old: str, new: str, removed_in: str) -> Callable[[str], Any]:
    """A module `__getattr__` for a module path that moved: each name read through `old` comes
    from `new`, with a DeprecationWarning naming both (on the reader's line). The new module is
    imported by name when a name is read, so the old path adds no dependency of its own."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        import warnings

        value = getattr(importlib.import_module(new), name)
        warnings.warn(f"{old} is deprecated and will be removed in {removed_in}: use {new}.{name}",
                      DeprecationWarning, stacklevel=2)
        return value

    return __getattr__
