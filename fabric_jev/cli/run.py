"""`fabric-jev run`: one program, its envelope on stdout, progress on stderr."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

import anyio

from ..contract.config import HostConfig
from ..contract.envelope import ProgressEvent, RunState
from ..errors import LaunchRejected
from .common import (
    EVALUATOR_HELP,
    EXIT_INTERRUPTED,
    EXIT_NOT_COMPLETED,
    EXIT_OK,
    PROFILE_HELP,
    BadInput,
    config_from,
    load_json,
    print_json,
)


def add_configured_connectors(host: Any, config: HostConfig) -> None:
    """Register the connectors named in the config's `connectors` section."""
    for name, settings in config.connectors.items():
        if name != "browser":
            raise LaunchRejected(f"unknown connector {name!r} in config (known: browser)")
        try:
            from fabric_jev_browser import BrowserConnector
        except ImportError:
            raise LaunchRejected("the browser connector is not installed "
                                 "(pip install -e connectors/browser)") from None
        host.add_connector(BrowserConnector(settings))


async def run_command(args: argparse.Namespace) -> int:
    from ..approval.settings import with_user_threshold
    from ..evaluators.select import build_evaluator
    from ..host import JevHost

    config = with_user_threshold(config_from(args))
    try:
        program = load_json(args.program, "program")
        value = load_json(args.input, "input") if args.input else None
    except BadInput as exc:
        raise LaunchRejected(str(exc)) from None
    evaluator = build_evaluator(args.evaluator, config)

    def show(event: ProgressEvent) -> None:
        sys.stderr.write(f"[{event.sequence}] {json.dumps(event.value, ensure_ascii=False)}\n")
        sys.stderr.flush()

    envelope = None
    # Signals are handled from the start: before the program launches, Ctrl-C
    # just ends the command (exit 130); afterwards it stops the run, whose
    # `cancelled` envelope is still printed.
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with JevHost(config, evaluator=evaluator) as host, anyio.create_task_group() as tg:
            add_configured_connectors(host, config)

            async def stop_on_signal() -> None:
                async for _ in signals:
                    runs = host.status()["runs"]
                    if not runs:
                        tg.cancel_scope.cancel()
                        return
                    for run in runs:
                        tg.start_soon(host.stop, run["id"])

            tg.start_soon(stop_on_signal)
            envelope = await host.run(program, value, on_event=show, intent=args.intent)
            tg.cancel_scope.cancel()
    if envelope is None:
        return EXIT_INTERRUPTED
    print_json(envelope.to_json())
    return EXIT_OK if envelope.state is RunState.COMPLETED else EXIT_NOT_COMPLETED


def add_run_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser("run", help="run a program and print its terminal envelope")
    run.add_argument("program", help="program JSON file")
    run.add_argument("--input", help="input JSON file, or - for standard input")
    run.add_argument("--config", help="host config JSON file")
    run.add_argument("--evaluator", help=EVALUATOR_HELP)
    run.add_argument("--profile", metavar="FILE", help=PROFILE_HELP)
    run.add_argument("--intent", help="what the user asked for: the user text the auto-approval "
                     "classifier judges capability calls against")
    run.set_defaults(handler=run_command)
