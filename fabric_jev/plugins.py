"""Connector plugins: found through the `fabric_jev.connectors` entry-point group.

A connector package declares, in its pyproject.toml::

    [project.entry-points."fabric_jev.connectors"]
    browser = "fabric_jev_browser.plugin:PLUGIN"

where `PLUGIN` is a `ConnectorPlugin`. The core and its CLI never import a
connector by name: `JevHost` builds the connectors named in
`HostConfig.connectors` from here, the CLI adds each plugin's subcommands, and
features such as `verify run` ask for a plugin *hook* by name.

Entry points are read from the installed distributions' `entry_points.txt`
with a directory scan rather than `importlib.metadata`, whose import alone costs
more than the interpreter's start-up and would be paid by every `--help`.
"""

from __future__ import annotations

import configparser
import importlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from .errors import ConfigError

GROUP = "fabric_jev.connectors"
#: How to get the connectors this project publishes (named in "not installed" errors).
#: fabric-jev-browser is on no package index: it installs from the wheelhouse scripts/wheelhouse builds.
KNOWN = {"browser": "pip install --find-links DIR 'fabric-jev[browser]', DIR being the wheelhouse that "
                    "./scripts/wheelhouse DIR builds in a fabric-jev checkout (in the checkout's own venv: "
                    "pip install -e connectors/browser)"}


@dataclass(frozen=True, slots=True)
class ConnectorPlugin:
    """What a connector package offers the host and the CLI.

    `connector(settings)` builds the connector (see `fabric_jev.protocol.Connector`)
    from its `HostConfig.connectors[name]` section. `add_commands(subparsers)`
    adds its `fabric-jev` subcommands; it must stay cheap (import inside handlers).
    `hooks` are named extras core features look up, e.g. "verification_channels"
    (`verify run`) and "bench" (`fabric-jev bench browser`).
    """

    name: str
    connector: Callable[[Mapping[str, Any]], Any]
    add_commands: Callable[[Any], None] | None = None
    hooks: Mapping[str, Callable[..., Any]] = field(default_factory=dict)


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


def build_connector(name: str, settings: Mapping[str, Any]) -> Any:
    """The connector `name` configured with `settings` (a `HostConfig.connectors` section)."""
    return load_plugin(name).connector(settings)


def find_hook(hook: str, *, wanted: str = "browser") -> Callable[..., Any]:
    """The first installed plugin's `hook`; ConfigError naming how to install `wanted` if none has it."""
    for name in sorted(declared_connectors()):
        found = load_plugin(name).hooks.get(hook)
        if found is not None:
            return found
    load_plugin(wanted)  # raises "not installed" with the install command
    raise ConfigError(f"the {wanted} connector does not provide {hook}")
