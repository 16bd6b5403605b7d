"""`fabric-jev batch`: one program over every line of a JSON Lines file, with progress and resume."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Iterator

import anyio

from ..errors import LaunchRejected
from .common import (
    EVALUATOR_HELP,
    EXIT_INTERRUPTED,
    EXIT_NOT_COMPLETED,
    EXIT_OK,
    BadInput,
    add_command,
    add_policy_options,
    config_from,
    load_json,
)


async def batch_command(args: argparse.Namespace) -> int:
    from ..batch import BatchItem, BatchOutcome, OutputLog, Tally, count_inputs, read_inputs, run_batch
    from ..batch.display import make_display

    config = config_from(args)
    try:
        program = load_json(args.program, "program")
    except BadInput as exc:
        raise LaunchRejected(str(exc)) from None
    tally = Tally(total=count_inputs(args.inputs))
    log = OutputLog(args.out)
    earlier = log.open(resume=args.resume)
    display = make_display(tally, sys.stderr, quiet=args.quiet)
    # An `ask` is a question on this terminal, with the bar paused; Ray's actors have no terminal.
    from .prompt import terminal_approver

    approver = None if args.ray is not None else terminal_approver(config.approverTimeoutMs / 1000,
                                                                    pause=display.paused)

    def pending() -> Iterator[BatchItem]:
        for item in read_inputs(args.inputs, id_field=args.id_field):
            done = earlier.get(item.key)
            if done is None:
                yield item
            else:
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
                await run_batch(program, pending(), record, config=config, evaluator=args.evaluator,
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


def add_batch_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    b = add_command(sub, "batch", help="run a program on every line of a JSON Lines file",
                    description="Run PROGRAM on every input line; one output line per input.",
                    codes=("0 every input completed", "1 some did not", "2 a bad program or file",
                           "130 interrupted (rerun with --resume)"))
    b.add_argument("program", help="program JSON file")
    b.add_argument("--inputs", required=True, help="JSON Lines file: one program input per line")
    b.add_argument("--out", required=True, help="JSON Lines output, appended one line per input")
    b.add_argument("--resume", action="store_true", help="skip inputs already in --out")
    b.add_argument("--concurrency", type=int, help="runs at a time per host (default: the config's "
                   "maxConcurrentRuns)")
    b.add_argument("--id-field", dest="id_field", help="take each input's id from this field of the "
                   "input object (default: the line number)")
    b.add_argument("--config", help="host config JSON file")
    b.add_argument("--evaluator", help=EVALUATOR_HELP)
    add_policy_options(b)
    b.add_argument("--quiet", action="store_true", help="no progress lines, only the summary")
    b.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                   help="run on a Ray cluster (needs the ray extra): ADDRESS, or none for "
                   "RAY_ADDRESS or a new local cluster")
    b.add_argument("--actors", type=int, help="Ray actors (default: one per CPU of the cluster)")
    b.set_defaults(handler=batch_command)
