"""The browser connector as a fabric-jev plugin (entry point `fabric_jev.connectors: browser`).

Importing this module must stay cheap: `fabric-jev --help` imports it to list
the `browser` subcommands. Everything heavy is imported inside the functions.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fabric_jev.plugins import ConnectorPlugin


def _connector(settings: Mapping[str, Any]) -> Any:
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


def _add_commands(sub: Any) -> None:
    br = sub.add_parser(
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


@asynccontextmanager
async def _verification_channels(ws_url: str | None, url: str) -> AsyncIterator[Any]:
    """Channels on `url` in the browser at `ws_url`; with None, in a headless Chromium
    launched for these checks alone and closed after them (`verify run --launch`)."""
    from .verification import open_browser_channels

    if ws_url is not None:
        async with open_browser_channels(ws_url, url) as channels:
            yield channels
        return
    from .launcher import launch_chromium

    browser = await launch_chromium()
    try:
        async with open_browser_channels(browser.ws_url, url) as channels:
            yield channels
    finally:
        await browser.aclose()


async def _bench(samples: int) -> dict[str, Any]:
    from .bench import bench_browser

    return await bench_browser()


def _print_bench(report: dict[str, Any]) -> None:
    from .bench import print_browser

    print_browser(report)


# fabric-jev's pytest plugin (fabric_jev.testing.plugin): jev_browser, jev_page, checks on pages.
def _session_browser(**kw: Any) -> Any:
    from .testing import session_browser

    return session_browser(**kw)


def _open_page(ws_url: str, **kw: Any) -> Any:
    from .testing import open_page

    return open_page(ws_url, **kw)


def _page_source(page: Any) -> Any:
    from .testing import page_source

    return page_source(page)


def _page_channels(page: Any) -> Any:
    from .testing import page_channels

    return page_channels(page)


PLUGIN = ConnectorPlugin(
    name="browser",
    connector=_connector,
    add_commands=_add_commands,
    hooks={"verification_channels": _verification_channels, "bench": _bench, "print_bench": _print_bench,
           "session_browser": _session_browser, "open_page": _open_page, "page_source": _page_source,
           "page_channels": _page_channels},
)
