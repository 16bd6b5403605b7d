"""What connector plugins add to the command line (see fabric_jev.plugins); placeholders for missing ones."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeAlias

from .common import add_command, fail

if TYPE_CHECKING:
    from ..plugins import BenchSuite

SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _placeholder(sub: SubParsers, name: str, connector: str, problem: str) -> None:
    async def explain(args: argparse.Namespace) -> int:
        return fail(problem)

    cmd = add_command(sub, name, help=f"(not available: the {connector} connector is missing or broken)",
                      description=problem, codes=("2 always: the connector is not available",))
    cmd.add_argument("args", nargs=argparse.REMAINDER, help="ignored")
    cmd.set_defaults(handler=explain)


def add_plugin_commands(sub: SubParsers, *, groups: Mapping[str, SubParsers],
                        bench_suites: dict[str, BenchSuite]) -> None:
    """Each installed plugin's commands (top-level, in a core group such as `verify`, and bench
    suites); the commands of a known connector that is missing or broken say how to get it."""
    from ..errors import ConfigError
    from ..plugins import KNOWN, KNOWN_COMMANDS, Commands, declared_connectors, load_plugin

    commands = Commands(sub, groups, bench_suites)
    names = sorted(set(declared_connectors()) | set(KNOWN))
    for name in names:
        try:
            plugin = load_plugin(name)
        except ConfigError as exc:
            for path in KNOWN_COMMANDS.get(name, ((name,),)):
                *group, command = path
                _placeholder(groups[group[0]] if group else sub, command, name, str(exc))
            continue
        if plugin.add_commands is not None:
            plugin.add_commands(commands)
