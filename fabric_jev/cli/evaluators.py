"""Evaluator commands: evaluate, status, serve, login, logout."""

from __future__ import annotations

import argparse
import math
import socket
import sys
from typing import Any

from .common import (
    CONFIG_HELP,
    EXIT_NOT_COMPLETED,
    EXIT_REJECTED,
    MAX_SMALL_FILE_BYTES,
    BadInput,
    add_command,
    add_evaluator_options,
    config_from,
    fail,
    load_json,
    print_json,
)

#: `login`/`logout` take the names `--evaluator` takes; the auth store's own names still work.
LOGIN_CHOICES = ("typesafe", "openrouter", "vercel", "openai", "anthropic", "jev", "vercel-ai-gateway")
LOGIN_HELP = "typesafe | openrouter | vercel | openai | anthropic (also: jev, vercel-ai-gateway)"


async def _cmd_evaluate(args: argparse.Namespace) -> int:
    from ..contract.evaluation import validate_request
    from ..errors import EvaluationError
    from ..evaluators.select import build_evaluator

    config = config_from(args)
    try:
        raw = load_json(args.request, "request", max_bytes=max(config.max_request_bytes * 8, MAX_SMALL_FILE_BYTES))
    except BadInput as exc:
        return fail(str(exc))
    try:
        request = validate_request(raw, max_bytes=config.max_request_bytes)
    except EvaluationError as exc:
        return fail(f"invalid request: {exc}")
    evaluator = build_evaluator(args.evaluator, config)
    try:
        problem = evaluator.status().problem
        if problem:
            return fail(problem)
        evaluation = await evaluator.evaluate(request, timeout=config.request_timeout_ms / 1000)
    except EvaluationError as exc:
        return fail(f"evaluation failed: {exc}", 1)
    finally:
        await evaluator.aclose()
    print_json(evaluation.to_json())
    return 0


async def _cmd_status(args: argparse.Namespace) -> int:
    from ..evaluators.base import EvaluatorStatus
    from ..evaluators.select import build_evaluator, disabled_routes, select
    from ..evaluators.status import format_report, status_report

    config = config_from(args)
    selected: EvaluatorStatus | None = None
    if select(args.evaluator, config).route not in disabled_routes(config):
        # The evaluator the host would use, built (a bad fixture or cassette file is exit 2) but
        # never asked anything: its status is presence only.
        evaluator = build_evaluator(args.evaluator, config)
        try:
            selected = evaluator.status()
        finally:
            await evaluator.aclose()
    report = status_report(args.evaluator, config, selected)
    report["runs"] = []
    from ..typecheck.checker import checker_status

    checker = checker_status(config)  # the modes, and the compiler or why there is none
    report["typecheck"] = checker.to_json()
    if args.json:
        print_json(report)
    else:
        compiler = checker.compiler if checker.available else f"none ({checker.reason})"
        sys.stdout.write(format_report(report) + f"\ntype checker: {compiler}; TypeScript {checker.typescript}, "
                         f"JavaScript {checker.javascript}\n")
    if report["ready"]:
        return 0
    # A script can test the exit status; the report above (or its JSON) says why.
    from ..terminal import one_line

    sys.stderr.write(f"fabric-jev: status: the chosen route {one_line(str(report['route']))} is not ready: "
                     f"{one_line(str(report.get('problem') or 'no reason given'))}\n")
    return EXIT_NOT_COMPLETED


def _serve_tls(args: argparse.Namespace) -> tuple[str, str | None]:
    """The scheme, and the key file's password read from its file; ConfigError on a bad option or
    a certificate, key or password uvicorn would refuse (checked now: one line, before any start)."""
    from .._files import open_regular
    from ..errors import ConfigError

    if args.ssl_certfile is None:
        if args.ssl_keyfile is not None or args.ssl_keyfile_password_file is not None:
            raise ConfigError("serve: --ssl-keyfile and --ssl-keyfile-password-file need --ssl-certfile")
        return "http", None
    password = None
    if args.ssl_keyfile_password_file is not None:
        with open_regular(args.ssl_keyfile_password_file, label="key password file",
                          error=lambda m: ConfigError(m)) as f:
            password = f.read(4097).decode("utf-8", "replace").strip("\r\n")
    import ssl

    try:  # what uvicorn does with them (load_cert_chain), once here for a one-line refusal
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(args.ssl_certfile, args.ssl_keyfile,
                                                                password or None)
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or type(exc).__name__
        key = f" and key {args.ssl_keyfile}" if args.ssl_keyfile else ""
        raise ConfigError(f"serve: cannot load the TLS certificate {args.ssl_certfile}{key}: {reason}") from None
    return "https", password


