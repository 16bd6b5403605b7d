"""Connectors are plugins: the core never imports one; entry points bring them and their commands."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_jev import ConfigError, HostConfig, JevHost
from fabric_jev.plugins import KNOWN, declared_connectors
from tests.cli_support import ROOT, cli
from tests.conftest import program

CORE = ROOT / "fabric_jev"


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_the_core_imports_nothing_from_the_browser_connector() -> None:
    offenders = [str(p.relative_to(ROOT)) for p in sorted(CORE.rglob("*.py"))
                 if any(m.split(".")[0] == "fabric_jev_browser" for m in _imported_modules(p))]
    assert offenders == []


def test_import_fabric_jev_loads_no_heavy_module() -> None:
    code = ("import sys, fabric_jev; heavy = ('numpy', 'httpx', 'jsonschema', 'pydantic', 'tokenizers', "
            "'fabric_jev_browser'); print([m for m in heavy if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_help_loads_no_heavy_module() -> None:
    code = ("import sys, contextlib, io\nfrom fabric_jev.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    main(['--help'])\n"
            "print([m for m in ('numpy', 'httpx', 'jsonschema', 'pydantic', 'websockets') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_the_browser_connector_is_found_through_its_entry_point() -> None:
    assert declared_connectors()["browser"] == "fabric_jev_browser.plugin:PLUGIN"


@pytest.mark.anyio
async def test_jev_host_builds_the_connectors_named_in_its_config() -> None:
    config = HostConfig.parse({"connectors": {"browser": {
        "wsUrl": "ws://127.0.0.1:9/devtools/browser/x", "allowedMethods": ["Runtime.evaluate"]}}})
    async with JevHost(config) as host:
        assert "browser.connect" in host.capabilities and "browser.cdp" in host.capabilities


def test_an_unknown_connector_in_the_config_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"unknown connector 'nope' \(installed: browser"):
        JevHost(HostConfig.parse({"connectors": {"nope": {}}}))


def _demo_plugin(folder: Path) -> Path:
    """A third-party connector, installed the way pip installs one: a module and a dist-info."""
    (folder / "demo_connector.py").write_text('''
from fabric_jev.plugins import BenchSuite, ConnectorPlugin
from fabric_jev.protocol import Capability


class Demo:
    name = "demo"

    def __init__(self, settings):
        self.greeting = settings.get("greeting", "hello")

    def capabilities(self):
        async def echo(args, ctx):
            return {"echo": args, "greeting": self.greeting}
        return {"demo.echo": Capability(echo, "read", "echo the arguments")}

    async def run_ended(self, run_id):
        return None

    async def aclose(self):
        return None


def add_commands(commands):
    cmd = commands.add_parser("demo", help="the demo connector", description="Demo.", epilog="exit codes: 0")

    async def hello(args):
        print("demo says hello")
        return 0
    cmd.set_defaults(handler=hello)

    check = commands.add_parser("demo-check", group="verify", help="the demo's check", description="Check.",
                                epilog="exit codes: 0")
    check.add_argument("--times", type=int, default=1, help="how many")

    async def verify(args):
        print("demo verifies" * args.times)
        return 0
    check.set_defaults(handler=verify)

    async def bench(samples):
        return {"samples": samples, "ms": 1.5}

    def show(report):
        print(f"demo bench: {report['samples']} samples, {report['ms']} ms")
    commands.add_bench_suite(BenchSuite("demo", bench, show))


PLUGIN = ConnectorPlugin(name="demo", connector=Demo, add_commands=add_commands)
''', encoding="utf-8")
    info = folder / "demo_connector-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-connector\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[fabric_jev.connectors]\ndemo = demo_connector:PLUGIN\n")
    return folder


def test_a_third_party_connector_plugs_in_its_capabilities_and_commands(tmp_path: Path) -> None:
    import os

    env = {"PYTHONPATH": os.pathsep.join([str(_demo_plugin(tmp_path)), os.environ.get("PYTHONPATH", "")])}
    prog = tmp_path / "p.json"
    prog.write_text(json.dumps(program("return await tools.call({ref: 'demo.echo', args: {n: 1}})",
                                       requires=["demo.echo"])))
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"connectors": {"demo": {"greeting": "hi"}}}))
    done = cli("run", str(prog), "--config", str(config), env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == {"echo": {"n": 1}, "greeting": "hi"}
    said = cli("demo", env=env)
    assert said.returncode == 0 and said.stdout == "demo says hello\n"
    assert "demo" in cli("--help", env=env).stdout
    # In a core group, and as a bench suite (which `bench all` runs too).
    checked = cli("verify", "demo-check", "--times", "2", env=env)
    assert checked.returncode == 0 and checked.stdout == "demo verifiesdemo verifies\n"
    assert "demo-check" in cli("verify", "--help", env=env).stdout
    benched = cli("bench", "demo", "--samples", "3", env=env)
    assert benched.returncode == 0 and benched.stdout == "demo bench: 3 samples, 1.5 ms\n"
    as_json = cli("bench", "demo", "--samples", "4", "--json", env=env)
    assert json.loads(as_json.stdout) == {"demo": {"samples": 4, "ms": 1.5}}
    assert ",redaction,demo,all}" in cli("bench", "--help", env=env).stdout


def test_without_the_connector_browser_commands_say_how_to_get_it(tmp_path: Path) -> None:
    done = cli("browser", "launch", bare=tmp_path)
    assert done.returncode == 2
    assert done.stderr == ("fabric-jev: the browser connector is not installed; install it with: "
                           f"{KNOWN['browser']}\n")


def test_the_plugin_interface_is_typed_and_has_no_hooks() -> None:
    import collections.abc
    import dataclasses
    import typing

    import fabric_jev.plugins as plugins

    def untyped(annotation: object) -> list[str]:
        """Every Callable in `annotation` that takes `...` or gives Any."""
        found = []
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin is collections.abc.Callable and (args[0] is Ellipsis or args[-1] is typing.Any):
            found.append(str(annotation))
        for arg in args:
            found += untyped(arg) if not isinstance(arg, list) else [x for a in arg for x in untyped(a)]
        return found

    namespace = {**vars(plugins), "Connector": object, "JsonValue": object}
    for record in (plugins.ConnectorPlugin, plugins.BenchSuite):
        for field in dataclasses.fields(record):
            annotation = eval(field.type, namespace) if isinstance(field.type, str) else field.type
            assert untyped(annotation) == [], f"{record.__name__}.{field.name}: {field.type}"
    assert "hooks" not in {f.name for f in dataclasses.fields(plugins.ConnectorPlugin)}
    assert not hasattr(plugins, "find_hook")


def test_a_plugin_command_in_an_unknown_group_is_refused() -> None:
    import argparse

    from fabric_jev.plugins import Commands

    top = argparse.ArgumentParser().add_subparsers()
    with pytest.raises(ValueError, match=r"no command group 'bench' takes plugin commands \(these do: verify\)"):
        Commands(top, {"verify": top}, {}).add_parser("x", help="x", description="x", epilog="x", group="bench")
