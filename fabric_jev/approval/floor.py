"""The conservative floor: destructive or exfiltrating shapes never allowed without a person.

The catalogue is data (`floor.json`, beside this module): each entry names one
of the checks (`floor_checks` for destructive shapes, `floor_closed` for what
the floor cannot read) and its parameters, and carries examples that the tests
run. The checks read parsed commands wherever the call holds them
(`floor_reading`) and normalised paths (`places`), never a regex over the raw
string. A call that hits an entry asks a person, whatever the classifier, the
risk's policy or a broad allow rule says; where no one can be asked it is
refused. Only an allow rule that names the entry (``"lifts": [id]``) and
matches the call lifts it. Pure code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from . import floor_checks as _checks
from . import floor_closed as _closed
from . import floor_databases as _databases
from . import floor_git as _git
from . import floor_sync as _sync
from .call_view import PATH_KEYS, SQL_KEYS, URL_KEYS, CallView
from .floor_reading import WRITE_PATH_KEYS, FloorParams, catalogue, ref_words, scripts, strings_under


@dataclass(frozen=True, slots=True)
class FloorEntry:
    id: str
    what: str
    check: str
    params: FloorParams
    examples: Mapping[str, Sequence[Any]]

    def hits(self, view: CallView) -> bool:
        return _CHECKS[self.check](view, self.params)


@lru_cache(maxsize=1)
def floor_entries() -> tuple[FloorEntry, ...]:
    """The catalogue, read once from floor.json."""
    out = []
    for raw in catalogue()["entries"]:
        if raw["check"] not in _CHECKS:
            raise ValueError(f"floor entry {raw['id']} names an unknown check {raw['check']!r}")
        out.append(FloorEntry(raw["id"], raw["what"], raw["check"], raw.get("params", {}), raw.get("examples", {})))
    return tuple(out)


def floor_ids() -> frozenset[str]:
    return frozenset(e.id for e in floor_entries())


def floor_hits(view: CallView) -> list[FloorEntry]:
    """The entries this call hits (none for a call without commands, paths, URLs or SQL)."""
    if not _has_facets(view):
        return []
    return [entry for entry in floor_entries() if entry.hits(view)]


def _has_facets(view: CallView) -> bool:
    return bool(scripts(view) or view.values(PATH_KEYS) or view.values(SQL_KEYS) or view.values(URL_KEYS)
                or (view.risk == "write" and strings_under(view, WRITE_PATH_KEYS))
                or _databases.has_database_sql(view) or _interpreters() & ref_words(view.ref))


@lru_cache(maxsize=1)
def _interpreters() -> frozenset[str]:
    """The ref words of an interpreter's capability (the inline-code entry's `capabilities`)."""
    return frozenset(word for raw in catalogue()["entries"] for word in raw.get("params", {}).get("capabilities", ()))


_CHECKS: dict[str, Callable[[CallView, FloorParams], bool]] = {
    "operands-outside-tree": _checks.operands_outside_tree,
    "find-outside-tree": _checks.find_outside_tree,
    "device-write": _checks.device_write,
    "programs": _checks.programs,
    "download-and-run": _checks.download_and_run,
    "git": _git.force_push,
    "git-discard": _git.discard,
    "sync-deletes": _sync.sync_deletes,
    "sql": _checks.sql,
    "paths": _checks.paths,
    "secrets-to-network": _checks.secrets_to_network,
    "system-writes": _checks.system_writes,
    "write-outside-tree": _checks.write_outside_tree,
    "hidden-program": _checks.hidden_program,
    "kill-or-power": _checks.kill_or_power,
    "inline-code": _closed.inline_code,
    "program-from-input": _closed.program_from_input,
    "redefinitions": _closed.redefinitions,
    "input-operands": _closed.input_operands,
    "container-host": _closed.container_host,
    "unreadable": _closed.unreadable,
    "database-client-commands": lambda view, params: _databases.client_commands(
        view, params, lambda inner: bool(floor_hits(inner))),
    "database-tools": _databases.database_tools,
}
