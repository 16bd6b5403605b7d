"""`fabric-jev bench`: medians and ratios, each next to a floor or a peer measured in the same run.

Nothing here is a test: numbers are printed (and recorded by hand in
docs/performance.md), never asserted. Peers live in the `bench` extra.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .common import add_command, positive_int

if TYPE_CHECKING:
    from ..plugins import BenchSuite

#: Every suite, in the order `all` runs them; `browser` is the browser connector's (its plugin adds it).
SUITES = ("host", "evaluators", "browser", "batch", "eval", "cli", "soak", "pytest", "typecheck", "rules",
          "redaction")


class _Choices:
    """The suites `bench` takes: the core's (and the known connectors'), then those other plugins
    add once the parser is built, then `all`."""

    def __init__(self, added: dict[str, BenchSuite]) -> None:
        self._added = added

    def _names(self) -> list[str]:
        return [*SUITES, *(name for name in self._added if name not in SUITES), "all"]

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())


def _plugin_suite(name: str, added: dict[str, BenchSuite]) -> BenchSuite:
    """A suite a plugin added; for a known connector's suite without it, ConfigError saying how to get it."""
    from ..errors import ConfigError
    from ..plugins import KNOWN_BENCH_SUITES, load_plugin

    found = added.get(name)
    if found is not None:
        return found
    owner = next(connector for connector, suites in KNOWN_BENCH_SUITES.items() if name in suites)
    load_plugin(owner)  # raises "not installed" with the install command
    raise ConfigError(f"the {owner} connector does not provide the bench suite {name}")


async def _run(args: argparse.Namespace) -> int:
    from ..plugins import KNOWN_BENCH_SUITES

    added: dict[str, BenchSuite] = args.plugin_suites
    brought = {name for names in KNOWN_BENCH_SUITES.values() for name in names} | set(added)
    suites = [name for name in _Choices(added) if name != "all"] if args.suite == "all" else [args.suite]
    report: dict[str, Any] = {}
    for suite in suites:
        if suite == "host":
            from ..benchmarks.host import _print_host, _print_loop_lag, bench_host, bench_loop_lag

            report["host"] = await bench_host(samples=args.samples)
            report["host"]["loop_lag"] = await bench_loop_lag()
            if not args.json:
                _print_host(report["host"])
                _print_loop_lag(report["host"]["loop_lag"])
        elif suite in brought:
            plugin_suite = _plugin_suite(suite, added)
            report[suite] = await plugin_suite.run(args.samples)
            if not args.json:
                plugin_suite.show(report[suite])
        elif suite == "cli":
            from ..benchmarks.cli import bench_cli, print_cli

            report["cli"] = await bench_cli(args.samples)
            if not args.json:
                print_cli(report["cli"])
        elif suite == "pytest":
            import anyio.to_thread

            from ..benchmarks.cassettes import bench_cassette_miss, print_cassette_miss
            from ..benchmarks.pytest_plugin import bench_pytest_plugin, print_pytest_plugin

            report["pytest"] = await anyio.to_thread.run_sync(bench_pytest_plugin, min(args.samples, 15))
            report["pytest"]["cassette_miss"] = await bench_cassette_miss(min(args.samples, 9))
            if not args.json:
                print_pytest_plugin(report["pytest"])
                print_cassette_miss(report["pytest"]["cassette_miss"])
        elif suite == "batch":
            from ..benchmarks.batch import _print_batch, bench_batch

            report["batch"] = await bench_batch()
            if not args.json:
                _print_batch(report["batch"])
        elif suite == "eval":
            from ..benchmarks.evals import bench_eval, print_eval

            report["eval"] = await bench_eval(args.samples)
            if not args.json:
                print_eval(report["eval"])
        elif suite == "soak":
            from ..benchmarks.soak import bench_soak, print_soak

            report["soak"] = await bench_soak()
            if not args.json:
                print_soak(report["soak"])
        elif suite == "typecheck":
            from ..benchmarks.typecheck import bench_typecheck, print_typecheck

            report["typecheck"] = await bench_typecheck(args.samples)
            if not args.json:
                print_typecheck(report["typecheck"])
        elif suite == "rules":
            import anyio.to_thread

            from ..benchmarks.rules import bench_rules, print_rules

            report["rules"] = await anyio.to_thread.run_sync(bench_rules, min(args.samples, 15))
            if not args.json:
                print_rules(report["rules"])
        elif suite == "redaction":
            import anyio.to_thread

            from ..benchmarks.redaction import bench_redaction, print_redaction

            report["redaction"] = await anyio.to_thread.run_sync(bench_redaction, min(args.samples, 15))
            if not args.json:
                print_redaction(report["redaction"])
        elif suite == "evaluators":
            from ..benchmarks.evaluators import _print_evaluators, bench_evaluators

            report["evaluators"] = await bench_evaluators(samples=min(args.samples, 30))
            if not args.json:
                _print_evaluators(report["evaluators"])
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 0


def add_bench_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> dict[str, BenchSuite]:
    """`fabric-jev bench`; returns where plugins add their suites (`browser` is the browser connector's)."""
    bench = add_command(
        sub, "bench", help="measure speed next to floors and peers",
        description="Measure medians and ratios, each next to a floor or a peer measured in the same "
                    "run, and print them (docs/performance.md records them). Suites: host, "
                    "evaluators, browser (needs the browser connector), batch, eval (its overhead over batch, a local "
                    "eval against one on Ray, and how fast its report opens in Chromium), "
                    "cli (whole-command start-up), "
                    "soak (1,000 mixed runs; resources before and after), pytest (what the installed "
                    "pytest plugin costs a suite that does not use it), "
                    "typecheck (what checking programs costs), rules (what permission rules add to a "
                    "capability call's decision), redaction (what redacting costs, and its false "
                    "positives on ordinary text).",
        codes=("0 measured", "2 a suite's missing piece (for example the browser connector)"))
    suites: dict[str, BenchSuite] = {}
    bench.add_argument("suite", nargs="?", default="all", choices=_Choices(suites),
                       help="which suite to run (default all)")
    bench.add_argument("--samples", type=positive_int, default=50,
                       help="samples per figure (default 50; the cli, pytest, rules and redaction suites take "
                            "at most 15)")
    bench.add_argument("--json", action="store_true", help="print the raw report as JSON")
    bench.set_defaults(handler=_run, plugin_suites=suites)
    return suites
