"""fabric-jev: run sandboxed, typed judgment programs and the tools around them."""

from __future__ import annotations

import argparse
import gc
import os
import sys

from .common import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_REJECTED, Parser, exit_codes

VERSION = "0.1.0"  # kept equal to fabric_jev.__version__ by tests/test_cli_help.py


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `fabric-jev` parser. With `command="run"` it holds that command alone: `fabric-jev run`
    then imports no other command's module and reads no connector plugin (docs/performance.md,
    "Start-up of run"); the run command's own parser is the same either way."""
    parser = _top_parser()
    # Typed as plain argparse for the command modules (every subparser is a Parser at run time).
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if command == "run":
        from .run import add_run_command

        add_run_command(sub)
    else:
        _add_all_commands(sub)
    return parser


def _top_parser() -> argparse.ArgumentParser:  # a Parser, typed as argparse's for the command modules
    parser = Parser(
        prog="fabric-jev", description=__doc__,
        epilog=exit_codes("0 success", "1 the run or check did not succeed (see each command)",
                          "2 bad input, a rejected launch or a missing piece (one line on stderr says which)",
                          "3 internal error (a bug: FABRIC_JEV_DEBUG=1 shows the traceback)",
                          "130 interrupted") + "\n\n'fabric-jev COMMAND --help' describes each command.")
    parser.add_argument("--version", action="version", version=f"fabric-jev {VERSION}")
    return parser


def _add_all_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .approval import add_approval_commands
    from .authoring import add_authoring_commands
    from .batch import add_batch_command
    from .bench import add_bench_command
    from .eval import add_eval_command
    from .evaluators import add_evaluator_commands
    from .learning import add_learning_commands
    from .mcp import add_mcp_command
    from .plugins import add_plugin_commands
    from .run import add_run_command
    from .setup_command import add_setup_command
    from .typecheck import add_typecheck_commands
    from .verification import add_verification_commands

    add_run_command(sub)
    add_typecheck_commands(sub)
    add_authoring_commands(sub)
    add_evaluator_commands(sub)
    add_approval_commands(sub)
    verify = add_verification_commands(sub)
    bench_suites = add_bench_command(sub)
    add_setup_command(sub)
    # Plugins add their commands at the top level and in core groups (`verify run` and `bench browser`
    # are the browser connector's).
    add_plugin_commands(sub, groups={"verify": verify}, bench_suites=bench_suites)
    add_learning_commands(sub)
    add_batch_command(sub)
    add_eval_command(sub)
    add_mcp_command(sub)


def _unwrap(exc: BaseException) -> BaseException:
    """A task group wraps errors in groups; report the single error inside."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _one_line(text: str) -> str:
    # An error can quote a program's text, a file name or a compiler's diagnostic: the one renderer.
    from ..terminal import one_line

    return one_line(text, "(no message)")


def main(argv: list[str] | None = None) -> int:
    # The local evaluator's encoder multiplies small matrices: OpenBLAS's extra threads save
    # little on an idle machine and cost several times over on a busy one (docs/performance.md,
    # "BLAS threads"). A command owns its process, so it uses one unless the user says otherwise;
    # numpy is not loaded yet here, so the setting takes effect.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    words = sys.argv[1:] if argv is None else argv
    # Called without arguments, main is the process's entry (the `fabric-jev` script): start-up
    # then runs without the cyclic garbage collector, which would walk every module and model
    # being made many times over, and what lived to the end is frozen before the interpreter's
    # last collection walks it once more (docs/performance.md, "Start-up of run").
    global _collector_paused
    owns_process = argv is None and gc.isenabled()
    if owns_process:
        gc.disable()
        _collector_paused = True
    try:
        parser = build_parser("run" if words[:1] == ["run"] else None)
        args, extra = parser.parse_known_args(argv)
        if extra:
            # The innermost subcommand's usage, not the top-level one, for a bad flag.
            args._parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if args.command != "run":  # `run` turns it back on once its host is up (started_up)
            started_up()
        try:
            code = _dispatch(args)
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        if owns_process and args.command == "run":
            _end_process(code)
        return code
    finally:
        if owns_process:
            started_up()
            gc.freeze()


def _end_process(code: int) -> None:
    """End `run`'s process now, with `code`: its output is written and its host closed (the zygote
    and the worker reaped), so what is left is the interpreter's teardown of every module, class and
    model start-up made, which nothing reads (docs/performance.md, "Start-up of run"). Returns (and
    the interpreter ends as usual) when a write fails, so the failure is reported as before, and when
    OpenTelemetry is loaded: its exporters flush at exit."""
    if "opentelemetry" in sys.modules:
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: the command was started with that stream closed
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


_collector_paused = False


def started_up() -> None:
    """The command's start-up is over: the collector, if `main` paused it, runs again, and leaves
    what start-up made (modules, classes, the host) out of its walks."""
    global _collector_paused
    if _collector_paused:
        _collector_paused = False
        gc.freeze()
        gc.enable()


def _dispatch(args: argparse.Namespace) -> int:
    import anyio

    from ..errors import JevError, LaunchRejected
    from .common import BadInput

    try:
        try:
            code: int = anyio.run(args.handler, args)
        except BaseExceptionGroup as group:
            raise _unwrap(group) from None
    except LaunchRejected as exc:
        sys.stderr.write(f"fabric-jev: launch rejected: {_one_line(str(exc))}\n")
        return EXIT_REJECTED
    except (JevError, BadInput) as exc:
        sys.stderr.write(f"fabric-jev: {_one_line(str(exc))}\n")
        return EXIT_REJECTED
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # a bug: still one line, the traceback only on request
        if os.environ.get("FABRIC_JEV_DEBUG"):
            raise
        sys.stderr.write(f"fabric-jev: internal error: {type(exc).__name__}: {_one_line(str(exc))}\n")
        return EXIT_INTERNAL
    return code
