"""`fabric-jev batch`: one program over every line of a JSON Lines file, with progress and resume."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any

import anyio

from .common import (
    EXIT_INTERRUPTED,
    EXIT_NOT_COMPLETED,
    EXIT_OK,
    EXIT_REJECTED,
    add_command,
    add_evaluator_options,
    add_policy_options,
    announce_type_errors,
    config_from,
    fail,
    positive_int,
)

if TYPE_CHECKING:
    from ..contract.config import HostConfig


async def batch_command(args: argparse.Namespace) -> int:
    from ..batch import BatchItem, BatchOutcome, OutputLog, Tally, count_inputs, read_inputs, run_batch
    from ..batch.display import make_display
    from ..batch.files import read_in_thread
    from ..program_files import load_program

    config = config_from(args)
    program = load_program(args.program)
    if args.dry_run:
        return await _dry_run(program, args, config)
    if args.out is None:
        return fail("batch needs --out FILE (or --dry-run to only check the program and the inputs)")
    # Type errors that do not refuse the program (mode warn) are said once, before any input runs.
    await announce_type_errors(program, config, args.program)
    total = count_inputs(args.inputs)  # None for a pipe: it can be read only once
    tally = Tally(total=total if total is None or args.limit is None else min(total, args.limit))
    log = OutputLog(args.out)
    earlier = log.open(resume=args.resume)

    def inputs() -> Iterator[BatchItem]:
        items = read_inputs(args.inputs, id_field=args.id_field)
        return items if args.limit is None else islice(items, args.limit)

    counted = earlier and total is not None
    if counted:
        # Counted before the bar starts, so it shows what is already done from its first frame.
        for item in inputs():
            done = earlier.get(item.key)
            if done is not None:
                tally.skip(done)
    display = make_display(tally, sys.stderr, quiet=args.quiet)
    # An `ask` is a question on this terminal, with the bar paused; Ray's actors have no terminal.
    from .prompt import NoTerminal, terminal_approver

    approver = None if args.ray is not None else terminal_approver(config.approver_timeout_ms / 1000,
                                                                    pause=display.paused)
    if args.inputs == "-" and approver is not None:
        approver = NoTerminal()  # standard input carries the inputs: it cannot answer a question too

    def pending() -> Iterator[BatchItem]:
        for item in inputs():
            done = earlier.get(item.key)
            if done is None:
                yield item
            elif not counted:
                tally.skip(done)

    async def record(outcome: BatchOutcome) -> None:
        log.append(outcome)  # one write(2): the line is on disk before it is counted
        tally.add(outcome)
        display.update(outcome)

    if args.ray is not None:
        from ..batch.ray_backend import require_ray

        require_ray()  # before anything is shown: a missing extra is one line, not a summary
    interrupted = False
    failed = True
    try:
        # A signal cancels the runs in flight; their outcomes are not written, so
        # `--resume` runs them again and nothing is lost or doubled.
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with anyio.create_task_group() as tg:
                async def stop_on_signal() -> None:
                    nonlocal interrupted
                    async for _ in signals:
                        interrupted = True
                        tg.cancel_scope.cancel()
                        return

                tg.start_soon(stop_on_signal)
                display.start()
                # Inputs are read in a thread (a pipe can wait for its writer) so that outcomes
                # are recorded and signals heard meanwhile; Ray's dispatcher reads them itself.
                reading: contextlib.AbstractAsyncContextManager[Any] = (
                    read_in_thread(pending()) if args.ray is None else contextlib.nullcontext(pending()))
                async with reading as source:
                    await run_batch(program, source, record, config=config, evaluator=args.evaluator,
                                    concurrency=args.concurrency, ray=args.ray, actors=args.actors,
                                    approver=approver)
                tg.cancel_scope.cancel()
        failed = False
    finally:
        log.close()
        # A batch that stopped on an error shows what it got done, if anything.
        display.finish(interrupted=interrupted, show_summary=not failed or tally.done > 0)
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_OK if tally.all_completed else EXIT_NOT_COMPLETED


async def _dry_run(raw_program: Any, args: argparse.Namespace, config: HostConfig) -> int:
    """Check the program as a launch would (artifact, schemas, syntax, the type check in the
    configured modes) and every input against its schema; run nothing."""
    import anyio.to_thread

    from ..batch import read_inputs
    from ..batch.files import read_in_thread
    from ..contract.program import parse_program
    from ..contract.values import ValueRejected, check_value
    from ..errors import CompileError, TypeScriptError
    from ..terminal import one_line
    from ..typecheck.checker import check_for_launch
    from ..typecheck.erasure import check_syntax

    program = parse_program(raw_program)
    try:
        # The TypeScript parser reads JavaScript too: a syntax error is found without a sandbox.
        await anyio.to_thread.run_sync(check_syntax, program.code)
    except TypeScriptError as exc:
        raise CompileError(f"Jev program does not compile: {exc}") from None
    # The launch's own check: in mode error its TypeScriptError refuses the batch (exit 2), as
    # every run of it would be refused; in mode warn the errors are reported and the batch may run.
    report = await check_for_launch(program, config, observed=False)
    if report.verdict is not None and not report.verdict.clean:
        diagnostics = report.verdict.diagnostics
        for d in diagnostics[:20]:
            sys.stderr.write(f"batch: type check ({report.mode.value}): {one_line(d.text())}\n")
        if report.verdict.cut or len(diagnostics) > 20:
            sys.stderr.write(f"batch: type check: {report.verdict.count()} in all\n")
    elif report.outcome in ("unavailable", "stopped"):
        sys.stderr.write(f"batch: type check {report.outcome}: {one_line(str(report.reason))}\n")
    checked = bad = 0
    items = read_inputs(args.inputs, id_field=args.id_field)
    # Read in a thread, as a real batch reads: a FIFO without a writer must not deafen the loop
    # to Ctrl-C and SIGTERM.
    async with read_in_thread(items if args.limit is None else islice(items, args.limit)) as source:
        async for item in source:
            checked += 1
            error = item.error
            if error is None:
                try:
                    check_value(item.value, program.input_schema, "input")
                except ValueRejected as exc:
                    error = str(exc)
            if error is not None:
                bad += 1
                if bad <= 20:
                    sys.stderr.write(f"batch: line {item.line} id {one_line(str(item.key))}: {one_line(error)}\n")
    if bad > 20:
        sys.stderr.write(f"batch: … and {bad - 20} more inputs that would be rejected\n")
    sys.stderr.write(f"batch: dry run of {one_line(program.name)}: the program is valid; {checked - bad} of "
                     f"{checked} inputs match its inputSchema; nothing was run\n")
    return EXIT_OK if bad == 0 else EXIT_NOT_COMPLETED


def add_batch_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    b = add_command(sub, "batch", help="run a program on every line of a JSON Lines file",
                    description="Run PROGRAM on every input line; one output line per input. With "
                                "--dry-run, check the program and every input and run nothing.",
                    codes=("0 every input completed (with --dry-run: every input is valid)",
                           "1 some did not (with --dry-run: some inputs would be rejected)",
                           f"{EXIT_REJECTED} a bad program or file", "130 interrupted (rerun with --resume)"))
    b.add_argument("program", help="program file: PROGRAM.ts / PROGRAM.js with its @program comment, "
                   "or the JSON artifact")
    b.add_argument("--inputs", required=True, help="JSON Lines file: one program input per line; - reads standard "
                   "input (a pipe); a device, FIFO or socket is refused")
    b.add_argument("--out", help="JSON Lines output, appended one line per input (required unless --dry-run)")
    b.add_argument("--resume", action="store_true", help="skip inputs already in --out")
    b.add_argument("--limit", type=positive_int, metavar="N",
                   help="only the first N inputs of the file (a resumed batch counts the same N)")
    b.add_argument("--dry-run", dest="dry_run", action="store_true",
                   help="check the program as a launch would (its artifact, schemas, syntax and type check: "
                   "a TypeScript program with type errors is refused) and every input against its "
                   "inputSchema; run nothing and write nothing")
    b.add_argument("--concurrency", type=int, help="runs at a time per host (default: the config's "
                   "maxConcurrentRuns)")
    b.add_argument("--id-field", dest="id_field", help="take each input's id from this field of the "
                   "input object (default: the line number)")
    add_evaluator_options(b, config=True)
    add_policy_options(b)
    b.add_argument("--quiet", action="store_true", help="no progress lines, only the summary")
    b.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                   help="run on a Ray cluster (needs the ray extra): ADDRESS, or none for "
                   "RAY_ADDRESS or a new local cluster")
    b.add_argument("--actors", type=int, help="Ray actors (default: one per CPU of the cluster)")
    b.set_defaults(handler=batch_command)
