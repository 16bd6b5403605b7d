"""Verification commands: verify bench, verify compile (the browser connector adds verify run)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import (
    CONFIG_HELP,
    EVALUATOR_HELP,
    MAX_DICTIONARY_BYTES,
    BadInput,
    add_command,
    config_from,
    fail,
    load_json,
    print_json,
)


async def _cmd_verify_bench(args: argparse.Namespace) -> int:
    from ..benchmarks.verification import ground_truth, print_report, run_bench
    from ..evaluators.select import build_evaluator

    if args.live:
        config = config_from(args)
        spec = args.evaluator or config.evaluator.get("kind")
        if spec is None or spec.split(":")[0] in ("local", "fixture", "cassette"):
            return fail("--live needs a configured route (--evaluator typesafe|openrouter|"
                        "vercel, or evaluator.kind in --config)")
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
    from ..errors import JevError
    from ..evaluators.select import build_evaluator
    from ..verification import compile_verification

    try:
        dictionary = load_json(args.dictionary, "dictionary", max_bytes=MAX_DICTIONARY_BYTES)
    except BadInput as exc:
        return fail(str(exc))
    evaluator = build_evaluator(args.evaluator, config_from(args))
    try:
        problem = evaluator.status().problem
        if problem:
            return fail(problem)
        result = await compile_verification(args.intent, dictionary, evaluator)
    except JevError as exc:
        return fail(str(exc))
    finally:
        await evaluator.aclose()
    print_json(result.to_json())
    if result.status == "ready":
        return 0
    # Standard output is often a file (`> plan.json`): the reason must reach the terminal too.
    from ..terminal import one_line

    reason = result.reason or "no reason given"
    sys.stderr.write(f"fabric-jev: verify compile: the plan is {one_line(result.status)}, not ready: "
                     f"{one_line(reason)}; nothing to run\n")
    return 1


def add_verification_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]
                              ) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """`fabric-jev verify` and its core commands; returns the group, where plugins add theirs."""
    ve = add_command(sub, "verify", help="verification dictionaries: compile once, replay without a model",
                     description="Compile an intent into a plan over a checked-in dictionary of "
                                 "assertions (one evaluator call), then replay the plan any number of "
                                 "times with zero model calls. See docs/verification.md.",
                     codes=("0 success", "1 not ready, a failed check or a failed benchmark",
                            "2 bad input, configuration or a missing connector"))
    ve_sub = ve.add_subparsers(dest="verify_command", required=True, metavar="COMMAND")
    vb = add_command(ve_sub, "bench", help="the 12-scenario benchmark (offline unless --live)",
                     description="Compile and replay 12 synthetic scenarios; offline with a "
                                 "ground-truth fixture evaluator and in-memory channels, or --live "
                                 "through a configured route.",
                     codes=("0 every scenario as expected",
                            "1 a wrong selection, a replay failure or a broken negative control",
                            "2 missing configuration, an unavailable route or abstentions"))
    vb.add_argument("--live", action="store_true", help="compile through the configured route")
    vb.add_argument("--json", action="store_true", help="print the report as JSON")
    vb.add_argument("--evaluator", help="the route for --live: typesafe | openrouter | vercel")
    vb.add_argument("--config", help=CONFIG_HELP)
    vb.set_defaults(handler=_cmd_verify_bench)
    vc = add_command(ve_sub, "compile", help="compile an intent over a dictionary into a plan",
                     description="Ask the evaluator once which of the dictionary's checks verify the "
                                 "intent; print the compile result as JSON. Its output can be passed "
                                 "to `verify run --plan` as it is. Try it offline with "
                                 "examples/verify (see its README).",
                     codes=("0 ready (a plan was printed)", "1 incomplete (no plan; see reason)",
                            "2 bad dictionary, configuration or evaluator"))
    vc.add_argument("dictionary", help="dictionary JSON file")
    vc.add_argument("--intent", required=True, help="what should be true, in plain words")
    vc.add_argument("--evaluator", help=EVALUATOR_HELP)
    vc.add_argument("--config", help=CONFIG_HELP)
    vc.set_defaults(handler=_cmd_verify_compile)
    # `verify run` replays on a page: the browser connector adds it (fabric_jev.plugins).
    return ve_sub
