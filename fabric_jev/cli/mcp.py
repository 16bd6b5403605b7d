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

    if args.program_tools and not args.programs:
        raise LaunchRejected("--program-tools needs --programs DIR: the programs to offer as tools")
    config = config_from(args)
    evaluator = build_evaluator(args.evaluator, config)
    await serve_stdio(config, evaluator, programs=args.programs,  # JevHost builds config connectors
                      program_tools=args.program_tools)
    return EXIT_OK


def add_mcp_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    m = add_command(sub, "mcp", help="serve the jev_* tools over MCP on standard input/output",
                    description="An MCP server (stdio) with the tools jev_run, jev_spawn, jev_status, "
                    "jev_wait (alias jev_join), jev_stop, jev_evaluate and jev_approve, and for observers "
                    "jev_session_open, jev_observe, jev_session_post, jev_advice and jev_session_close. A "
                    "capability call whose policy asks is an elicitation to the client's user (refused "
                    "when the client does not support elicitation). See docs/mcp.md.",
                    codes=("0 the client closed the session", "2 bad config or evaluator, or the mcp "
                           "extra is missing"))
    m.add_argument("--config", help=CONFIG_HELP)
    m.add_argument("--evaluator", help=EVALUATOR_HELP)
    m.add_argument("--programs", metavar="DIR",
                   help="folder of program files (PROGRAM.ts, PROGRAM.js, PROGRAM.json): each is listed as a "
                   "resource and can be run by programPath (default: none; only inline programs)")
    m.add_argument("--program-tools", dest="program_tools", action="store_true",
                   help="also offer each program of --programs as a tool of its own, named after the program "
                   "and typed by its schemas")
    add_policy_options(m)
    m.set_defaults(handler=mcp_command)
