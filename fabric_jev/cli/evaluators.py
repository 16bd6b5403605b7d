"""Evaluator commands: evaluate, status, serve, login, logout."""

from __future__ import annotations

import argparse
import getpass
import signal
import sys

import anyio

from ..contract.evaluation import validate_request
from ..errors import CredentialError, EvaluationError
from ..evaluators.routes import LOGIN_NAMES
from .common import EVALUATOR_HELP, EXIT_REJECTED, PROFILE_HELP, BadInput, config_from, load_json, print_json


async def _cmd_evaluate(args: argparse.Namespace) -> int:
    from ..evaluators.select import build_evaluator

    config = config_from(args)
    try:
        raw = load_json(args.request, "request")
    except BadInput as exc:
        sys.stderr.write(f"fabric-jev: {exc}\n")
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
    print_json(evaluation.to_json())
    return 0


async def _cmd_status(args: argparse.Namespace) -> int:
    from ..evaluators.select import build_evaluator

    evaluator = build_evaluator(args.evaluator, config_from(args))
    try:
        status = evaluator.status()
    finally:
        await evaluator.aclose()
    print_json({"credentials": status.get("credentials"), "model": status.get("model"),
            "route": status.get("route"), "runs": []})
    return 0


async def _cmd_serve(args: argparse.Namespace) -> int:
    from ..evaluators.select import build_evaluator
    from ..serve import ListenError, announce, listen, serve, serve_key_from_env

    try:
        sock = listen(args.port)  # before the evaluator loads: a busy port is one line, at once
    except ListenError as exc:
        sys.stderr.write(f"fabric-jev: serve: {exc.strerror}\n")
        return EXIT_REJECTED
    try:
        evaluator = build_evaluator(args.evaluator, config_from(args))
    except BaseException:
        sock.close()
        raise
    try:
        # Signals are handled before the URL is announced.
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with anyio.create_task_group() as tg:
                async def stop_on_signal() -> None:
                    async for _ in signals:
                        tg.cancel_scope.cancel()
                        return

                tg.start_soon(stop_on_signal)
                await serve(evaluator, sock=sock, key=serve_key_from_env(), ready=announce)
    finally:
        await evaluator.aclose()
    return 0


async def _cmd_login(args: argparse.Namespace) -> int:
    from ..evaluators.credentials import AuthStore

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
    from ..evaluators.credentials import AuthStore

    removed = AuthStore().remove(args.name)
    sys.stderr.write(f"{'removed' if removed else 'no'} {args.name} key\n")
    return 0


def add_evaluator_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ev = sub.add_parser("evaluate", help="validate a jev.evaluate request and print the answers")
    ev.add_argument("request", help="request JSON file, or - for standard input")
    ev.add_argument("--evaluator", help=EVALUATOR_HELP)
    ev.add_argument("--profile", metavar="FILE", help=PROFILE_HELP)
    ev.add_argument("--config", help="host config JSON file")
    ev.set_defaults(handler=_cmd_evaluate)

    st = sub.add_parser("status", help="print host status (never runs a command or the network)")
    st.add_argument("--evaluator", help=EVALUATOR_HELP)
    st.add_argument("--profile", metavar="FILE", help=PROFILE_HELP)
    st.add_argument("--config", help="host config JSON file")
    st.set_defaults(handler=_cmd_status)

    sv = sub.add_parser("serve", help="serve POST /v1/systemone on 127.0.0.1")
    sv.add_argument("--evaluator", help=EVALUATOR_HELP)
    sv.add_argument("--profile", metavar="FILE", help=PROFILE_HELP)
    sv.add_argument("--port", type=int, default=8787, help="0 picks a free port (printed first)")
    sv.add_argument("--config", help="host config JSON file")
    sv.set_defaults(handler=_cmd_serve)

    names = tuple(LOGIN_NAMES)
    li = sub.add_parser("login", help="store an API key in the private auth store")
    li.add_argument("name", choices=names)
    li.set_defaults(handler=_cmd_login)
    lo = sub.add_parser("logout", help="remove a stored API key")
    lo.add_argument("name", choices=names)
    lo.set_defaults(handler=_cmd_logout)
