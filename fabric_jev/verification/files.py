"""A dictionary and a plan read from files (or given as values), checked against each other.

The one reader behind `fabric-jev verify run` (the browser connector's command)
and `fabric_jev.testing`'s plans as tests: files are read bounded (size and
depth) and any problem is a `PlanInvalid` or `DictionaryInvalid` in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import PlanInvalid
from .compile import Plan
from .dictionary import Dictionary, parse_dictionary
from .replay import check_plan_fits, parse_plan

#: A dictionary or a plan file larger than this is refused before it is read.
MAX_FILE_BYTES = 8 << 20


def _load(source: str | Path | Mapping[str, Any], what: str) -> Any:
    if isinstance(source, Mapping):
        return dict(source)
    from .._json import JSONInputError, read_json_file

    try:
        return read_json_file(source, what=what, max_bytes=MAX_FILE_BYTES)
    except JSONInputError as exc:
        raise PlanInvalid(str(exc)) from None


def load_plan(plan: str | Path | Mapping[str, object] | Plan,
              dictionary: str | Path | Mapping[str, object] | Dictionary) -> tuple[Dictionary, Plan]:
    """The dictionary and the plan (a plan, or the whole `verify compile` output), checked
    against each other: same digest, known ids. The dictionary is read first."""
    parsed = dictionary if isinstance(dictionary, Dictionary) else parse_dictionary(_load(dictionary, "dictionary"))
    raw: Any = plan if isinstance(plan, Plan) else _load(plan, "plan")
    if isinstance(raw, dict) and "plan" in raw and "status" in raw:
        if raw["status"] != "ready" or not isinstance(raw["plan"], dict):
            raise PlanInvalid(f"the compile result is {raw['status']!r}, not ready "
                              f"({raw.get('reason') or 'no plan'}); there is no plan to run")
        raw = raw["plan"]
    checked = parse_plan(raw)
    check_plan_fits(checked, parsed)
    return parsed, checked


__all__ = ["MAX_FILE_BYTES", "load_plan"]
