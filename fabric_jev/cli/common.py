"""Helpers shared by the sub-commands: exit codes, bounded file reading, parser conventions.

Command modules import only this, argparse and the standard library at the top:
everything a command needs is imported inside its handler, so `--help` and the
commands that do not need pydantic, httpx or numpy never load them.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from ..contract.config import HostConfig

EXIT_OK = 0
EXIT_NOT_COMPLETED = 1
EXIT_REJECTED = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130
EVALUATOR_HELP = ("the evaluator: local | fixture:FILE | cassette:FILE | record:FILE | typesafe | openrouter | "
                  "vercel | openai:MODEL | ollama:MODEL | anthropic:MODEL | gguf:FILE (a GGUF model file that "
                  "llama.cpp serves) (default: the config's, else local)")
CONFIG_HELP = "host config JSON file (limits, model, evaluator, connectors; see docs/programs.md)"
#: Upper bounds on the files commands read: a file over its bound is refused before it is read.
MAX_INPUT_BYTES = 1 << 20
MAX_DICTIONARY_BYTES = 8 << 20
MAX_SMALL_FILE_BYTES = 1 << 20
PROFILE_HELP = ("a profile: the local evaluator's (from fabric-jev learn), or a model route's temperatures "
                "(docs/evaluators.md)")


class BadInput(Exception):
    """A file the user pointed at is missing, too large, or not the JSON it should be."""


def exit_codes(*lines: str) -> str:
    """The `--help` epilog listing a command's exit codes."""
    return "exit codes:\n" + "\n".join(f"  {line}" for line in lines)


def add_evaluator_options(parser: argparse.ArgumentParser, *, config: bool) -> None:
    """--evaluator and --profile (and --config), the same words on every command that asks one."""
    parser.add_argument("--evaluator", help=EVALUATOR_HELP)
    parser.add_argument("--profile", metavar="FILE", help=PROFILE_HELP)
    if config:
        parser.add_argument("--config", help=CONFIG_HELP)


def override_target(text: str) -> str:
    """An argparse type: a risk or a capability ref (`--allow`, `--deny`)."""
    from ..contract.policy import check_override_target

    try:
        return check_override_target(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_policy_options(parser: argparse.ArgumentParser) -> None:
    """--allow and --deny: widen or narrow the configured policy for this command only."""
    parser.add_argument("--allow", action="append", type=override_target, metavar="RISK|REF",
                        help="allow calls of this risk (read, write, execute, network, agent) or this "
                        "capability ref without asking; repeatable")
    parser.add_argument("--deny", action="append", type=override_target, metavar="RISK|REF",
                        help="deny calls of this risk or ref without asking; repeatable; a deny beats "
                        "an allow")
    parser.add_argument("--no-default-rules", dest="no_default_rules", action="store_true",
                        help="switch off fabric-jev's default rules for known-safe, read-only work "
                        "(docs/approvals.md)")
    # The project's and the user's settings (rules, threshold) apply to commands that decide calls.
    parser.set_defaults(with_settings=True)


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, *, help: str,
                description: str, codes: tuple[str, ...]) -> argparse.ArgumentParser:
    """A subcommand whose --help shows what it does and its exit codes."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=description,
                                                     epilog=exit_codes(*codes))
    return parser


def load_json(path: str, what: str, *, max_bytes: int = MAX_SMALL_FILE_BYTES) -> Any:
    """Read a JSON file (or standard input for "-"), bounded in size and depth."""
    from .._json import JSONInputError, read_json_file

    try:
        return read_json_file(path, what=what, max_bytes=max_bytes)
    except JSONInputError as exc:
        raise BadInput(str(exc)) from None


def load_program(path: str) -> Any:
    """A program file as the JSON artifact (docs/programs.md, "Programs as files"): a .ts/.js file
    with its @program comment, or the artifact itself. `fabric_jev.program_files.load_program`,
    the one loader of every command, with its refusals as BadInput."""
    from ..errors import ProgramInvalid
    from ..program_files import load_program as load

    try:
        return load(path)
    except ProgramInvalid as exc:
        raise BadInput(str(exc)) from None


def config_from(args: argparse.Namespace) -> HostConfig:
    """The host config named by --config (ConfigError on a bad one), else the defaults."""
    from ..contract.config import HostConfig, default_config

    path = getattr(args, "config", None)
    config = HostConfig.load(path) if path else default_config()
    allow, deny = getattr(args, "allow", None) or (), getattr(args, "deny", None) or ()
    if allow or deny:  # --allow/--deny join the config's own lists, for this command only
        config = config.model_copy(update={"allow": tuple(dict.fromkeys((*config.allow, *allow))),
                                           "deny": tuple(dict.fromkeys((*config.deny, *deny)))})
    if getattr(args, "profile", None):  # --profile is the config's evaluator.profile, given on the line
        config = config.model_copy(update={"evaluator": {**config.evaluator, "profile": args.profile}})
    if getattr(args, "with_settings", False):
        from ..approval.settings import with_user_settings

        config = with_user_settings(config)
    if getattr(args, "no_default_rules", False):
        config = config.model_copy(update={"default_rules": False})
    return config


def positive_int(text: str) -> int:
    """An argparse type: a whole number ≥ 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


def print_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = EXIT_REJECTED) -> int:
    """Print one `fabric-jev: …` line on stderr (terminal-safe: it may quote a file name) and return the exit code."""
    from ..terminal import one_line

    sys.stderr.write(f"fabric-jev: {one_line(message)}\n")
    return code


class Formatter(argparse.HelpFormatter):
    """Wraps each line of a description to the terminal; indented lines (exit codes) stay as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return "\n".join(indent + line if line.startswith("  ") or not line.strip()
                         else textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent)
                         for line in text.splitlines())


class Parser(argparse.ArgumentParser):
    """argparse with the conventions every fabric-jev command follows.

    Descriptions wrap line by line; each parser records itself as `_parser`
    so a bad flag is reported with the usage of the command it was given to; a
    missing subcommand is named with the choices instead of a variable name.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)
        self.set_defaults(_parser=self)

    def error(self, message: str) -> NoReturn:  # as argparse declares it: it never returns
        if "required: COMMAND" in message:
            choices = next((a.choices for a in self._actions
                            if isinstance(a, argparse._SubParsersAction)), None) or {}
            message = f"choose a command: {', '.join(choices)} (see {self.prog} --help)"
        super().error(message)


async def announce_type_errors(program: object, config: HostConfig, where: str, *, observed: bool = False) -> None:
    """Type-check `program` as its launch will (the verdict is then cached for the launch) and print
    each error that does not refuse it (mode warn) on standard error, one line each, before it runs.
    A refusal (mode error) raises the launch's own TypeScriptError; a bad artifact its ProgramInvalid."""
    from ..contract.program import parse_program
    from ..typecheck.checker import check_for_launch

    report = await check_for_launch(parse_program(program), config, observed=observed)
    for line in report.warnings(where):
        sys.stderr.write(line + "\n")
    sys.stderr.flush()

