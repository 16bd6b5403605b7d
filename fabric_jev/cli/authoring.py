"""`fabric-jev new` (a working program to start from) and `fabric-jev pack` (a program file → its JSON artifact)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING

from .common import EXIT_OK, EXIT_REJECTED, add_command, fail, print_json

if TYPE_CHECKING:
    from ..contract.program import Program

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")

_CONTRACT = """/* @program
{
  "name": "%(name)s",
  "inputSchema": {
    "type": "object",
    "properties": {
      "message": {"type": "string", "minLength": 1, "maxLength": 2000},
      "from": {"type": "string", "format": "email"}
    },
    "required": ["message"],
    "additionalProperties": false
  },
  "outputSchema": {
    "type": "object",
    "properties": {
      "topic": {"enum": ["billing", "technical", "other"]},
      "confidence": {"type": "number", "minimum": 0, "maximum": 1},
      "urgent": {"type": "boolean"}
    },
    "required": ["topic", "confidence", "urgent"],
    "additionalProperties": false
  },
  "requires": ["jev.evaluate"],
  "limits": {"timeoutMs": 30000, "maxEvaluations": 1}
}
*/
// %(name)s: one message in, a typed judgment out. The code owns the workflow;
// jev.evaluate only answers typed questions (docs/first-program.md).
"""

_QUESTIONS = """const { answers } = await jev.evaluate({
  state: input.message,
  questions: {
    topic: {
      type: "choice",
      instructions: "What is this message about?",
      criteria: {
        billing: "Invoices, charges, payments or refunds",
        technical: "Software that crashes, shows errors or does not work",
        other: "Anything else",
      },
    },
    urgent: { type: "noul", instructions: "Does the writer need help immediately?" },
  },
});
await program.emit({ topic: answers.topic.choice });
"""

_JS = _CONTRACT + _QUESTIONS + """return {
  topic: answers.topic.choice,
  confidence: answers.topic.confidence,
  urgent: answers.urgent.noul >= 0.5,
};
"""

_TS = _CONTRACT + """type Topic = "billing" | "technical" | "other";

interface Triage {
  topic: Topic;
  confidence: number;
  urgent: boolean;
}

