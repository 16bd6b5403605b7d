"""`fabric-jev mcp`: an MCP server on standard input/output (register it with an MCP client)."""

from __future__ import annotations

import argparse

from ..errors import LaunchRejected
from .common import CONFIG_HELP, EVALUATOR_HELP, EXIT_OK, add_command, add_policy_options, config_from


async def mcp_command(args: argparse.Namespace) -> int:
    try:
        from ..mcp import serve_stdio
    except ImportError:
        raise LaunchRejected("fabric-jev mcp needs the mcp extra: pip install 'fabric-jev[mcp]'") from None
    from ..evaluators.select import build_evaluator

    config = config_from(args)
    evaluator = build_evaluator(args.evaluator, config)
    await serve_stdio(config, evaluator, programs=args.programs)  # JevHost builds config connectors
    return EXIT_OK


def add_mcp_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    m = add_command(sub, "mcp", help="serve the jev_* tools over MCP on standard input/output",
                    description="An MCP server (stdio) with the tools jev_run, jev_spawn, jev_status, "
                    "jev_wait, jev_stop, jev_evaluate and jev_approve, and for observers jev_session_open, "
                    "jev_observe, jev_session_post, jev_advice and jev_session_close. A capability call "
                    "whose policy asks is an elicitation to the client's user (refused when the client "
                    "does not support elicitation). See docs/mcp.md.",
                    codes=("0 the client closed the session", "2 bad config or evaluator, or the mcp "
                           "extra is missing"))
    m.add_argument("--config", help=CONFIG_HELP)
    m.add_argument("--evaluator", help=EVALUATOR_HELP)
    m.add_argument("--programs", metavar="DIR",
                   help="folder that programPath arguments are read from (default: none; only inline programs)")
    add_policy_options(m)
    m.set_defaults(handler=mcp_command)