async def _cmd_serve(args: argparse.Namespace) -> int:

    from .._bearer import read_token_file, require_token
    from .._signals import stopped_by_signals
    from ..errors import ConfigError
    from ..evaluators.select import build_evaluator
    from ..serve import ListenError, ServeLimits, announce, listen, serve, serve_key_from_env

    try:
        tokens = [read_token_file(path) for path in args.token_file or ()]
        require_token(args.host, tokens[0] if tokens else None, command="serve")
        scheme, password = _serve_tls(args)
    except ConfigError as exc:
        return fail(str(exc))
    # Token files win over FABRIC_JEV_SERVE_KEY, which counts only on loopback (require_token above).
    key: str | list[str] | None = tokens or serve_key_from_env()
    try:
        sock = listen(args.port, args.host)  # before the evaluator loads: a busy port is one line, at once
    except ListenError as exc:
        sys.stderr.write(f"fabric-jev: serve: {exc.strerror}\n")
        return EXIT_REJECTED
    try:
        evaluator = build_evaluator(args.evaluator, config_from(args))
    except BaseException:
        sock.close()
        raise
    try:
        problem = evaluator.status().problem
        if problem:
            sock.close()
            return fail(problem)
        options: dict[str, Any] = {
            "key": key, "log_level": args.log_level, "access_log": not args.no_access_log,
            "limits": ServeLimits(request_timeout_s=args.request_timeout),
            "client_requests": args.client_requests, "ssl_certfile": args.ssl_certfile,
            "ssl_keyfile": args.ssl_keyfile, "ssl_keyfile_password": password}
        if args.workers > 1:
            await evaluator.aclose()  # each worker builds its own
            return await _serve_workers(args, sock, scheme, options)
        # Signals are handled before the URL is announced.
        async with stopped_by_signals():
            await serve(evaluator, sock=sock, ready=lambda port: announce(port, args.host, scheme), **options)
    finally:
        await evaluator.aclose()
    return 0


async def _serve_workers(args: argparse.Namespace, sock: socket.socket, scheme: str, options: dict[str, Any]) -> int:
    """`--workers N`: the parent starts N workers on `sock`, announces once all are ready, and
    stops them all on SIGINT or SIGTERM."""
    import anyio
    import anyio.to_thread

    from .._signals import stopped_by_signals
    from ..serve import announce
    from ..serve.workers import WorkerFailed, WorkerOptions, Workers

    limits = options["limits"]
    workers = Workers(args.workers, sock, WorkerOptions(args.evaluator, config_from(args), options,
                                                        grace_s=limits.shutdown_grace_s + 1))
    failed: str | None = None
    try:
        async with stopped_by_signals():
            try:
                await workers.start()
            except WorkerFailed as exc:
                failed = str(exc)
            else:
                announce(sock.getsockname()[1], args.host, scheme)
                await workers.watch()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(workers.stop)
        sock.close()
    return fail(failed) if failed else 0


def _positive_count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 100_000:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number from 1 to 100000")
    return int(text)


def _timeout_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 1 <= value <= 3600:  # NaN too
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds from 1 to 3600")
    return value


def _store_name(name: str) -> str:
    from ..evaluators.llm_routes import LLM_ROUTES
    from ..evaluators.routes import get_route

    return LLM_ROUTES[name].store_key if name in LLM_ROUTES else get_route(name).store_key


async def _cmd_login(args: argparse.Namespace) -> int:
    import getpass

    from ..evaluators.credentials import AuthStore

    if sys.stdin.isatty():
        key = getpass.getpass(f"API key for {args.name} (input hidden): ")
    else:
        key = sys.stdin.readline()
    store = AuthStore()
    store.set(_store_name(args.name), key)
    sys.stderr.write(f"stored the {args.name} key in {store.path}\n")
    return 0


async def _cmd_logout(args: argparse.Namespace) -> int:
    from ..evaluators.credentials import AuthStore

    removed = AuthStore().remove(_store_name(args.name))
    sys.stderr.write(f"{'removed the' if removed else 'there was no'} {args.name} key\n")
    return 0


