"""The compiler's diagnostics, in the program's own lines and columns. Pure: no I/O.

tsgo (`--pretty false`) prints one diagnostic per line, `FILE(LINE,COL): error
TSNNNN: message`, with the message's elaboration on the indented lines after
it. The program sits one line down in the file the compiler saw (the wrapper's
header is above it), so its line is the file's line minus one; what the
compiler places on the wrapper itself (a program that can end without
returning) is placed at the end of the program.

A message may quote the program's own text raw, line breaks included (an
import specifier `'x\\njev.d.ts(1,1): error TS…'` is printed as written), so a
line that looks like a diagnostic is one only when it names a file by the
name this compile gave it: the checker names its files with a random tag
the program cannot know, and maps the names back. Anything else after a
diagnostic is the rest of its message. Diagnostics without a file (about
the options) are printed before every other, so only there are they read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, NamedTuple

from pydantic import PlainSerializer

from .._patterns import LazyPattern
from ..contract.wire_model import WireData
from .declarations import HEADER_LINES

_LOCATED = LazyPattern(r"(?P<file>[^\s(][^(]*)\((?P<line>\d+),(?P<col>\d+)\): "
                       r"(?P<cat>error|warning) TS(?P<code>\d+): (?P<msg>.*)")
_GLOBAL = LazyPattern(r"(?P<cat>error|warning) TS(?P<code>\d+): (?P<msg>.*)")
#: One diagnostic's message, elaboration included, is cut to this many characters.
MAX_MESSAGE_CHARS = 600

# Hints added to what the compiler says, where the cause is fabric-jev's guest API.
_NO_SUCH_GLOBAL = LazyPattern(r"^Cannot find name '(fetch|process|require|XMLHttpRequest|WebSocket|window|"
                              r"document|module|exports|Buffer|__dirname|__filename|globalThis\.fetch)'")
_MISSING_MEMBER = {
    ("evaluate", "Jev"): 'jev.evaluate needs "jev.evaluate" in requires',
    ("advise", "JevProgram"): 'program.advise needs "jev.advise" in requires (and a spawn with observe)',
    ("nextEvent", "JevProgram"): "program.nextEvent exists only in a run spawned with observe",
}
_MEMBER = LazyPattern(r"^Property '(\w+)' does not exist on type '(\w+)'")
# The fields of each answer shape, named where a program reads one that is not there (`answers.x.probability`
# on a noul): the declarations' documentation says the same on hover.
_ANSWER_MEMBER = LazyPattern(r"^Property '\w+' does not exist on type "
                             r"'(JevNoulAnswer|JevScoreAnswer|JevChoiceAnswer)[<']")
_ANSWER_FIELDS = {
    "JevNoulAnswer": "a noul answer is {type, noul}: its probability of yes is the field noul (0 to 1)",
    "JevChoiceAnswer": "a choice answer is {type, choice, probabilities, confidence}",
    "JevScoreAnswer": "a score answer is {type, score, legend, probabilities, confidence}",
}
# A promise read as if it were its value: the compiler spells the whole promised type out.
_PROMISE_TYPE = LazyPattern(r"'Promise<[^']{24,}>'")
_FORGOT_AWAIT = ("did you forget `await`? jev.evaluate, tools.call, program.sleep and program.nextEvent "
                 "return promises")
_NO_RESULT_CODES = frozenset({2355, 2366, 2847})
# "Cannot find name 'process'. Do you need to install type definitions for node? Try `npm i ...`",
# "Cannot find name 'document'. ... Try changing the 'lib' compiler option to include 'dom'.":
# advice about a project's packages or options, not about a sandbox, so only the first sentence is kept.
_INSTALL_TYPES_CODES = frozenset({2580, 2581, 2582, 2584, 2591, 2592, 2593})


def _ts_code(code: int) -> str:
    return f"TS{code}"


@dataclass(frozen=True, slots=True)
class Diagnostic(WireData):
    """One compiler error at a place in the program (lines and columns counted from 1).

    JSON (``to_json``): ``{"line", "column", "code": "TSNNNN", "message"}``.
    """

    line: int
    column: int
    #: The compiler's error number; the JSON writes it as TypeScript does, ``TS2339``.
    code: Annotated[int, PlainSerializer(_ts_code, return_type=str)]
    message: str

    def text(self) -> str:
        """`line L, column C: message (TSNNNN)`, the form used in launch errors and envelopes."""
        return f"line {self.line}, column {self.column}: {self.message} (TS{self.code})"

    @classmethod
    def from_json(cls, data: object) -> Diagnostic:
        if not isinstance(data, dict):
            raise ValueError("a diagnostic must be an object")
        line, column, code, message = data.get("line"), data.get("column"), data.get("code"), data.get("message")
        if (not isinstance(line, int) or not isinstance(column, int) or not isinstance(message, str)
                or not isinstance(code, str) or not re.fullmatch(r"TS\d{1,6}", code)):
            raise ValueError("a diagnostic needs line, column, code and message")
        return cls(line, column, int(code[2:]), message)


class RawDiagnostic(NamedTuple):
    file: str | None
    line: int
    column: int
    code: int
    error: bool
    message: str


def parse_output(output: str, files: Mapping[str, str] | None = None) -> list[RawDiagnostic]:
    """Every diagnostic in tsgo's plain output, elaboration lines joined to their message.

    `files` maps the names this compile gave its files to the names reported (and said in
    messages); when given, a line is a diagnostic only if it names one of them, and a file-less
    one only before the first located one. Without it (output we wrote), any such line is.
    """
    found: list[RawDiagnostic] = []
    parts: list[str] = []
    located_seen = False

    def close() -> None:
        if found and parts:
            last = found[-1]
            found[-1] = RawDiagnostic(last.file, last.line, last.column, last.code, last.error,
                                      " ".join([last.message, *parts]))
        parts.clear()

    def known(name: str) -> str | None:
        if files is None:
            return name
        return files.get(name.removeprefix("./"))

    # Only "\n" and "\r\n" end the compiler's lines; str.splitlines would also break at U+2028
    # and friends, which a quoted specifier may hold.
    for line in output.replace("\r\n", "\n").split("\n"):
        located = _LOCATED.fullmatch(line)
        file = None if located is None else known(located["file"].strip())
        if located is not None and file is None:
            located = None
        bare = None if located or (files is not None and located_seen) else _GLOBAL.fullmatch(line)
        if located or bare:
            close()
            m = located or bare
            assert m is not None
            located_seen = located_seen or located is not None
            found.append(RawDiagnostic(file, int(located["line"]) if located else 0,
                                       int(located["col"]) if located else 0,
                                       int(m["code"]), m["cat"] == "error", _named(m["msg"].strip(), files)))
        elif found and line.strip() and (files is not None or line.startswith("  ")):
            parts.append(_named(line.strip(), files))
        else:
            close()
    close()
    return found


def _named(text: str, files: Mapping[str, str] | None) -> str:
    for given, shown in (files or {}).items():
        text = text.replace(given, shown)
    return text


def _hint(code: int, message: str) -> str | None:
    if code in (2304, *_INSTALL_TYPES_CODES) and _NO_SUCH_GLOBAL.match(message):
        return ("the sandbox has no fetch, process, require, DOM or Node: "
                "reach the outside through a capability with tools.call")
    if code == 2307:
        return "a Jev program cannot import: the sandbox has no modules; reach the outside through a " \
               "capability with tools.call"
    answer = _ANSWER_MEMBER.match(message)
    if answer is not None:
        return _ANSWER_FIELDS[answer[1]]
    if "'Promise<" in message and "forget to use 'await'" not in message:
        return _FORGOT_AWAIT
    member = _MEMBER.match(message)
    if member is not None:
        return _MISSING_MEMBER.get((member[1], member[2]))
    if code in _NO_RESULT_CODES:
        return "a program without a result must return null"
    return None


def _clip(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE_CHARS else message[:MAX_MESSAGE_CHARS - 1] + "…"


#: A schema's type is spelled out after its alias's name when it is at most this long.
MAX_SPELLED_TYPE = 120


def place(raw: RawDiagnostic, code_text: str, aliases: dict[str, str] | None = None) -> Diagnostic:
    """A diagnostic of the wrapped program file, at the program's own line and column.

    `aliases` (JevInput, JevOutput → their types): a message that names one
    says what it is, when that is short, so the reader needs no declarations.
    """
    lines = code_text.split("\n")
    line = raw.line - HEADER_LINES
    column = raw.column
    if not 1 <= line <= len(lines):  # on the wrapper: the program as a whole, so its end
        line = len(lines)
        column = len(lines[-1]) + 1
    text = raw.message
    if raw.code in _INSTALL_TYPES_CODES and (cut := text.find(". ")) > 0:
        text = text[:cut + 1]
    hint = _hint(raw.code, text)
    if hint == _FORGOT_AWAIT:
        text = _PROMISE_TYPE.sub("'Promise<…>'", text)  # the type of what was not awaited is noise here
    if hint is None:
        spelled = [f"{name} is {spelled_type}" for name, spelled_type in (aliases or {}).items()
                   if f"'{name}'" in text and len(spelled_type) <= MAX_SPELLED_TYPE and "\n" not in spelled_type]
        hint = "; ".join(spelled) or None
    message = text if hint is None else f"{text} ({hint})"
    return Diagnostic(line, column, raw.code, _clip(message))
