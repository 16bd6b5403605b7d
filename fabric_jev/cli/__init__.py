"""The `fabric-jev` command."""

from __future__ import annotations

import argparse
import sys

import anyio

from ..errors import JevError, LaunchRejected
from .common import EXIT_REJECTED


def build_parser() -> argparse.ArgumentParser:
    from .approval import add_approval_commands
    from .batch import add_batch_command
    from .bench import add_bench_command
    from .browser import add_browser_commands
    from .evaluators import add_evaluator_commands
    from .learning import add_learning_commands
    from .mcp import add_mcp_command
    from .run import add_run_command
    from .verification import add_verification_commands

    parser = argparse.ArgumentParser(prog="fabric-jev", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_command(sub)
    add_evaluator_commands(sub)
    add_approval_commands(sub)
    add_verification_commands(sub)
    add_browser_commands(sub)
    add_bench_command(sub)
    add_learning_commands(sub)
    add_batch_command(sub)
    add_mcp_command(sub)
    return parser


def _unwrap(exc: BaseException) -> BaseException:
    """A task group wraps errors in groups; report the single error inside."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        try:
            code: int = anyio.run(args.handler, args)
        except BaseExceptionGroup as group:
            raise _unwrap(group) from None
    except LaunchRejected as exc:
        sys.stderr.write(f"fabric-jev: launch rejected: {exc}\n")
        return EXIT_REJECTED
    except JevError as exc:
        sys.stderr.write(f"fabric-jev: {exc}\n")
        return EXIT_REJECTED
    except KeyboardInterrupt:
        return 130
    return code
