"""`fabric-jev run`: one program, its envelope (or only its result) on stdout, progress on stderr."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from .common import (
    CONFIG_HELP,
    EXIT_INTERRUPTED,
    EXIT_NOT_COMPLETED,
    EXIT_OK,
    MAX_INPUT_BYTES,
    BadInput,
    add_command,
    add_evaluator_options,
    add_policy_options,
    announce_type_errors,
    config_from,
    load_json,
    load_program,
    print_json,
)

if TYPE_CHECKING:
    from ..contract.config import HostConfig
    from ..contract.provenance import Provenance


async def run_command(args: argparse.Namespace) -> int:
    from ..sandbox.pool import early_zygote

    # The sandbox's zygote starts before the host is imported: it loads the engine and forks the
    # run's worker on the other core meanwhile (docs/performance.md, "Start-up of run").
    async with early_zygote():
        return await _run(args)


async def _run(args: argparse.Namespace) -> int:
    import json
    import signal

    import anyio

    from ..contract.envelope import ProgressEvent, RunState
    from ..errors import InputInvalid, LaunchRejected
    from ..evaluators.select import build_evaluator
    from ..host import JevHost
    from . import started_up
    from .prompt import TerminalApprover, terminal_approver

    config = config_from(args)  # with the user's and the project's settings (threshold, rules)
    # One run needs one worker, the one the early zygote forks: warm spares would be forked, and
    # one more after the run took its worker, only to be killed at exit, on the cores the run needs.
    config = config.model_copy(update={"warm_workers": 0})
    if args.launch_browser:
        config = launching_browser(config)
    try:
        program = load_program(args.program)
    except BadInput as exc:
        raise LaunchRejected(str(exc)) from None
    value = _input(args)
    evaluator = build_evaluator(args.evaluator, config)
    requires = program.get("requires") if isinstance(program, dict) else None
    problem = evaluator.status().problem
    if problem and isinstance(requires, list) and "jev.evaluate" in requires:
        await evaluator.aclose()
        raise LaunchRejected(problem)
    try:
        # Type errors that do not refuse the launch (mode warn) are said before the run starts.
        await announce_type_errors(program, config, args.program)
    except BaseException:
        await evaluator.aclose()
        raise

    # An `ask` is a question on this terminal (a refusal that says so without one).
    approver = terminal_approver(config.approver_timeout_ms / 1000, save_rule=_save_rule)

    columns = _terminal_columns()

    def show(event: ProgressEvent) -> None:
        if args.quiet:
            return
        from ..terminal import fit_row, terminal_safe  # only a run that shows progress loads it

        # The program's text through the one renderer: JSON leaves C1 controls (U+009B starts an
        # escape sequence on many terminals) and bidirectional overrides as they are. On a terminal
        # the line is also cut to one row: padded to the terminal's edge, it would wrap into rows
        # of its own, and those can pass for a question fabric-jev asks.
        line = terminal_safe(f"[{event.sequence}] {json.dumps(event.value, ensure_ascii=False)}")
        if columns is not None:
            line = fit_row(line, columns)
        if isinstance(approver, TerminalApprover):
            approver.say(line)  # held while a question is open
            return
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    envelope = None
    # Signals are handled from the start: before the program launches, Ctrl-C
    # just ends the command (exit 130); afterwards it stops the run, whose
    # `cancelled` envelope is still printed.
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with JevHost(config, evaluator=evaluator, approver=approver) as host, \
                anyio.create_task_group() as tg:
            async def stop_on_signal() -> None:
                async for _ in signals:
                    runs = host.status().runs
                    if not runs:
                        tg.cancel_scope.cancel()
                        return
                    for run in runs:
                        tg.start_soon(host.stop, run.id)

            tg.start_soon(stop_on_signal)
            started_up()  # the program may run long and allocate: the collector runs again
            try:
                envelope = await host.run(program, value, on_event=show, intent=args.intent)
            except InputInvalid as exc:
                if args.input is None and args.input_json is None:
                    raise InputInvalid("no --input given and the program's inputSchema does not accept "
                                       "null; pass --input FILE (or --input - for standard input)") from None
                raise exc
            tg.cancel_scope.cancel()
    if envelope is None:
        return EXIT_INTERRUPTED
    if envelope.evaluator is not None:
        sys.stderr.write(answered_by(envelope.evaluator) + "\n")
    completed = envelope.state is RunState.COMPLETED
    if not args.result:
        print_json(envelope.to_json())
    elif completed:
        print_json(envelope.result)
    if not completed:
        # The envelope says it all, but a failure should not need jq to be seen.
        from ..terminal import one_line

        summary = f"the run ended {envelope.state.value}"
        if envelope.error:
            summary += ": " + envelope.error
        sys.stderr.write(f"fabric-jev: {one_line(summary)}\n")  # the error is the program's text
    return EXIT_OK if completed else EXIT_NOT_COMPLETED


def _save_rule(pattern: str, scope: str) -> str:
    """Keep a pattern confirmed at the prompt (`a`) in the project's or the user's settings."""
    from ..approval.settings import save_rule

    return str(save_rule(pattern, scope))


def _terminal_columns() -> int | None:
    """Standard error's width when it is a terminal, else None (a file or a pipe takes whole lines)."""
    import os

    try:
        if not os.isatty(2):
            return None
        return os.get_terminal_size(2).columns or 80
    except OSError:
        return None


