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
        # Signals are handled before the URL is announced.
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with anyio.create_task_group() as tg:
                async def stop_on_signal() -> None:
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


def _load_json(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        raise _BadInput(f"cannot read {what} {path}: {exc}") from None


class _BadInput(Exception):
    pass


async def _cmd_approve(args: argparse.Namespace) -> int:
    from .approval import ApprovalRequest, ApprovalSettings, ProposedAction, classify
    from .evaluators.http import HttpEvaluator
    from .evaluators.select import build_evaluator

    try:
        raw = _load_json(args.action, "action")
        if not isinstance(raw, dict) or not isinstance(raw.get("ref"), str) \
                or set(raw) - {"ref", "risk", "description", "arguments"}:
            raise _BadInput("the action must be an object {ref, risk?, description?, arguments?}")
        action = ProposedAction(ref=raw["ref"], risk=str(raw.get("risk", "execute")),
                                description=str(raw.get("description", "")),
                                arguments=raw.get("arguments"))
        session: Any = _load_json(args.session, "session") if args.session else {}
        if not isinstance(session, dict):
            raise _BadInput("the session must be an object {conversation?, actions?}")
        request = ApprovalRequest(user_text=args.user_text, action=action,
                                  conversation=list(session.get("conversation", [])),
                                  session_actions=list(session.get("actions", [])))
        settings = ApprovalSettings.load()
    except (_BadInput, JevError) as exc:
        sys.stderr.write(f"fabric-jev: {exc}\n")
        return 2
    evaluator: Any = None
    if args.policy == "auto":
        if args.evaluator:
            evaluator = build_evaluator(args.evaluator, _config(args))
        else:
            from .approval import parse_model_key

            model = parse_model_key(settings.model)
            evaluator = HttpEvaluator(model.route, model=model.model)
    try:
        decision = await classify(request, evaluator=evaluator, threshold=settings.threshold,
                                  policy=args.policy, headless=args.headless)
    finally:
        if evaluator is not None:
            await evaluator.aclose()
    _print(decision.to_json())
    return 0 if decision.decision == "allow" else 1


async def _cmd_settings_approvals(args: argparse.Namespace) -> int:
    from .approval import ApprovalSettings

    try:
        current = ApprovalSettings.load()
        updated = ApprovalSettings.make(args.model or current.model,
                                        current.threshold if args.threshold is None else args.threshold)
    except JevError as exc:
        sys.stderr.write(f"fabric-jev: {exc}\n")
        return 2
    if args.model is not None or args.threshold is not None:
        updated.save()
    _print({"approvals": {"model": updated.model, "threshold": updated.threshold}})
    return 0


async def _cmd_verify_bench(args: argparse.Namespace) -> int:
    from .evaluators.select import build_evaluator
    from .verification.bench import ground_truth, print_report, run_bench

    if args.live:
        config = _config(args)
        spec = args.evaluator or config.evaluator.get("kind")
        if spec is None or spec.split(":")[0] in ("local", "fixture", "cassette"):
            sys.stderr.write("fabric-jev: --live needs a configured route (--evaluator typesafe|openrouter|"
                             "vercel, or evaluator.kind in --config)\n")
            return 2
        evaluator: Any = build_evaluator(spec, config)
        mode = f"live ({spec})"
    else:
        evaluator, mode = ground_truth(), "offline (ground-truth fixture, in-memory channels)"
    try:
        report, code = await run_bench(evaluator, mode=mode)
    finally:
        await evaluator.aclose()
    if args.json:
        _print(report)
    else:
        print_report(report)
    return code


async def _cmd_verify_compile(args: argparse.Namespace) -> int:
    from .evaluators.select import build_evaluator
    from .verification import compile_verification

    try:
        dictionary = _load_json(args.dictionary, "dictionary")
    except _BadInput as exc:
        sys.stderr.write(f"fabric-jev: {exc}\n")
        return 2
    evaluator = build_evaluator(args.evaluator, _config(args))
    try:
        result = await compile_verification(args.intent, dictionary, evaluator)
    except JevError as exc:
        sys.stderr.write(f"fabric-jev: {exc}\n")
        return 2
    finally:
        await evaluator.aclose()
    _print(result.to_json())
    return 0 if result.status == "ready" else 1


async def _cmd_verify_run(args: argparse.Namespace) -> int:
    from .verification import VerificationFailed, run_verification

    try:
        from fabric_jev_browser.verification import open_browser_channels
    except ImportError:
        sys.stderr.write("fabric-jev: the browser connector is not installed\n")
        return 2
    try:
        dictionary = _load_json(args.dictionary, "dictionary")
        plan = _load_json(args.plan, "plan")
    except _BadInput as exc:
        sys.stderr.write(f"fabric-jev: {exc}\n")
        return 2
    try:
        async with open_browser_channels(args.ws_url, args.url) as channels:
            result = await run_verification(plan, dictionary, {}, channels)
    except VerificationFailed as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    except JevError as exc:
        sys.stderr.write(f"fabric-jev: {exc}\n")
        return 2
    _print({"status": result.status, "checkIds": list(result.check_ids),
            "durationsMs": {k: round(v, 1) for k, v in result.durations_ms.items()}})
    return 0


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

    ap = sub.add_parser("approve", help="classify one action: allow (exit 0), ask or deny (exit 1)")
    ap.add_argument("--action", required=True, help="action JSON {ref, risk, description, arguments}")
    ap.add_argument("--session", help="session JSON {conversation: [{role, text}], actions: [...]}")
    ap.add_argument("--user-text", dest="user_text", default=None,
                    help="the current user turn's text")
    ap.add_argument("--policy", choices=("auto", "ask", "deny", "allow"), default="auto")
    ap.add_argument("--headless", action="store_true", help="no human to ask: ask becomes deny")
    ap.add_argument("--evaluator", help="override the settings' model (e.g. fixture:FILE)")
    ap.add_argument("--config", help="host config JSON file")
    ap.set_defaults(handler=_cmd_approve)

    se = sub.add_parser("settings", help="persisted settings")
    se_sub = se.add_subparsers(dest="settings_command", required=True)
    sa = se_sub.add_parser("approvals", help="show or set the approval model and threshold")
    sa.add_argument("--model", help="pi-fabric/typesafe/jev-latest, …, or legacy jev/<model>")
    sa.add_argument("--threshold", type=float, help="0-1; allow needs safe >= threshold")
    sa.set_defaults(handler=_cmd_settings_approvals)

    ve = sub.add_parser("verify", help="verification dictionaries")
    ve_sub = ve.add_subparsers(dest="verify_command", required=True)
    vb = ve_sub.add_parser("bench", help="the 12-scenario benchmark (offline unless --live)")
    vb.add_argument("--live", action="store_true", help="compile through the configured route")
    vb.add_argument("--json", action="store_true")
    vb.add_argument("--evaluator", help="the route for --live: typesafe | openrouter | vercel")
    vb.add_argument("--config", help="host config JSON file")
    vb.set_defaults(handler=_cmd_verify_bench)
    vc = ve_sub.add_parser("compile", help="compile an intent over a dictionary into a plan")
    vc.add_argument("dictionary", help="dictionary JSON file")
    vc.add_argument("--intent", required=True)
    vc.add_argument("--evaluator", help=EVALUATOR_HELP)
    vc.add_argument("--config", help="host config JSON file")
    vc.set_defaults(handler=_cmd_verify_compile)
    vr = ve_sub.add_parser("run", help="replay a plan against a page (zero model calls)")
    vr.add_argument("dictionary", help="dictionary JSON file")
    vr.add_argument("--plan", required=True, help="plan JSON file (from verify compile)")
    vr.add_argument("--url", required=True, help="the page to verify")
    vr.add_argument("--ws-url", dest="ws_url", required=True,
                    help="browser websocket URL (from fabric-jev browser launch)")
    vr.set_defaults(handler=_cmd_verify_run)

    add_bench_command(sub)


__all__ = ["JevError", "add_commands"]
