"""The browser connector as a fabric-jev plugin (entry point `fabric_jev.connectors: browser`).

What the browser brings, typed through `fabric_jev.plugins`: the connector, the
commands `fabric-jev browser launch` and `fabric-jev verify run`, the bench suite
`fabric-jev bench browser`, and pages for the core's own tools (`bench eval`
opens its report in one). Its pytest fixtures come through an entry point of their
own (`pytest11: fabric_jev_browser`, `pytest_plugin.py`).

Importing this module must stay cheap: `fabric-jev --help` imports it to list
the commands. Everything heavy is imported inside the functions.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fabric_jev.plugins import BenchSuite, Commands, ConnectorPlugin

if TYPE_CHECKING:
    from .connector import BrowserConnector
    from .page import Page


def _connector(settings: Mapping[str, Any]) -> BrowserConnector:
    from .connector import BrowserConnector

    return BrowserConnector(settings)


def _dimension(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of pixels") from None
    if not 100 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"{value} is outside 100-10000 pixels")
    return value


async def _launch(args: argparse.Namespace) -> int:
    from .cli import launch_command

    return await launch_command(width=args.width, height=args.height)


async def _verify_run(args: argparse.Namespace) -> int:
    from .cli import verify_command

    return await verify_command(args.dictionary, plan=args.plan, url=args.url,
                                ws_url=None if args.launch else args.ws_url)


def _add_commands(commands: Commands) -> None:
    br = commands.add_parser(
        "browser", help="the browser connector: launch headless Chromium",
        description="Commands of the browser connector (package fabric-jev-browser).",
        epilog="exit codes:\n  0 done\n  2 bad arguments or Chromium could not start")
    br_sub = br.add_subparsers(dest="browser_command", required=True, metavar="COMMAND")
    la = br_sub.add_parser(
        "launch", help="start headless Chromium on 127.0.0.1 and print its websocket URL",
        description="Start headless Chromium on 127.0.0.1, print its DevTools websocket URL on the "
                    "first line of standard output, and keep it running until Ctrl-C or SIGTERM.",
        epilog="exit codes:\n  0 stopped (Ctrl-C, SIGTERM, or Chromium exited)\n"
               "  2 bad arguments or Chromium could not start")
    la.add_argument("--width", type=_dimension, default=1280, help="window width in pixels (default 1280)")
    la.add_argument("--height", type=_dimension, default=800, help="window height in pixels (default 800)")
    la.set_defaults(handler=_launch)

    vr = commands.add_parser(
        "run", group="verify", help="replay a plan against a page (zero model calls)",
        description="Replay a compiled plan's checks against a page in a running browser "
                    "(--ws-url) or in a headless Chromium launched for the run and closed "
                    "after it (--launch). Needs the browser connector. No evaluator is asked.",
        epilog="exit codes:\n  0 every check passed\n  1 a check failed (its reason is printed)\n"
               "  2 bad dictionary or plan, a digest mismatch, an unreachable browser, or no browser connector")
    vr.add_argument("dictionary", help="dictionary JSON file (the one the plan was compiled for)")
    vr.add_argument("--plan", required=True,
                    help="plan JSON file: the output of `verify compile`, or its `plan` member")
    vr.add_argument("--url", required=True, help="the page to verify")
    browser = vr.add_mutually_exclusive_group(required=True)
    browser.add_argument("--ws-url", dest="ws_url",
                         help="browser websocket URL, ws://… (from fabric-jev browser launch)")
    browser.add_argument("--launch", action="store_true",
                         help="launch headless Chromium for these checks and close it after them")
    vr.set_defaults(handler=_verify_run)

    commands.add_bench_suite(BenchSuite("browser", _bench, _print_bench))


async def _bench(samples: int) -> dict[str, Any]:
    from .bench import bench_browser

    return await bench_browser()


def _print_bench(report: dict[str, Any]) -> None:
    from .bench import print_browser

    print_browser(report)


@asynccontextmanager
async def _open_page() -> AsyncIterator[Page]:
    """A page in a headless Chromium launched for it, both closed on exit."""
    from .launcher import launch_chromium
    from .testing import open_page

    browser = await launch_chromium()
    try:
        async with open_page(browser.ws_url) as page:
            yield page
    finally:
        await browser.aclose()


PLUGIN = ConnectorPlugin(name="browser", connector=_connector, add_commands=_add_commands, open_page=_open_page)