def add_evaluator_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ev = add_command(
        sub, "evaluate", help="validate a jev.evaluate request and print the answers",
        description="Validate one jev.evaluate request (contract §5) and print the evaluator's answers "
                    "as JSON. With no route configured the offline local evaluator answers: a "
                    "heuristic, not a decision model.",
        codes=("0 answered", "1 the evaluator failed (upstream error, invalid answer)",
               "2 bad request file, config or evaluator, or the local model is not installed"))
    ev.add_argument("request", help="request JSON file {state, questions, model?}, or - for standard input")
    add_evaluator_options(ev, config=True)
    ev.set_defaults(handler=_cmd_evaluate)

    st = add_command(
        sub, "status", help="show which evaluator would answer and every route's readiness",
        description="Print which evaluator the host would use and the rule that picked it, and for "
                    "each route (local, typesafe, openrouter, vercel-ai-gateway, openai, ollama, anthropic, "
                    "gguf): enabled or "
                    "disabled, offline or online, where its key would come from and why it is not "
                    "ready. `ready` is false without a key for the chosen route, without the "
                    "local evaluator's weights, or, for gguf, without llama.cpp's server installed. Keys are "
                    "checked for presence only: never run a credential command, never use the network, "
                    "never start a gguf server.",
        codes=("0 the chosen route is ready", "1 it is not (the report says why; so does a line on stderr)",
               "2 bad config or evaluator"))
    add_evaluator_options(st, config=True)
    st.add_argument("--json", action="store_true", help="print the report as JSON")
    st.set_defaults(handler=_cmd_status)

    sv = add_command(
        sub, "serve", help="serve POST /v1/systemone on 127.0.0.1",
        description="Serve the evaluator over HTTP on 127.0.0.1, or on --host (POST /v1/systemone, the "
                    "TypeSafe wire format). The base URL is printed first, on standard output; the log "
                    "(one access line per request, as uvicorn writes it) goes to standard error. "
                    "FABRIC_JEV_SERVE_KEY, when set, is the bearer key clients must send on loopback; "
                    "--token-file wins over it, and beyond loopback is required. Runs until "
                    "Ctrl-C or SIGTERM.",
        codes=("0 stopped by a signal",
               "2 bad config, evaluator, port, token file or TLS files, a host beyond loopback "
               "without --token-file, or the local model is not installed"))
    add_evaluator_options(sv, config=False)
    # Range checked by serve.listen, which says so in one line (as for a busy port).
    sv.add_argument("--port", type=int, default=8787,
                    help="TCP port (default 8787; 0 picks a free one)")
    sv.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1); beyond loopback, --token-file is required")
    sv.add_argument("--token-file", dest="token_file", action="append", metavar="FILE",
                    help="a file only you can read, holding one bearer token (at least 16 characters); "
                         "repeat it for one token per client")
    sv.add_argument("--workers", type=_positive_count, default=1, metavar="N",
                    help="processes answering on the one port, each with its own evaluator (default 1)")
    sv.add_argument("--client-requests", dest="client_requests", type=_positive_count, metavar="N",
                    help="requests in flight per client (its token, else its address); past it, 429 with "
                         "Retry-After (default: no such limit)")
    sv.add_argument("--ssl-certfile", dest="ssl_certfile", metavar="FILE",
                    help="serve HTTPS with this certificate (PEM), as uvicorn's option")
    sv.add_argument("--ssl-keyfile", dest="ssl_keyfile", metavar="FILE",
                    help="the certificate's private key (PEM), if not in the certificate file")
    sv.add_argument("--ssl-keyfile-password-file", dest="ssl_keyfile_password_file", metavar="FILE",
                    help="a file holding the private key's password (never on the command line)")
    sv.add_argument("--config", help=CONFIG_HELP)
    sv.add_argument("--log-level", dest="log_level", default="info",
                    choices=("critical", "error", "warning", "info", "debug", "trace"),
                    help="what the log on standard error shows (default: info, with the access log)")
    sv.add_argument("--no-access-log", dest="no_access_log", action="store_true",
                    help="no line per request (the rest of the log stays)")
    sv.add_argument("--request-timeout", dest="request_timeout", type=_timeout_seconds, default=60.0,
                    metavar="SECONDS",
                    help="the most one evaluation may take, upstream included (default 60; 1-3600): a "
                         "slow local model reading a large choice in rounds may need more")
    sv.set_defaults(handler=_cmd_serve)

    li = add_command(
        sub, "login", help="store an API key for a route in the private auth store",
        description="Store an API key for one upstream route. The key is read without echo from the "
                    "terminal, or as one line from standard input. Route names are the ones "
                    "--evaluator takes (openai and anthropic: the model routes' keys; ollama needs none).",
        codes=("0 stored", "2 empty or multi-line key"))
    li.add_argument("name", choices=LOGIN_CHOICES, metavar="ROUTE",
                    help=LOGIN_HELP)
    li.set_defaults(handler=_cmd_login)
    lo = add_command(sub, "logout", help="remove a route's stored API key",
                     description="Remove one route's key from the auth store.",
                     codes=("0 removed, or there was none",))
    lo.add_argument("name", choices=LOGIN_CHOICES, metavar="ROUTE",
                    help=LOGIN_HELP)
    lo.set_defaults(handler=_cmd_logout)
