"""`fabric-jev eval`: how well a program judges, over a labeled dataset, evaluator × variant."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import TYPE_CHECKING

import anyio

from .common import (
    CONFIG_HELP,
    EXIT_INTERRUPTED,
    EXIT_NOT_COMPLETED,
    EXIT_OK,
    EXIT_REJECTED,
    PROFILE_HELP,
    BadInput,
    add_command,
    add_policy_options,
    config_from,
    fail,
    load_json,
    positive_int,
    print_json,
)

if TYPE_CHECKING:
    from ..evals.compare import EvalSettings
    from ..evals.dataset import BadLine
    from ..evals.records import EvalRecord
    from ..evals.summary import EvalSummary


def _pair(text: str, what: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return name.strip(), value.strip()


def variant_option(text: str) -> tuple[str, str]:
    return _pair(text, "NAME=FILE")


def fail_under_option(text: str) -> tuple[str, float]:
    name, value = _pair(text, "METRIC=VALUE (for example pass_rate=0.9)")
    try:
        number = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number (0.9 or 90%)") from None
    if not 0 <= number <= 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a rate from 0 to 1 (or 0% to 100%)")
    return name, number


def tolerance_option(text: str) -> tuple[str, int | float]:
    """`0.5` (every number) or `FIELD=0.5`; `2` stays the integer 2 in what eval writes."""
    name, sep, value = text.rpartition("=")
    if not sep:
        name = "*"
    try:
        # An integer as written stays one (a settings file's 2 is 2, not 2.0); anything else is a float.
        number: int | float = int(value) if value.strip().lstrip("+").isdigit() else float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a tolerance: NUMBER or FIELD=NUMBER") from None
    if not number >= 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a tolerance is a finite number ≥ 0")
    return name or "*", number


def _settings(args: argparse.Namespace) -> EvalSettings | None:
    from ..evals.compare import EvalSettings, parse_settings

    settings: EvalSettings | None = None
    if args.settings:
        raw = load_json(args.settings, "eval settings")
        try:
            settings = parse_settings(raw, f"settings {args.settings}")
        except ValueError as exc:
            raise BadInput(str(exc)) from None
    if args.tolerance or args.match:
        given = EvalSettings(match=args.match, tolerance=dict(args.tolerance or ()))
        settings = (settings or EvalSettings()).merged(given)
    return settings


def _check_gates(gates: list[tuple[str, float]], fields: set[str]) -> None:
    for metric, _ in gates:
        if metric != "pass_rate" and metric not in fields:
            known = ", ".join(["pass_rate", *sorted(fields)])
            raise BadInput(f"--fail-under {metric}: no such metric; the dataset's are {known}")


def _gated(summary: EvalSummary, gates: list[tuple[str, float]]) -> list[str]:
    failures = []
    for cell in summary.cells:
        for metric, floor in gates:
            if metric == "pass_rate":
                value: float | None = cell.pass_rate
            else:
                found = cell.fields.get(metric)
                value = found.accuracy if found is not None else None
            if value is not None and value < floor:
                failures.append(f"{metric} of {cell.name} is {value:.3f}, under {floor:g}")
    return failures


async def eval_command(args: argparse.Namespace) -> int:
    if args.compare:
        return _compare(args)
    if args.program is None or args.dataset is None:
        return fail("eval needs PROGRAM and --dataset FILE (or --compare A.json B.json)")
    if args.resume and args.out is None:
        return fail("--resume continues an --out folder: give --out DIR")
    if args.actors is not None and args.ray is None:
        return fail("--actors is the number of Ray actors: give --ray too")
    from ..batch import BatchOutcome, Tally
    from ..batch.display import make_display
    from ..evals.compare import leaves
    from ..evals.dataset import read_dataset
    from ..evals.engine import run_eval, variants_of

    config = config_from(args)
    settings = _settings(args)
    matrix = variants_of(args.program, dict(args.variant or ()))
    base = matrix[0].program
    dataset = await anyio.to_thread.run_sync(lambda: read_dataset(
        args.dataset, input_schema=base.input_schema, output_schema=base.output_schema, split=args.split))
    _check_gates(args.fail_under or [], {path for case in dataset.cases for path, _ in leaves(case.expected)})
    from ..terminal import one_line

    for bad in dataset.bad[:20]:
        sys.stderr.write(f"eval: {one_line(bad.error)}\n")
    if len(dataset.bad) > 20:
        sys.stderr.write(f"eval: … and {len(dataset.bad) - 20} more bad lines (the summary lists them all)\n")
    if not dataset.cases:
        return fail(f"dataset {args.dataset} has no line that can run ({len(dataset.bad)} bad lines)")
    if args.ray is not None:
        from ..batch.ray_backend import require_ray

        require_ray()  # before anything is shown: a missing extra is one line
    tally = Tally()
    display = make_display(tally, sys.stderr, quiet=args.quiet or args.json, name="eval")
    from .prompt import terminal_approver

    # An `ask` is a question on this terminal, with the bar paused; Ray's actors have no terminal.
    approver = None if args.ray is not None else terminal_approver(config.approver_timeout_ms / 1000,
                                                                    pause=display.paused)

    def started(total: int, skipped: int) -> None:
        tally.total = total
        tally.skipped = skipped
        display.start()

    def progressed(outcome: BatchOutcome) -> None:
        tally.add(outcome)
        display.update(outcome)

    interrupted = False
    summary: EvalSummary | None = None
    try:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with anyio.create_task_group() as tg:
                async def stop_on_signal() -> None:
                    nonlocal interrupted
                    async for _ in signals:
                        interrupted = True
                        tg.cancel_scope.cancel()
                        return

                tg.start_soon(stop_on_signal)
                summary = await run_eval(
                    base, dataset, evaluators=args.evaluator or (),
                    variants={v.name: v.program for v in matrix[1:]},
                    config=config, settings=settings, concurrency=args.concurrency, out=args.out,
                    resume=args.resume, approver=approver, on_start=started, on_outcome=progressed,
                    ray=args.ray, actors=args.actors)
                tg.cancel_scope.cancel()
    finally:
        display.finish(interrupted=interrupted, show_summary=False)
    if interrupted or summary is None:
        where = f"; rerun with --resume --out {args.out}" if args.out else ""
        sys.stderr.write(f"eval: interrupted{where}\n")
        return EXIT_INTERRUPTED
    if args.report:
        await _report(args, summary)
    if args.json:
        print_json(summary.to_json())
    else:
        from ..evals.text import format_summary

        sys.stdout.write(format_summary(summary) + "\n")
        if args.out:
            sys.stdout.write(f"\nresults: {args.out}/results.jsonl, summary: {args.out}/summary.json\n")
    failures = _gated(summary, args.fail_under or [])
    for failure in failures:
        sys.stderr.write(f"eval: --fail-under: {failure}\n")
    return EXIT_NOT_COMPLETED if failures else EXIT_OK


async def _report(args: argparse.Namespace, summary: EvalSummary) -> None:
    import anyio.to_thread

    from ..evals.report import write_report

    records: list[EvalRecord | BadLine] | None = None
    if args.out:
        from ..evals.files import RESULTS, read_results

        records = await anyio.to_thread.run_sync(lambda: list(read_results(f"{args.out}/{RESULTS}")))
    written = await anyio.to_thread.run_sync(lambda: write_report(summary, args.report, results=records))
    for note in written.notes:
        sys.stderr.write(f"eval: {note}\n")
    sys.stderr.write(f"eval: report {written.page}\n")


def _compare(args: argparse.Namespace) -> int:
    from ..evals.diff import diff_evals
    from ..evals.files import read_results, read_summary, results_beside
    from ..evals.records import EvalRecord
    from ..evals.text import format_diff

    if args.program is not None or args.dataset is not None:
        return fail("--compare reads two summaries; it takes no PROGRAM or --dataset")
    first, second = args.compare
    before, after = read_summary(first), read_summary(second)
    one, two = results_beside(first), results_beside(second)
    records = None
    if one is not None and two is not None:
        records = ([r for r in read_results(one) if isinstance(r, EvalRecord)],
                   [r for r in read_results(two) if isinstance(r, EvalRecord)])
    diff = diff_evals(before, after, names=(first, second), records=records)
    if args.json:
        print_json(diff.model_dump(mode="json"))
    else:
        sys.stdout.write(format_diff(diff) + "\n")
    return EXIT_OK


def add_eval_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    e = add_command(
        sub, "eval", help="measure how well a program judges, over a labeled dataset",
        description="Run PROGRAM on every line of a labeled dataset (JSON Lines {input, expected}, CSV, or "
                    "a Hugging Face datasets export with the datasets extra) and compare each result with its "
                    "expected value: the pass rate with a 95% interval, per-field accuracy, confusion "
                    "matrices and mean absolute errors, the agreement and calibration of each question, "
                    "cost and latency, the worst lines. Repeat --evaluator and --variant for a matrix; "
                    "cells are compared with McNemar's paired test. See docs/eval.md.",
        codes=("0 done (and every --fail-under met)", "1 a --fail-under metric is under its value",
               f"{EXIT_REJECTED} a bad program, dataset, folder or option", "130 interrupted (rerun with --resume)"))
    e.add_argument("program", nargs="?", help="program file: PROGRAM.ts / PROGRAM.js with its @program comment, "
                   "or the JSON artifact")
    e.add_argument("--dataset", metavar="FILE", help="labeled lines: .jsonl, .csv/.tsv, .parquet, .arrow, or a "
                   "folder written by datasets' save_to_disk")
    e.add_argument("--split", help="the split of a datasets folder (default: test, or its only split)")
    e.add_argument("--evaluator", action="append", metavar="SPEC",
                   help="an evaluator: local | fixture:FILE | cassette:FILE | typesafe | openrouter | vercel | "
                   "any route spec (default: the config's, else local); repeat for a matrix")
    e.add_argument("--variant", action="append", type=variant_option, metavar="NAME=FILE",
                   help="the same program with other wording, compared with PROGRAM (named base); repeatable")
    e.add_argument("--tolerance", action="append", type=tolerance_option, metavar="[FIELD=]NUMBER",
                   help="how far a number may be from its expected value: for every number, or one field; "
                   "repeatable (the dataset's header and --settings may give them too)")
    e.add_argument("--match", choices=("partial", "whole"), help="partial (default): only the expected "
                   "value's fields are compared; whole: a field the result has beyond them fails too")
    e.add_argument("--settings", metavar="FILE", help="eval settings JSON {match, tolerance, questions}: "
                   "as a JSON Lines dataset's header line, for CSV and Arrow datasets")
    e.add_argument("--concurrency", type=int, help="runs at a time (per Ray actor with --ray; default: the "
                   "config's maxConcurrentRuns)")
    e.add_argument("--out", metavar="DIR", help="write results.jsonl (every line, with every answer and who "
                   "gave it), summary.json and manifest.json (what the eval is made of) there")
    e.add_argument("--resume", action="store_true", help="continue the eval in --out DIR: lines already there "
                   "are not run again; refused if its program, evaluators, dataset or settings changed")
    e.add_argument("--report", metavar="DIR", help="write a self-contained HTML report (index.html) and PNG "
                   "charts there (charts need the report extra)")
    e.add_argument("--json", action="store_true", help="print the summary as JSON on standard output")
    e.add_argument("--fail-under", dest="fail_under", action="append", type=fail_under_option,
                   metavar="METRIC=VALUE", help="exit 1 when a cell's pass_rate, or a field's accuracy (by "
                   "the field's name), is under VALUE (0.9 or 90%%); repeatable")
    e.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"), help="what changed between two evals "
                   "(their summary.json files or --out folders): totals, and line by line when their "
                   "results.jsonl are beside them")
    e.add_argument("--config", help=CONFIG_HELP)
    e.add_argument("--profile", metavar="FILE", help=PROFILE_HELP)
    add_policy_options(e)
    e.add_argument("--quiet", action="store_true", help="no progress lines")
    e.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                   help="run the cells on a Ray cluster (needs the ray extra): ADDRESS, or none for "
                   "RAY_ADDRESS or a new local cluster; evaluators are specs, built on each actor")
    e.add_argument("--actors", type=positive_int, metavar="N", help="Ray actors (default: one per CPU of the cluster)")
    e.set_defaults(handler=eval_command)
