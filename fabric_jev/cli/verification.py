"""Verification commands: verify bench, verify compile, verify run."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import JevError
from .common import EVALUATOR_HELP, BadInput, config_from, load_json, print_json


async def _cmd_verify_bench(args: argparse.Namespace) -> int:
    from ..evaluators.select import build_evaluator
    from ..verification.bench import ground_truth, print_report, run_bench

    if args.live:
        config = config_from(args)
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
        print_json(report)
    else:
        print_report(report)
    return code


async def _cmd_verify_compile(args: argparse.Namespace) -> int:
    from ..evaluators.select import build_evaluator
    from ..verification import compile_verification

    try:
        dictionary = load_json(args.dictionary, "dictionary")
    except BadInput as exc:
        sys.stderr.write(f"fabric-jev: {exc}\n")
        return 2
    evaluator = build_evaluator(args.evaluator, config_from(args))
    try:
        result = await compile_verification(args.intent, dictionary, evaluator)
    except JevError as exc:
        sys.stderr.write(f"fabric-jev: {exc}\n")
        return 2
    finally:
        await evaluator.aclose()
    print_json(result.to_json())
    return 0 if result.status == "ready" else 1


async def _cmd_verify_run(args: argparse.Namespace) -> int:
    from ..verification import VerificationFailed, run_verification

    try:
        from fabric_jev_browser.verification import open_browser_channels
    except ImportError:
        sys.stderr.write("fabric-jev: the browser connector is not installed\n")
        return 2
    try:
        dictionary = load_json(args.dictionary, "dictionary")
        plan = load_json(args.plan, "plan")
    except BadInput as exc:
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
    print_json({"status": result.status, "checkIds": list(result.check_ids),
            "durationsMs": {k: round(v, 1) for k, v in result.durations_ms.items()}})
    return 0


def add_verification_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
