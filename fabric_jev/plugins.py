"""Connector plugins: found through the `fabric_jev.connectors` entry-point group.

A connector package declares, in its pyproject.toml::

    [project.entry-points."fabric_jev.connectors"]
    browser = "fabric_jev_browser.plugin:PLUGIN"

where `PLUGIN` is a `ConnectorPlugin`. The core and its CLI never import a
connector by name: `JevHost` builds the connectors named in
`HostConfig.connectors` from here, and the CLI hands each plugin a `Commands`
to add its subcommands to (`fabric-jev browser launch`, `fabric-jev verify run`
and `fabric-jev bench browser` are the browser's). Every field of a plugin is
typed: the core calls nothing of a plugin it cannot type-check. Features that
need a page ship with the browser distribution itself (its commands, its pytest
fixtures), as pytest-playwright ships its fixtures with the package that owns
the browser.

Entry points are read from the installed distributions' `entry_points.txt`
with a directory scan rather than `importlib.metadata`, whose import alone costs
more than the interpreter's start-up and would be paid by every `--help`.
"""

from __future__ import annotations

import configparser
import importlib
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from .errors import ConfigError

if TYPE_CHECKING:
    import argparse

    from .capabilities import Connector
    from .contract.values import JsonValue

GROUP = "fabric_jev.connectors"
#: How to get the connectors this project publishes (named in "not installed" errors).
#: fabric-jev-browser is on no package index: it installs from the wheelhouse scripts/wheelhouse builds.
KNOWN = {"browser": "pip install --find-links DIR 'fabric-jev[browser]', DIR being the wheelhouse that "
                    "./scripts/wheelhouse DIR builds in a fabric-jev checkout (in the checkout's own venv: "
                    "pip install -e connectors/browser)"}
#: The commands (paths under `fabric-jev`) and `fabric-jev bench` suites each of those connectors
#: adds: without it, each still exists and says how to get it.
KNOWN_COMMANDS: dict[str, tuple[tuple[str, ...], ...]] = {"browser": (("browser",), ("verify", "run"))}
KNOWN_BENCH_SUITES: dict[str, tuple[str, ...]] = {"browser": ("browser",)}

#: Builds a connector (`fabric_jev.protocol.Connector`) from its `HostConfig.connectors` section.
ConnectorFactory: TypeAlias = Callable[[Mapping[str, Any]], "Connector"]
#: What a command's `handler` (set with `parser.set_defaults(handler=...)`) is: its exit code.
CommandHandler: TypeAlias = Callable[["argparse.Namespace"], Awaitable[int]]


class PageSession(Protocol):
    """A page the core's own tools drive (`fabric-jev bench eval` opens its report in one)."""

    async def navigate(self, url: str) -> None:
        """Go to `url` and wait for its load event."""
        ...

    async def evaluate(self, expression: str) -> JsonValue:
        """The value of a JavaScript expression in the page, as JSON."""
        ...


#: Opens a fresh page in a browser of the plugin's own, closed (browser and all) on exit.
PageOpener: TypeAlias = Callable[[], AbstractAsyncContextManager[PageSession]]


@dataclass(frozen=True, slots=True)
class BenchSuite:
    """A `fabric-jev bench NAME` suite a plugin adds: `run(samples)` measures and returns the
    report (JSON-able; `--json` prints it), `show(report)` prints it for a person."""

    name: str
    run: Callable[[int], Awaitable[dict[str, Any]]]
    show: Callable[[dict[str, Any]], None]