""" + _QUESTIONS + """const triage: Triage = {
  topic: answers.topic.choice as Topic,
  confidence: answers.topic.confidence,
  urgent: answers.urgent.noul >= 0.5,
};
return triage;
"""

_INPUT = ('{"message": "I was charged twice for my subscription this month, please refund one of the '
          'payments.", "from": "sam@example.com"}\n')
_INPUTS = "".join(line + "\n" for line in (
    '{"message": "I was charged twice for my subscription this month, please refund one of the payments."}',
    '{"message": "The app crashes every time I open the settings page. I need it working before my demo in '
    'an hour!"}',
    '{"message": "Do you have an office in Lisbon?", "from": "kim@example.com"}',
))


async def new_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .._files import atomic_write

    name: str = args.name
    if not NAME.fullmatch(name):
        return fail(f"{name!r} is not a usable program name: a letter, then up to 63 letters, digits, "
                    "'-' or '_'")
    folder = Path(args.dir if args.dir is not None else name)
    program = folder / f"{name}.{'ts' if args.ts else 'js'}"
    files = {program: (_TS if args.ts else _JS) % {"name": name},
             folder / "input.json": _INPUT, folder / "inputs.jsonl": _INPUTS}
    existing = [str(path) for path in files if path.exists()]
    if existing:
        return fail(f"not overwriting {', '.join(existing)}: choose another name or --dir")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for path, text in files.items():
            atomic_write(path, text)
    except OSError as exc:
        return fail(f"cannot write {folder}: {exc.strerror or exc}")
    sys.stderr.write(
        f"fabric-jev: wrote {', '.join(str(p) for p in files)}\n"
        f"next:\n"
        f"  fabric-jev run {program} --input {folder / 'input.json'}\n"
        f"  fabric-jev batch {program} --inputs {folder / 'inputs.jsonl'} --out {folder / 'results.jsonl'}\n"
        f"  fabric-jev pack {program}     # the JSON artifact, for the API or MCP\n"
        "(docs/first-program.md walks through each step)\n")
    return EXIT_OK


async def pack_command(args: argparse.Namespace) -> int:
    from ..contract.program import parse_program
    from ..errors import LaunchRejected
    from ..program_files import load_program

    try:
        program = parse_program(load_program(args.program))
    except LaunchRejected as exc:  # nothing is launched here: the reason alone
        return fail(" ".join(str(exc).split()))
    if not args.no_check and not await _checked(program, args.program):
        return EXIT_REJECTED
    print_json(program.to_json())
    return EXIT_OK


async def _checked(program: Program, where: str) -> bool:
    """The type check a launch would do: False (after saying why, one line each) for TypeScript with
    errors, which every launch would refuse in the default mode. JavaScript's errors are listed and
    packed, as a launch runs them; without a compiler the artifact is packed unchecked, and said so."""
    from ..contract.languages import Language
    from ..terminal import one_line
    from ..typecheck.checker import CheckerUnavailable, check
    from ..typecheck.compiler import CompilerStopped

    try:
        verdict = await check(program, observed="jev.advise" in program.requires)
    except CheckerUnavailable as exc:
        sys.stderr.write(f"fabric-jev: {one_line(where)}: not type-checked: {one_line(str(exc))}\n")
        return True
    except CompilerStopped as exc:
        fail(f"{where}: could not be type-checked: {exc}; pack it unchecked with --no-check")
        return False
    for d in verdict.diagnostics:
        kind = "error" if verdict.language is Language.TYPESCRIPT else "warning"
        sys.stderr.write(one_line(f"{where}:{d.line}:{d.column}: {kind} TS{d.code}: {d.message}") + "\n")
    if verdict.clean or verdict.language is not Language.TYPESCRIPT:
        return True
    fail(f"{where}: not packed: {verdict.count()} (TypeScript); every launch of it would be refused "
         "(typecheck.typescript is error by default). Fix them, or pack it unchecked with --no-check")
    return False


def add_authoring_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    new = add_command(
        sub, "new", help="write a small working program to start from",
        description="Write NAME/NAME.js (or NAME.ts with --ts): a program file whose first comment "
                    "carries its contract (name, schemas, requires, limits), with a test input "
                    "(NAME/input.json) and a few batch inputs (NAME/inputs.jsonl). Nothing is "
                    "overwritten.",
        codes=("0 written", f"{EXIT_REJECTED} a bad name, or a file that already exists"))
    new.add_argument("name", help="the program's name (a letter, then letters, digits, '-' or '_')")
    new.add_argument("--ts", action="store_true", help="TypeScript (NAME.ts) instead of JavaScript")
    new.add_argument("--dir", help="the folder to write into (default: NAME)")
    new.set_defaults(handler=new_command)

    pack = add_command(
        sub, "pack", help="print the JSON artifact of a program file",
        description="Read a program file (PROGRAM.ts or PROGRAM.js with its @program comment, or a JSON "
                    "artifact), check it against the program rules and schema subset, type-check it as "
                    "a launch would, and print the JSON artifact: the wire format of JevHost.run, the MCP "
                    "tools and the HTTP API. A file's suffix gives the artifact's language (.ts: "
                    "typescript). TypeScript with type errors is refused unless --no-check; JavaScript's "
                    "are listed on standard error and packed.",
        codes=("0 printed", f"{EXIT_REJECTED} the file is not a valid program, or TypeScript with type errors "
               "(one line each on stderr says why)"))
    pack.add_argument("program", help="program file")
    pack.add_argument("--no-check", dest="no_check", action="store_true",
                      help="do not type-check: pack a TypeScript program even with type errors")
    pack.set_defaults(handler=pack_command)
