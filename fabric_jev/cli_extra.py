"""Sub-commands beyond `run`: evaluate, status, serve, login, logout, bench."""

from __future__ import annotations

import argparse
import getpass
import json
import signal
import sys
from typing import Any

import anyio

from .contract.config import HostConfig
from .contract.evaluation import validate_request
from .errors import CredentialError, EvaluationError, JevError

EVALUATOR_HELP = ("local | fixture:FILE | cassette:FILE | record:FILE | typesafe | openrouter | "
                  "vercel (default: the config's, else local)")


def _config(args: argparse.Namespace) -> HostConfig:
    return HostConfig.load(args.config) if getattr(args, "config", None) else HostConfig()


def _print(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


async def _cmd_evaluate(args: argparse.Namespace) -> int:
    from .evaluators.select import build_evaluator

    config = _config(args)
    try:
        if args.request == "-":
            text = sys.stdin.read()
        else:
            with open(args.request, encoding="utf-8") as f:
                text = f.read()
        raw = json.loads(text)
    except (OSError, json.JSONDecodeError) as exc:
        sys.stderr.write(f"fabric-jev: cannot read request {args.request}: {exc}\n")
        return 2
    try:
        request = validate_request(raw, max_bytes=config.maxRequestBytes)
    except EvaluationError as exc:
        sys.stderr.write(f"fabric-jev: invalid request: {exc}\n")
        return 2
    evaluator = build_evaluator(args.evaluator, config)
    try:
        evaluation = await evaluator.evaluate(request, timeout=config.requestTimeoutMs / 1000)
    except EvaluationError as exc:
        sys.stderr.write(f"fabric-jev: evaluation failed: {exc}\n")
        return 1
    finally:
        await evaluator.aclose()
    _print(evaluation.to_json())
    return 0


async def _cmd_status(args: argparse.Namespace) -> int:
    from .evaluators.select import build_evaluator

    evaluator = build_evaluator(args.evaluator, _config(args))
    try:
        status = evaluator.status()
    finally:
        await evaluator.aclose()
    _print({"credentials": status.get("credentials"), "model": status.get("model"),
            "route": status.get("route"), "runs": []})
    return 0


async def _cmd_serve(args: argparse.Namespace) -> int:
    from .evaluators.select import build_evaluator
    from .serve import announce, serve, serve_key_from_env

    evaluator = build_evaluator(args.evaluator, _config(args))
    try:
        async with anyio.create_task_group() as tg:
            async def stop_on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for _ in signals:
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(stop_on_signal)
            await serve(evaluator, port=args.port, key=serve_key_from_env(), ready=announce)
    finally:
        await evaluator.aclose()
    return 0


async def _cmd_login(args: argparse.Namespace) -> int:
    from .evaluators.credentials import AuthStore

    if sys.stdin.isatty():
        key = getpass.getpass(f"API key for {args.name} (input hidden): ")
    else:
        key = sys.stdin.readline()
    try:
        AuthStore().set(args.name, key)
    except CredentialError as exc:
        sys.stderr.write(f"fabric-jev: {exc}\n")
        return 2
    sys.stderr.write(f"stored the {args.name} key in {AuthStore().path}\n")
    return 0


async def _cmd_logout(args: argparse.Namespace) -> int:
    from .evaluators.credentials import AuthStore

    removed = AuthStore().remove(args.name)
    sys.stderr.write(f"{'removed' if removed else 'no'} {args.name} key\n")
    return 0


async def _cmd_browser_launch(args: argparse.Namespace) -> int:
    try:
        from fabric_jev_browser.cli import launch_command
    except ImportError:
        sys.stderr.write("fabric-jev: the browser connector is not installed "
                         "(pip install -e connectors/browser)\n")
        return 2
    code: int = await launch_command(width=args.width, height=args.height)
    return code


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .bench import add_bench_command

    ev = sub.add_parser("evaluate", help="validate a jev.evaluate request and print the answers")
    ev.add_argument("request", help="request JSON file, or - for standard input")
    ev.add_argument("--evaluator", help=EVALUATOR_HELP)
    ev.add_argument("--config", help="host config JSON file")
    ev.set_defaults(handler=_cmd_evaluate)

    st = sub.add_parser("status", help="print host status (never runs a command or the network)")
    st.add_argument("--evaluator", help=EVALUATOR_HELP)
    st.add_argument("--config", help="host config JSON file")
    st.set_defaults(handler=_cmd_status)

    sv = sub.add_parser("serve", help="serve POST /v1/systemone on 127.0.0.1")
    sv.add_argument("--evaluator", help=EVALUATOR_HELP)
    sv.add_argument("--port", type=int, default=8787, help="0 picks a free port (printed first)")
    sv.add_argument("--config", help="host config JSON file")
    sv.set_defaults(handler=_cmd_serve)

    names = ("jev", "openrouter", "vercel-ai-gateway")
    li = sub.add_parser("login", help="store an API key in the private auth store")
    li.add_argument("name", choices=names)
    li.set_defaults(handler=_cmd_login)
    lo = sub.add_parser("logout", help="remove a stored API key")
    lo.add_argument("name", choices=names)
    lo.set_defaults(handler=_cmd_logout)

    br = sub.add_parser("browser", help="the browser connector")
    br_sub = br.add_subparsers(dest="browser_command", required=True)
    la = br_sub.add_parser("launch", help="start headless Chromium on 127.0.0.1; print its "
                           "websocket URL first; run until Ctrl-C or SIGTERM")
    la.add_argument("--width", type=int, default=1280)
    la.add_argument("--height", type=int, default=800)
    la.set_defaults(handler=_cmd_browser_launch)

    add_bench_command(sub)


__all__ = ["JevError", "add_commands"]
