"""The public API as text: every exported name of the public modules, with its signature.

`tests/test_public_api_snapshot.py` compares it with the checked-in
`tests/golden/public_api.txt`. Regenerate (after announcing the change in
CHANGELOG.md, under "Unreleased") with::

    FABRIC_JEV_REGENERATE_API=1 .venv/bin/python -m pytest tests/test_public_api_snapshot.py
"""

from __future__ import annotations

import enum
import importlib
import inspect
import re
from typing import Any

from pydantic import BaseModel

#: The modules whose `__all__` is the public API (docs/architecture.md).
PUBLIC_MODULES = ("fabric_jev", "fabric_jev.protocol", "fabric_jev.testing")
#: Members every class of a kind has: listed once by their base, not by each class.
_BASE_MEMBERS = set(dir(BaseModel)) | set(dir(Exception)) | set(dir(object)) | set(dir(enum.Enum))
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _signature(obj: Any) -> str:
    try:
        text = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"
    return _ADDRESS.sub("", text)


def _members(cls: type) -> list[str]:
    lines = []
    if issubclass(cls, BaseModel):
        for name, info in cls.model_fields.items():
            lines.append(f"    field {name}: {_ADDRESS.sub('', str(info.annotation))}")
    if issubclass(cls, enum.Enum):
        lines += [f"    member {member.name} = {member.value!r}" for member in cls]
    for name in sorted(dir(cls)):
        if name.startswith("_") and name not in ("__init__", "__call__", "__getitem__"):
            continue
        if ((name in _BASE_MEMBERS and name not in ("__init__", "__call__", "__getitem__"))
                or (issubclass(cls, enum.Enum) and name in cls.__members__)):
            continue
        raw = inspect.getattr_static(cls, name)
        if name == "__init__" and (issubclass(cls, BaseModel) or raw is object.__init__ or raw is Exception.__init__):
            continue
        if isinstance(raw, property):
            lines.append(f"    property {name}")
        elif isinstance(raw, staticmethod | classmethod):
            lines.append(f"    {type(raw).__name__} {name}{_signature(getattr(cls, name))}")
        elif callable(raw):
            lines.append(f"    method {name}{_signature(raw)}")
        elif not (issubclass(cls, BaseModel) and name in cls.model_fields):
            lines.append(f"    attribute {name}")
    return lines


def describe(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    lines = []
    for name in sorted(module.__all__):
        obj = getattr(module, name)
        where = f"{module_name}.{name}"
        if inspect.isclass(obj):
            bases = ", ".join(base.__name__ for base in obj.__bases__)
            lines.append(f"class {where}({bases})")
            lines += _members(obj)
        elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
            prefix = "async def" if inspect.iscoroutinefunction(obj) else "def"
            lines.append(f"{prefix} {where}{_signature(obj)}")
        elif inspect.ismodule(obj):
            lines.append(f"module {where}")
        else:
            lines.append(f"{where} = {_ADDRESS.sub('', repr(obj))[:200]}")
    return lines


def snapshot() -> str:
    out: list[str] = []
    for module_name in PUBLIC_MODULES:
        out += describe(module_name)
    return "\n".join(out) + "\n"


def changed_names(old: str, new: str) -> set[str]:
    """The public names (`fabric_jev.X`) whose lines differ between two snapshots."""
    def by_name(text: str) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        current = ""
        for line in text.splitlines():
            if not line.startswith(" "):
                match = re.match(r"^(?:class |async def |def |module )?([\w.]+)", line)
                current = match.group(1) if match else line
            found.setdefault(current, []).append(line)
        return found

    a, b = by_name(old), by_name(new)
    return {name for name in set(a) | set(b) if a.get(name) != b.get(name)}