class Commands:
    """Where a plugin's `add_commands` adds what it brings to the `fabric-jev` command line.

    `add_parser(name, ...)` adds `fabric-jev NAME`; with `group="verify"`, `fabric-jev verify
    NAME`. Each gives back the command's parser: add its arguments, and its `handler` (a
    `CommandHandler`) with `set_defaults`. `add_bench_suite` adds a `fabric-jev bench` suite.
    Adding must stay cheap (`fabric-jev --help` adds every plugin's commands): import what a
    command needs inside its handler.
    """

    def __init__(self, top: argparse._SubParsersAction[argparse.ArgumentParser],
                 groups: Mapping[str, argparse._SubParsersAction[argparse.ArgumentParser]],
                 bench_suites: dict[str, BenchSuite]) -> None:
        self._top = top
        self._groups = groups
        self._bench_suites = bench_suites

    def add_parser(self, name: str, *, help: str, description: str, epilog: str,
                   group: str | None = None) -> argparse.ArgumentParser:
        """A command; `epilog` lists its exit codes ("exit codes:\n  0 done\n  2 ...")."""
        where = self._top
        if group is not None:
            found = self._groups.get(group)
            if found is None:
                raise ValueError(f"no command group {group!r} takes plugin commands "
                                 f"(these do: {', '.join(sorted(self._groups))})")
            where = found
        parser: argparse.ArgumentParser = where.add_parser(name, help=help, description=description, epilog=epilog)
        return parser

    def add_bench_suite(self, suite: BenchSuite) -> None:
        self._bench_suites[suite.name] = suite


@dataclass(frozen=True, slots=True)
class ConnectorPlugin:
    """What a connector package offers the host and the CLI.

    `connector(settings)` builds the connector (see `fabric_jev.protocol.Connector`)
    from its `HostConfig.connectors[name]` section. `add_commands(commands)` adds its
    `fabric-jev` commands and bench suites (`Commands`); it must stay cheap (import
    inside handlers). `open_page` opens a page in a browser of the plugin's own, for
    the core's tools that look at a page of theirs (`fabric-jev bench eval`).
    """

    name: str
    connector: ConnectorFactory
    add_commands: Callable[[Commands], None] | None = None
    open_page: PageOpener | None = None


def _declared(group: str) -> dict[str, str]:
    """name → "module:attr" for every entry point of `group`, first on sys.path winning."""
    found: dict[str, str] = {}
    seen: set[str] = set()
    for folder in sys.path:
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        for name in names:
            if not name.endswith(".dist-info"):
                continue
            dist = name.removesuffix(".dist-info").partition("-")[0].lower().replace("-", "_")
            if dist in seen:
                continue
            seen.add(dist)
            try:
                with open(os.path.join(folder or ".", name, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
            parser.optionxform = str  # type: ignore[assignment,method-assign]  # names keep their case
            try:
                parser.read_string(text)
            except configparser.Error:
                continue
            if parser.has_section(group):
                for key, value in parser.items(group):
                    found.setdefault(key, value.strip())
    return found


def declared_connectors() -> dict[str, str]:
    """The installed connector plugins, by name, without importing any of them."""
    return _declared(GROUP)


@cache
def load_plugin(name: str) -> ConnectorPlugin:
    """Import one plugin; a missing or broken one raises ConfigError with one line saying why."""
    target = declared_connectors().get(name)
    if target is None:
        hint = KNOWN.get(name)
        if hint:
            raise ConfigError(f"the {name} connector is not installed; install it with: {hint}")
        known = ", ".join(sorted(declared_connectors())) or "none installed"
        raise ConfigError(f"unknown connector {name!r} (installed: {known})")
    module_name, _, attr = target.partition(":")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split(".") if attr else ():
            value = getattr(value, part)
    except Exception as exc:  # a broken plugin must not take the host down with a traceback
        raise ConfigError(f"the {name} connector plugin ({target}) failed to load: "
                          f"{type(exc).__name__}: {exc}") from None
    if not isinstance(value, ConnectorPlugin):
        raise ConfigError(f"the {name} connector plugin ({target}) is not a ConnectorPlugin")
    return value


def build_connector(name: str, settings: Mapping[str, Any]) -> Connector:
    """The connector `name` configured with `settings` (a `HostConfig.connectors` section)."""
    return load_plugin(name).connector(settings)


def page_opener(name: str = "browser") -> PageOpener:
    """The page opener of the connector `name`; ConfigError saying how to install it, or that it
    opens no pages."""
    opener = load_plugin(name).open_page
    if opener is None:
        raise ConfigError(f"the {name} connector does not open pages")
    return opener


__all__ = ["GROUP", "KNOWN", "KNOWN_BENCH_SUITES", "KNOWN_COMMANDS", "BenchSuite", "CommandHandler", "Commands",
           "ConnectorFactory", "ConnectorPlugin", "PageOpener", "PageSession", "build_connector",
           "declared_connectors", "load_plugin", "page_opener"]
