"""`fabric-jev mcp`: an MCP server on standard input/output (register it with an MCP client), or on
streamable HTTP for a host that several clients share (`--transport streamable-http`)."""

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
    if args.transport == "streamable-http":
        return await _serve_http(args)
    for option, given in (("--host", args.host), ("--port", args.port), ("--token-file", args.token_file),
                          ("--ssl-certfile", args.ssl_certfile), ("--ssl-keyfile", args.ssl_keyfile),
                          ("--client-runs", args.client_runs)):
        if given is not None:
            raise LaunchRejected(f"{option} is for --transport streamable-http (stdio has one client)")
    config = config_from(args)
    evaluator = build_evaluator(args.evaluator, config)
    await serve_stdio(config, evaluator, programs=args.programs,  # JevHost builds config connectors
                      program_tools=args.program_tools)
    return EXIT_OK


async def _serve_http(args: argparse.Namespace) -> int:

    from .._bearer import read_token_file, require_token
    from .._signals import stopped_by_signals
    from ..evaluators.select import build_evaluator
    from ..mcp.clients import DEFAULT_CLIENT_RUNS
    from ..mcp.over_http import serve_http

    host = "127.0.0.1" if args.host is None else args.host
    # The token is checked before anything starts: beyond loopback, no token is no server.
    token = None if args.token_file is None else read_token_file(args.token_file)
    require_token(host, token, command="mcp")
    config = config_from(args)
    evaluator = build_evaluator(args.evaluator, config)
    async with stopped_by_signals():  # a signal cancels serving: the host then stops every run
        await serve_http(config, evaluator, host=host, port=0 if args.port is None else args.port,
                         token=token, ssl_certfile=args.ssl_certfile, ssl_keyfile=args.ssl_keyfile,
                         client_runs=DEFAULT_CLIENT_RUNS if args.client_runs is None else args.client_runs,
                         programs=args.programs, program_tools=args.program_tools)
    return EXIT_OK


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number from 1 to 10000")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a port from 0 to 65535")
    return value


def add_mcp_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    m = add_command(sub, "mcp", help="serve the jev_* tools over MCP on standard input/output or HTTP",
                    description="An MCP server (stdio) with the tools jev_run, jev_spawn, jev_status, "
                    "jev_wait (alias jev_join), jev_stop, jev_evaluate and jev_approve, and for observers "
                    "jev_session_open, jev_observe, jev_session_post, jev_advice and jev_session_close. A "
                    "capability call whose policy asks is an elicitation to the client's user (refused "
                    "when the client does not support elicitation). With --transport streamable-http it serves "
                    "several clients over HTTP at URL/mcp (printed on standard output when ready), each "
                    "limited to --client-runs runs at once. See docs/mcp.md.",
                    codes=("0 the client closed the session (stdio), or SIGTERM/SIGINT (HTTP)",
                           "2 bad config, evaluator, token file, TLS files or port, no --token-file beyond "
                           "loopback, or the mcp extra is missing"))
    m.add_argument("--config", help=CONFIG_HELP)
    m.add_argument("--evaluator", help=EVALUATOR_HELP)
    m.add_argument("--programs", metavar="DIR",
                   help="folder of program files (PROGRAM.ts, PROGRAM.js, PROGRAM.json): each is listed as a "
                   "resource and can be run by programPath (default: none; only inline programs)")
    m.add_argument("--program-tools", dest="program_tools", action="store_true",
                   help="also offer each program of --programs as a tool of its own, named after the program "
                   "and typed by its schemas")
    m.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio",
                   help="stdio (default): one client on standard input/output; streamable-http: the MCP "
                   "streamable HTTP transport, for several clients")
    m.add_argument("--host", help="HTTP: the address to listen on (default 127.0.0.1; beyond loopback "
                   "--token-file is required)")
    m.add_argument("--port", type=_port, help="HTTP: the port (default 0: any free port; the URL is printed)")
    m.add_argument("--token-file", dest="token_file", metavar="FILE",
                   help="HTTP: a file (mode 600) holding the bearer token every request must carry")
    m.add_argument("--ssl-certfile", dest="ssl_certfile", metavar="FILE", help="HTTP: TLS certificate (PEM)")
    m.add_argument("--ssl-keyfile", dest="ssl_keyfile", metavar="FILE", help="HTTP: TLS private key (PEM)")
    m.add_argument("--client-runs", dest="client_runs", type=_positive, metavar="N",
                   help="HTTP: runs one client (one MCP session) may have queued or running at once; a "
                   "further jev_run waits its turn, a further jev_spawn is refused; as many jev_evaluate and "
                   "jev_approve calls in flight, apart from the runs (default 4)")
    add_policy_options(m)
    m.set_defaults(handler=mcp_command)
