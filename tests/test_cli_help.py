"""`--help` of every command: a description, exit codes, help on every option; snapshots in tests/golden/cli_help.

The snapshots are generated from the parser, one file per command path. After adding or
changing a command, regenerate them and review the diff:

    FABRIC_JEV_REGENERATE_HELP=1 python -m pytest tests/test_cli_help.py -q

A command without a snapshot, or a snapshot without a command, fails until then.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import fabric_jev
from fabric_jev.cli import VERSION, build_parser
from tests.cli_support import cli

GOLDEN = Path(__file__).resolve().parent / "golden" / "cli_help"
REGENERATE = bool(os.environ.get("FABRIC_JEV_REGENERATE_HELP"))


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def _all(monkeypatch: pytest.MonkeyPatch) -> dict[str, argparse.ArgumentParser]:
    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps to the terminal: fix it for stable text
    return {"-".join(("fabric-jev", *path)): parser for path, parser in _commands(build_parser())}


def test_every_command_has_a_description_exit_codes_and_help_on_every_option(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name, parser in _all(monkeypatch).items():
        assert parser.description, f"{name}: no description"
        assert parser.epilog and "exit codes:" in parser.epilog, f"{name}: no exit codes in --help"
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction | argparse._VersionAction):
                continue
            assert action.help and action.help != argparse.SUPPRESS, f"{name}: {action.dest} has no help"


def test_help_matches_the_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    helps = {name: parser.format_help() for name, parser in _all(monkeypatch).items()}
    if REGENERATE:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for stale in set(p.stem for p in GOLDEN.glob("*.txt")) - set(helps):
            (GOLDEN / f"{stale}.txt").unlink()
        for name, text in helps.items():
            (GOLDEN / f"{name}.txt").write_text(text, encoding="utf-8")
    stored = {p.stem: p.read_text(encoding="utf-8") for p in GOLDEN.glob("*.txt")}
    hint = "regenerate: FABRIC_JEV_REGENERATE_HELP=1 python -m pytest tests/test_cli_help.py"
    assert sorted(stored) == sorted(helps), hint
    for name, text in helps.items():
        assert stored[name] == text, f"{name}: --help changed; {hint}"


def test_version_and_python_dash_m() -> None:
    assert fabric_jev.__version__ == VERSION
    done = cli("--version")
    assert done.returncode == 0 and done.stdout == f"fabric-jev {VERSION}\n"


def test_a_bad_flag_shows_that_subcommands_usage() -> None:
    done = cli("verify", "compile", "d.json", "--intent", "x", "--bogus")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == "fabric-jev verify compile: error: unrecognized arguments: --bogus"
    assert done.stderr.startswith("usage: fabric-jev verify compile")


def test_the_run_only_parser_is_the_full_trees_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """`fabric-jev run ...` builds the parser with `run` alone (start-up): same help, same parse."""
    monkeypatch.setenv("COLUMNS", "100")
    full, alone = dict(_commands(build_parser())), dict(_commands(build_parser("run")))
    assert sorted(alone) == [(), ("run",)]
    assert alone[("run",)].format_help() == full[("run",)].format_help()
    argv = ["run", "p.json", "--input", "-", "--allow", "read", "--deny", "kv.put", "--intent", "x",
            "--evaluator", "fixture:f.json", "--profile", "p", "--config", "c.json", "--result", "--quiet"]
    one, two = full[()].parse_args(argv), alone[()].parse_args(argv)
    assert {k: v for k, v in vars(one).items() if k != "_parser"} == \
        {k: v for k, v in vars(two).items() if k != "_parser"}
    assert one._parser.format_usage() == two._parser.format_usage()
