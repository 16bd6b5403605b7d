"""`fabric-jev check` and `fabric-jev types`: a program's type check, and the declarations it is checked against."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import CONFIG_HELP, EXIT_NOT_COMPLETED, EXIT_OK, add_command, config_from, fail, load_program, print_json

PROGRAM_HELP = "program file: PROGRAM.ts / PROGRAM.js with its @program comment, or the JSON artifact"
OBSERVE_HELP = ("declare program.nextEvent, as in a run spawned with observe (implied when the program "
                "requires jev.advise)")


def _program(args: argparse.Namespace) -> Any:
    from ..contract.program import parse_program

    return parse_program(load_program(args.program))


def _observed(args: argparse.Namespace, program: Any) -> bool:
    # jev.advise is only granted to a run spawned with observe, so its programs are observers.
    return bool(args.observe) or "jev.advise" in program.requires


async def check_command(args: argparse.Namespace) -> int:
    from ..typecheck.checker import CheckerUnavailable, check_result

    config = config_from(args)
    program = _program(args)
    try:
        report = (await check_result(program, observed=_observed(args, program), config=config.typecheck)).to_json()
    except CheckerUnavailable as exc:
        return fail(f"the type checker is not available: {exc}")
    if args.json:
        print_json({"file": args.program, **report})
        return EXIT_OK if report["clean"] else EXIT_NOT_COMPLETED
    from ..terminal import one_line

    # The file's name and the compiler's messages (which quote the program's text, an import
    # specifier holding OSC 52 or a bidi override for one) reach the terminal through the one renderer.
    name = one_line(args.program)
    if "stopped" in report:
        sys.stdout.write(f"{name}: {one_line(report['stopped'])}\n")
    else:
        for d in report["diagnostics"]:
            sys.stdout.write(f"{name}:{d['line']}:{d['column']}: {one_line(d['message'])} ({d['code']})\n")
        reading = "TypeScript" if report["language"] == "typescript" else "JavaScript"
        found = f"{report['errors']} error{'' if report['errors'] == 1 else 's'}" if not report["clean"] else "clean"
        more = " (more were not shown: the compiler's output was cut)" if report["cut"] else ""
        sys.stderr.write(f"fabric-jev: {name}: {found} ({reading}, {one_line(report['compiler'])}){more}\n")
    return EXIT_OK if report["clean"] else EXIT_NOT_COMPLETED


async def types_command(args: argparse.Namespace) -> int:
    from ..typecheck.declarations import render

    program = _program(args)
    sys.stdout.write(render(program, observed=_observed(args, program)))
    return EXIT_OK


def add_typecheck_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check: Any = add_command(
        sub, "check", help="type-check a program against its own contract",
        description="Type-check a program with the TypeScript compiler (tsgo) against declarations made "
                    "from its own contract: input from inputSchema, the result from outputSchema, "
                    "tools.call refs from requires, jev.evaluate answers from the questions asked. "
                    "TypeScript and JavaScript alike (JavaScript with checkJs). Errors are printed one "
                    "per line as FILE:LINE:COL: message (TSCODE), in the program's own lines.",
        codes=("0 no type errors", "1 type errors (or the check hit its time or memory cap)",
               "2 bad input, or no compiler installed"))
    check.add_argument("program", help=PROGRAM_HELP)
    check.add_argument("--json", action="store_true",
                       help="print {file, name, clean, language, compiler, errors, cut, diagnostics: "
                       "[{line, column, code, message}]}, and stopped (why) when a cap stopped the check")
    check.add_argument("--observe", action="store_true", help=OBSERVE_HELP)
    check.add_argument("--config", help=CONFIG_HELP + "; its typecheck caps and cache apply")
    check.set_defaults(handler=check_command)

    types: Any = add_command(
        sub, "types", help="print the TypeScript declarations a program is checked against",
        description="Print the declarations `fabric-jev check` and launches check a program against: "
                    "the guest API (program, jev, tools, console, timers), then what the program's "
                    "contract gives it (input, output, tools.call refs, whether jev.evaluate, "
                    "program.nextEvent and program.advise exist). Save them as jev.d.ts next to the code "
                    "for an editor.",
        codes=("0 printed", "2 bad input"))
    types.add_argument("program", help=PROGRAM_HELP)
    types.add_argument("--observe", action="store_true", help=OBSERVE_HELP)
    types.set_defaults(handler=types_command)
