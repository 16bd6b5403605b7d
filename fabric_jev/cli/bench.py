"""`fabric-jev bench`: medians and ratios, each next to a floor or a peer measured in the same run.

Nothing here is a test: numbers are printed (and recorded by hand in
docs/performance.md), never asserted. Peers live in the `bench` extra.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..benchmarks.browser import _print_browser, bench_browser
from ..benchmarks.evaluators import _print_evaluators, bench_evaluators
from ..benchmarks.host import _print_host, _print_loop_lag, bench_host, bench_loop_lag

SUITES = ("host", "evaluators", "browser", "batch")


async def _run(args: argparse.Namespace) -> int:
    suites = SUITES if args.suite == "all" else (args.suite,)
    report: dict[str, Any] = {}
    for suite in suites:
        if suite == "host":
            report["host"] = await bench_host(samples=args.samples)
            report["host"]["loop_lag"] = await bench_loop_lag()
            if not args.json:
                _print_host(report["host"])
                _print_loop_lag(report["host"]["loop_lag"])
        elif suite == "browser":
            report["browser"] = await bench_browser()
            if not args.json:
                _print_browser(report["browser"])
        elif suite == "batch":
            from ..benchmarks.batch import _print_batch, bench_batch

            report["batch"] = await bench_batch()
            if not args.json:
                _print_batch(report["batch"])
        elif suite == "evaluators":
            report["evaluators"] = await bench_evaluators(samples=min(args.samples, 30))
            if not args.json:
                _print_evaluators(report["evaluators"])
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 0


def add_bench_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser("bench", help="measure speed next to floors and peers")
    bench.add_argument("suite", nargs="?", default="all", choices=(*SUITES, "all"))
    bench.add_argument("--samples", type=int, default=50)
    bench.add_argument("--json", action="store_true", help="print the raw report as JSON")
    bench.set_defaults(handler=_run)