def launching_browser(config: HostConfig) -> HostConfig:
    """The config with its browser connector set to launch a headless Chromium for the run
    (`--launch-browser`): the plugin's connector starts it at the first browser.connect and ends
    it when the host closes. The core names the connector, never imports it."""
    from ..errors import ConfigError

    settings = config.connectors.get("browser")
    if settings is None:
        raise ConfigError("--launch-browser needs the browser connector's settings: a connectors.browser "
                          "section with its allowedMethods in --config (docs/browser.md)")
    browser = {**{k: v for k, v in settings.items() if k != "wsUrl"}, "launch": True}
    return config.model_copy(update={"connectors": {**config.connectors, "browser": browser}})



def answered_by(provenance: Provenance) -> str:
    """The line `run` prints on standard error: who answered the run's evaluations, with a
    warning when the offline heuristic did (its judgments are rough) or labels got little mass."""
    from ..terminal import one_line  # model names and question ids come from outside

    line = f"fabric-jev: answered by {provenance.describe()}"
    heuristic = [p for p in (provenance.answerers or (provenance,)) if p.readout == "heuristic" and not p.profile]
    if heuristic:
        line = ("fabric-jev: warning: answered by the offline heuristic (the local evaluator, not a decision "
                "model: rough judgments); for real ones use a model you run (docs/evaluators.md, "
                "\"Use the model you already run\")") + ("" if len(heuristic) == 1 and not provenance.answerers
                                                       else f"; {line.removeprefix('fabric-jev: ')}")
    if provenance.low_mass:
        shown = ", ".join(provenance.low_mass[:8]) + (" …" if len(provenance.low_mass) > 8 else "")
        line += f"; warning: the labels got under half the probability mass for {shown}"
    return one_line(line)


def _input(args: argparse.Namespace) -> Any:
    """The program's input: --input FILE (or -), --input-json TEXT, else null."""
    from .._json import JSONInputError, loads_bounded
    from ..errors import InputInvalid

    if args.input_json is not None:
        try:
            return loads_bounded(args.input_json, what="--input-json", max_bytes=MAX_INPUT_BYTES)
        except JSONInputError as exc:
            raise InputInvalid(str(exc)) from None
    if args.input is None:
        return None
    try:
        return load_json(args.input, "input", max_bytes=MAX_INPUT_BYTES)
    except BadInput as exc:
        raise InputInvalid(str(exc)) from None


def add_run_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run: Any = add_command(
        sub, "run", help="run a program and print its terminal envelope",
        description="Run one judgment program in a sandboxed QuickJS worker. Progress events go to "
                    "standard error as they happen; the terminal envelope (with --result, only the "
                    "result) is printed on standard output as JSON, and a run that does not complete "
                    "says so in one line on standard error. Ctrl-C stops the run and still prints its "
                    "envelope. A capability call whose policy asks is a question on the terminal (y, a, "
                    "n, N); without a terminal it is refused. See docs/programs.md, \"Risks and policies\".",
        codes=("0 the run completed", "1 the run ended failed, timed_out or cancelled",
               "2 launch rejected (bad program, input or config, a missing piece)", "130 interrupted"))
    run.add_argument("program", help="program file: PROGRAM.ts or PROGRAM.js with its /* @program */ "
                     "contract comment, or the JSON artifact (code, inputSchema, outputSchema, requires, limits)")
    given = run.add_mutually_exclusive_group()
    given.add_argument("--input", help="input JSON file, or - for standard input (default: null)")
    given.add_argument("--input-json", dest="input_json", metavar="JSON",
                       help="the input as JSON text on the command line, e.g. --input-json '{\"n\": 2}'")
    run.add_argument("--result", action="store_true",
                     help="print only the result (not the envelope); a run that does not complete "
                     "prints nothing on standard output")
    run.add_argument("--quiet", action="store_true", help="do not print progress events on standard error")
    run.add_argument("--config", help=CONFIG_HELP)
    add_evaluator_options(run, config=False)
    add_policy_options(run)
    run.add_argument("--intent", help="what the user asked for: the user text the auto-approval "
                     "classifier judges capability calls against")
    run.add_argument("--launch-browser", dest="launch_browser", action="store_true",
                     help="start a headless Chromium for this run and end it after (the config's "
                     "connectors.browser section, with launch: true instead of its wsUrl; needs the "
                     "browser connector)")
    run.set_defaults(handler=run_command)
