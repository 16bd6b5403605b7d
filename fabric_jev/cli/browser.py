"""`fabric-jev browser launch` (the command lives in the browser connector)."""

from __future__ import annotations

import argparse
import sys


async def _cmd_browser_launch(args: argparse.Namespace) -> int:
    try:
        from fabric_jev_browser.cli import launch_command
    except ImportError:
        sys.stderr.write("fabric-jev: the browser connector is not installed "
                         "(pip install -e connectors/browser)\n")
        return 2
    code: int = await launch_command(width=args.width, height=args.height)
    return code


def add_browser_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    br = sub.add_parser("browser", help="the browser connector")
    br_sub = br.add_subparsers(dest="browser_command", required=True)
    la = br_sub.add_parser("launch", help="start headless Chromium on 127.0.0.1; print its "
                           "websocket URL first; run until Ctrl-C or SIGTERM")
    la.add_argument("--width", type=int, default=1280)
    la.add_argument("--height", type=int, default=800)
    la.set_defaults(handler=_cmd_browser_launch)
