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
