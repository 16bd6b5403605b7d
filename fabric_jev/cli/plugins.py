"""Subcommands that connector plugins add (see fabric_jev.plugins); placeholders for missing ones."""

from __future__ import annotations

import argparse

from .common import add_command, fail


def _placeholder(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, problem: str) -> None:
    async def explain(args: argparse.Namespace) -> int:
        return fail(problem)

    cmd = add_command(sub, name, help=f"(not available: the {name} connector is missing or broken)",
                      description=problem, codes=("2 always: the connector is not available",))
    cmd.add_argument("args", nargs=argparse.REMAINDER, help="ignored")
    cmd.set_defaults(handler=explain)


def add_plugin_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ..errors import ConfigError
    from ..plugins import KNOWN, declared_connectors, load_plugin

    names = sorted(set(declared_connectors()) | set(KNOWN))
    for name in names:
        try:
            plugin = load_plugin(name)
        except ConfigError as exc:
            _placeholder(sub, name, str(exc))
            continue
        if plugin.add_commands is not None:
            plugin.add_commands(sub)
