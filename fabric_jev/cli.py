"""The `fabric-jev` command."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any

import anyio

from .contract.config import HostConfig
from .contract.envelope import ProgressEvent, RunState
from .errors import JevError, LaunchRejected

EXIT_OK = 0
EXIT_NOT_COMPLETED = 1
EXIT_REJECTED = 2
EXIT_INTERRUPTED = 130


def _read_json(path: str, what: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise LaunchRejected(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LaunchRejected(f"{what} {path} is not valid JSON: {exc.msg} "
                             f"(line {exc.lineno})") from None


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _config(args: argparse.Namespace) -> HostConfig:
    return HostConfig.load(args.config) if args.config else HostConfig()


def _evaluator(spec: str | None, config: HostConfig) -> Any:
    from .evaluators.select import build_evaluator

    return build_evaluator(spec, config)


async def _cmd_run(args: argparse.Namespace) -> int:
    from .host import JevHost

    config = _config(args)
    program = _read_json(args.program, "program")
    value = _read_json(args.input, "input") if args.input else None
    evaluator = _evaluator(args.evaluator, config)

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
            envelope = await host.run(program, value, on_event=show)
            tg.cancel_scope.cancel()
    if envelope is None:
        return EXIT_INTERRUPTED
    _print_json(envelope.to_json())
    return EXIT_OK if envelope.state is RunState.COMPLETED else EXIT_NOT_COMPLETED


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fabric-jev", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a program and print its terminal envelope")
    run.add_argument("program", help="program JSON file")
    run.add_argument("--input", help="input JSON file, or - for standard input")
    run.add_argument("--config", help="host config JSON file")
    run.add_argument("--evaluator", help="local | fixture:FILE | cassette:FILE | typesafe | "
                     "openrouter | vercel (default: the config's, else local)")
    run.set_defaults(handler=_cmd_run)

    from . import cli_extra

    cli_extra.add_commands(sub)
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


if __name__ == "__main__":
    sys.exit(main())
