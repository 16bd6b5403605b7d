"""How the floor reads a call: its commands wherever they are, what each command writes, its paths.

Rules read a call's command under the keys written for it (`cmd`, `command`,
`script`, `argv`, …). The floor reads more, because it must hold whatever a
capability calls its arguments:

- under any capability, a command key at any depth (``options.cmd``), a list
  of commands under ``commands``, and a program with its arguments
  (``{program: "rm", args: ["-rf", "/"]}``, also ``command`` + ``args``);
- under a **shell capability** — one whose ref names a shell, a terminal, a
  process or running a command (`is_shell_capability`: ``shell.exec``,
  ``terminal.run``, ``os.system``, ``process.spawn``, …) — every string
  anywhere in the arguments is read as a possible command, whatever its key
  (``code``, ``steps[0].run``), and every list of strings as an argv, with
  each string of it as a command too.

What a command writes comes from `floor.json`'s ``writers`` table (data:
which operands, option values or ``key=value`` operands a program writes, and
the flags it needs for that, as ``sed`` needs ``-i``), plus its output
redirections. Pure code.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, TypedDict

from . import floor_folders as _folders
from . import shell as _shell
from .call_view import PATH_KEYS, key_name, key_words, names_a_place
from .shell_fresh import SETS_TMPDIR
from .shell_runners import RUNNERS
from .shell_words import Simple, Word

if TYPE_CHECKING:
    from .call_view import CallView

#: The `params` of a floor.json entry: each check reads the keys its entries give it. The catalogue
#: is checked in and its examples run in the tests, so the shape is not re-validated. (Functional
#: form: `except` is a keyword.) `interpreters` is a list of program names (download-and-run) or a
#: table of interpreters and their flags (inline-code).
FloorParams = TypedDict("FloorParams", {
    "programs": Sequence[str],
    "always": Sequence[str],
    "short": str,
    "long": Sequence[str],
    "strict": bool,
    "actions": Sequence[str],
    "devices": Sequence[str],
    "downloaders": Sequence[str],
    "interpreters": Sequence[str] | Mapping[str, Mapping[str, Sequence[str]]],
    "options": Sequence[str],
    "subcommand": str,
    "refspec_prefixes": Sequence[str],
    "shell_programs": Mapping[str, list[str]],
    "patterns": Sequence[str],
    "secret_names": Sequence[str],
    "upload_options": Sequence[str],
    "network": Sequence[str],
    "dumps": Sequence[str],
    "ignored_targets": Sequence[str],
    "paths": Sequence[str],
    "except": Sequence[str],
    "with_operands": Sequence[str],
    "systemctl": Sequence[str],
    "capabilities": Sequence[str],
    "code_keys": Sequence[str],
    "awk": Sequence[str],
    "readers": Mapping[str, Mapping[str, Sequence[str]]],
    "variables": Sequence[str],
    "subcommands": Sequence[str],
    "privileges": Sequence[str],
    "host_namespaces": Sequence[str],
    "volumes": Sequence[str],
}, total=False)


#: Words of a ref that make it a shell capability.
SHELL_WORDS = frozenset({"shell", "sh", "bash", "zsh", "fish", "pwsh", "powershell", "exec", "execute", "terminal",
                         "term", "command", "commands", "cmd", "process", "subprocess", "spawn", "system", "run",
                         "script", "console", "pty", "tty", "cli", "popen"})
#: Keys that hold a command under any capability, at any depth.
COMMAND_KEYS = ("cmd", "command", "commandLine", "command_line", "script", "shellCommand", "shell_command", "argv",
                "commands", "cmdline", "shell")
#: Keys that name a program whose arguments sit beside it under one of ARGUMENT_KEYS.
PROGRAM_KEYS = ("program", "executable", "exe", "binary", "bin", "command", "cmd", "file", "tool")
ARGUMENT_KEYS = ("args", "argv", "arguments", "params", "parameters", "options", "flags", "argList", "arg_list", "arg",
                 "argument", "cmdArgs", "cmd_args", "commandArgs", "command_args")
#: Keys that hold a command when their string reads as one (`reads_as_command`): `{run: "rm -rf /"}`,
#: a CI step's `run`; under any capability (a parse error there counts only when it reads so).
SOFT_COMMAND_KEYS = ("run", "exec", "execute", "entrypoint", "entry_point", "runCommand", "run_command")
#: Keys whose value a call hands the program on its standard input.
INPUT_KEYS = ("stdin", "input", "stdin_text", "stdin_data", "input_text", "input_data")
#: Under a write capability, the keys the floor reads as places written: the rules' path keys and
#: more names a capability may give them (``fs.rm(target: "/etc")``).
WRITE_PATH_KEYS = (*PATH_KEYS, "target", "location", "output", "out", "outfile", "outFile", "output_path",
                   "outputPath", "folder", "dst", "root", "into", "dir_path", "dirPath", "dest_path", "destPath")
#: Keys whose string is the data a write capability writes or sends: JSON text there is a document
#: (a tsconfig.json listing "/etc/passwd"), not more arguments, so its keys are no places written.
DATA_KEYS = ("content", "contents", "data", "text", "body", "new_content", "newContent", "new_text", "newText",
             "new_string", "newString", "old_string", "oldString", "patch", "diff")
#: What a program writes when its input says where (tar -P): anywhere, system files included.
ANYWHERE = "<where its input says>"
#: Arguments read at most this deep, and at most this many distinct strings parsed from one call:
#: past either, what is left is an opaque read (the floor asks), never skipped.
MAX_DEPTH = 8
MAX_STRINGS = 256
#: A string longer than this is not read as JSON text.
MAX_JSON_CHARS = 65_536


@lru_cache(maxsize=1)
def catalogue() -> Mapping[str, Any]:
    """floor.json, read once."""
    data: Mapping[str, Any] = json.loads(
        resources.files(__package__).joinpath("floor.json").read_text("utf-8"))
    return data


def is_shell_capability(ref: str) -> bool:
    return bool(SHELL_WORDS & ref_words(ref))


@dataclass(frozen=True, slots=True)
class Read:
    """A script the floor read from a call, and whether a command key held it (then a parse
    error in it counts: a string under another key need not be a command)."""

    script: _shell.Script
    keyed: bool


def scripts(view: CallView) -> list[Read]:
    """Every script the floor reads in the call (module doc), cached on the view."""
    cached: list[Read] | None = view._cache.get("floor scripts")
    if cached is None:
        cached = view._cache["floor scripts"] = list(_read(view))
    return cached


_COMMAND = frozenset(key_name(k) for k in COMMAND_KEYS)
_PROGRAM = frozenset(key_name(k) for k in PROGRAM_KEYS)
_ARGUMENTS = frozenset(key_name(k) for k in ARGUMENT_KEYS)
_INPUT = frozenset(key_name(k) for k in INPUT_KEYS)
_SOFT = frozenset(key_name(k) for k in SOFT_COMMAND_KEYS)
_DATA = frozenset(key_name(k) for k in DATA_KEYS)


@dataclass(frozen=True, slots=True)
class _Job:
    """A string (or argv) of the call the floor will parse; `fed` when the call hands the program
    text on its standard input (``{cmd: "python3", stdin: "…"}``)."""

    value: str | tuple[str, ...]
    keyed: bool
    fed: bool = False
    #: Set when what the call holds there cannot be read: an opaque read, for this reason.
    unread: str = ""


def _opaque(reason: str) -> Read:
    return Read(_shell.Script(f"<{reason}>", plain=False, unusual=(reason,), opaque=(reason,)), True)


def _read(view: CallView) -> Iterator[Read]:
    """Parse what `_walk` finds, command keys first, at most MAX_STRINGS distinct strings: past
    that, or past MAX_DEPTH, what was not read is an opaque read (the floor asks)."""
    shell = is_shell_capability(view.ref)
    runs = shell or view.risk == "execute"
    keyed, other, too_deep = _walk(view.arguments, shell, runs=runs)
    env = _folders.environment(view.arguments) if runs or keyed else _folders.Environment()
    other.extend(_Job(value, False) for value in env.values)  # {env: {X: "rm -rf ~"}}: read as commands too
    texts = [" ".join(j.value) if isinstance(j.value, tuple) else j.value for j in (*keyed, *other)]
    here = _folders.pwd(view)
    if here and len(texts) > 1 and any(_MAY_CHANGE_FOLDER.search(t) for t in texts):
        here = ""  # a cd in one command of the call: $PWD in the others is not known
    tmpdir = view.context.tmpdir
    if tmpdir is not None and any(SETS_TMPDIR.search(t) for t in texts):
        tmpdir = None  # one command of the call sets TMPDIR or redefines mktemp: not the host's
    tmpdir = env.tmpdir or tmpdir if env.tmpdir is not None else None  # {env: {TMPDIR: "/"}}
    known = _shell.Known(view.context.home, here, tmpdir)
    seen: set[_Job] = set()
    for job in (*keyed, *other):
        if job in seen or (isinstance(job.value, str) and not job.value.strip() and not job.unread):
            continue
        seen.add(job)
        if len(seen) > MAX_STRINGS:
            yield _opaque(f"more than {MAX_STRINGS} strings")
            break
        if job.unread:
            yield _opaque(job.unread)
            continue
        script = _shell.parse(job.value, known) if isinstance(job.value, str) \
            else _shell.parse_argv(list(job.value), known)
        if job.fed:  # the call's input is to the program what a here-string is
            script = replace(script, commands=tuple(c if c.stdin else replace(c, stdin="here-string")
                                                    for c in script.commands))
        yield Read(script, job.keyed)
    if too_deep:
        yield _opaque(f"arguments nested deeper than {MAX_DEPTH}")
    yield from (_opaque(f"the call sets {name} for its command") for name in env.risky)
    if env.unread:
        yield _opaque("an environment object the floor cannot read")
    if view.risk == "write" and _strings_under(view, WRITE_PATH_KEYS)[1]:
        yield _opaque(f"more than {MAX_STRINGS} places written")


#: Text that may change folder (read over the raw text: a false alarm only asks more).
_MAY_CHANGE_FOLDER = re.compile(r"\b(?:cd|pushd|popd|chdir)\b")


def _walk(arguments: Any, wide: bool, *, runs: bool = True) -> tuple[list[_Job], list[_Job], bool]:
    """Every string the floor reads as a command: those under a command key (or paired with a
    program) first, then, under a shell capability, every other one; and whether a part of the
    arguments lies deeper than MAX_DEPTH (it is not walked, and so cannot be cleared).

    JSON text inside a string that cannot be read (too long, too deep) is an opaque read only
    when the capability `runs` things (a shell capability or risk execute): a file written or a
    body posted is data, and a large or deep JSON document in it is routine."""
    keyed: list[_Job] = []
    other: list[_Job] = []
    too_deep = False
    # (value, its key, depth, whether it came from JSON text inside a string)
    stack: list[tuple[Any, str, int, bool]] = [(arguments, "", 0, False)]
    while stack:
        value, key, depth, text = stack.pop()
        name = key_name(key)
        command_key = name in _COMMAND
        soft = name in _SOFT and not command_key
        if isinstance(value, str):
            if command_key or wide or soft:
                (keyed if command_key or soft else other).append(
                    _Job(value, command_key or (soft and reads_as_command(value))))
            decoded, unread = _json_text(value)
            if unread and runs:
                keyed.append(_Job("", True, unread=unread))
            if decoded:  # {"payload": "{\"cmd\": …}"}
                if depth >= MAX_DEPTH:
                    too_deep = too_deep or runs
                else:
                    stack.append((decoded, key, depth + 1, True))
        elif isinstance(value, list) and value and all(_scalar(v) for v in value):
            # An argv may hold numbers and booleans: they are their JSON text (`["rm", "-rf", 1, "~"]`).
            if command_key or wide or soft:
                argv = tuple(_text(v) for v in value)
                (keyed if command_key or soft else other).append(
                    _Job(argv, (command_key and name != "commands") or (soft and reads_as_command(argv[0]))))
            items = [item for item in value if isinstance(item, str)]
            if name == "commands" or wide:
                (keyed if name == "commands" else other).extend(_Job(item, name == "commands") for item in items)
            for item in reversed(items):
                decoded, unread = _json_text(item)
                if unread and runs:
                    keyed.append(_Job("", True, unread=unread))
                if decoded and depth >= MAX_DEPTH:
                    too_deep = too_deep or runs
                elif decoded:
                    stack.append((decoded, key, depth + 1, True))
        elif isinstance(value, list | dict) and value:
            if isinstance(value, list) and command_key and name != "commands":
                # An argv with a null or an object in it: what runs depends on how the capability
                # spells them, which the floor cannot know.
                keyed.append(_Job("", True, unread="a command list holding a null, a list or an object"))
            if depth >= MAX_DEPTH:
                too_deep = too_deep or runs or not text
            elif isinstance(value, list):
                stack.extend((item, key, depth + 1, text) for item in reversed(value))
            else:
                keyed.extend(_program_and_arguments(value, wide))
                stack.extend((item, str(k), depth + 1, text) for k, item in reversed(list(value.items())))
    return keyed, other, too_deep


def _program_and_arguments(value: dict[Any, Any], wide: bool) -> Iterator[_Job]:
    """``{program: "rm", args: ["-rf", "/"]}`` as the argv it runs, ``{cmd: "rm", args: "-rf /"}`` as
    the command it spells, and a program beside a ``stdin``/``input`` fed it (under a shell
    capability, any string beside them is read as the program)."""
    names = {str(k): key_name(str(k)) for k in value}
    fed = any(names[str(k)] in _INPUT and v not in (None, False, "", [], {}) for k, v in value.items())
    # Every argument key beside the program, read together in their order (`args` + `flags`).
    parts: list[tuple[str, ...] | str] = []
    used: set[str] = set()
    unread = False
    for args_key, args in value.items():
        if names[str(args_key)] not in _ARGUMENTS:
            continue
        if isinstance(args, list) and all(_scalar(a) for a in args):
            parts.append(tuple(_text(a) for a in args))
        elif isinstance(args, str):
            parts.append(args)
        elif isinstance(args, list) and not all(isinstance(a, dict) for a in args):
            unread = True  # a null, or words and objects together: no argv the floor can know
        else:
            continue  # named parameters ({tool: "search", params: [{q: "x"}]}): walked for what they hold
        used.add(str(args_key))
    programs: list[tuple[str, ...] | str] = []
    for key, program in value.items():
        if str(key) in used or names[str(key)] in _INPUT or not (wide or names[str(key)] in _PROGRAM):
            continue
        if isinstance(program, str) and program.strip():
            programs.append(program)
        elif isinstance(program, list) and program and all(_scalar(p) for p in program):
            programs.append(tuple(_text(p) for p in program))  # {cmd: ["python3"], stdin: "…"}
    for program in programs:
        if unread:
            yield _Job("", True, unread="arguments holding a null, a list or an object")
        elif parts and all(isinstance(part, tuple) for part in parts):
            head = (program,) if isinstance(program, str) else program
            yield _Job((*head, *(word for part in parts for word in part)), True, fed)
        elif parts:
            yield _Job(" ".join(part if isinstance(part, str) else shlex.join(part)
                                for part in (program, *parts)), True, fed)
        elif fed:
            yield _Job(program, True, fed=True)
    if fed and not programs:  # the whole command under a command key: {argv: ["sh", "-s"], input: "…"}
        for key, command in value.items():
            if names[str(key)] not in _COMMAND:
                continue
            if isinstance(command, str) and command.strip():
                yield _Job(command, True, fed=True)
            elif isinstance(command, list) and command and all(_scalar(c) for c in command):
                yield _Job(tuple(_text(c) for c in command), True, fed=True)


def _scalar(value: object) -> bool:
    """A string, a number or a boolean: what an argv may hold."""
    return isinstance(value, str | int | float)


def _text(value: str | float) -> str:
    """A word of an argv: a string as it is, a number or a boolean as its JSON text."""
    return value if isinstance(value, str) else json.dumps(value)


def json_inside(value: str) -> dict[str, Any] | list[Any] | None:
    """The object or array a string holds as JSON text, or None: the floor reads inside it as
    it reads the arguments themselves."""
    return _json_text(value)[0]


def _json_text(value: str) -> tuple[dict[str, Any] | list[Any] | None, str]:
    """`json_inside`, and why text that may be JSON was not read: longer than MAX_JSON_CHARS or
    nested past what the decoder reads (an opaque read for the floor, never a skip)."""
    text = value.strip()
    if (text[:1], text[-1:]) not in (("{", "}"), ("[", "]")):
        return None, ""
    if len(text) > MAX_JSON_CHARS:
        return None, f"JSON text longer than {MAX_JSON_CHARS} characters"
    try:
        decoded = json.loads(text)
    except RecursionError:
        return None, "JSON text nested too deep to read"
    except ValueError:
        return None, ""
    return (decoded if isinstance(decoded, dict | list) else None), ""


def strings_under(view: CallView, keys: Sequence[str]) -> list[str]:
    """Every string held under one of `keys` at any depth of the arguments (lists of strings
    included, JSON text read inside), at most MAX_STRINGS."""
    return _strings_under(view, tuple(keys))[0]


def _strings_under(view: CallView, keys: tuple[str, ...]) -> tuple[list[str], bool]:
    """`strings_under`, and whether more strings were left unread past MAX_STRINGS (cached)."""
    found: tuple[list[str], bool] | None = view._cache.get(("strings under", keys))
    if found is not None:
        return found
    wanted = frozenset(key_name(k) for k in keys)
    by_words = keys == WRITE_PATH_KEYS  # and any key whose words say it names a place (`folderPath`)
    # A document written is read inside only where the capability runs things.
    data = frozenset() if view.risk == "execute" or is_shell_capability(view.ref) else _DATA
    out: list[str] = []
    stack: list[tuple[Any, bool, int, str]] = [(view.arguments, False, 0, "")]
    more = False
    while stack:  # what lies deeper is an opaque read of `scripts`
        if len(out) >= MAX_STRINGS:
            more = any(under or not isinstance(value, str) for value, under, _, _ in stack)
            break
        value, under, depth, name = stack.pop()
        if isinstance(value, str):
            if under and value.strip():
                out.append(value)
            decoded = None if name in data else json_inside(value)
            if decoded is not None and depth < MAX_DEPTH:
                stack.append((decoded, under, depth + 1, name))
        elif isinstance(value, list) and depth < MAX_DEPTH:
            stack.extend((item, under, depth + 1, name) for item in value)
        elif isinstance(value, dict) and depth < MAX_DEPTH:
            for k, item in value.items():
                name = key_name(str(k))
                place = name in wanted or (by_words and name not in _DATA and names_a_place(str(k)))
                stack.append((item, under or place, depth + 1, name))
    found = view._cache[("strings under", keys)] = (out, more)
    return found


def ref_words(ref: str) -> set[str]:
    """The words of a capability ref: ``sandbox.runPython`` → sandbox, run, python."""
    return set(key_words(ref))


def commands(view: CallView) -> Iterator[Simple]:
    for read in scripts(view):
        yield from read.script.commands


#: What the parser says of text that is not shell at all: it counts only under a command key.
PARSE_ERROR = "a part the shell parser could not read"


def opaque(view: CallView) -> list[str]:
    """What the parser could not read in the call's commands: a parse error in a command held
    under a command key, or, under a shell capability, in any string that reads as a command
    (prose under another key need not parse); anything else anywhere."""
    wide = is_shell_capability(view.ref)
    return [reason for read in scripts(view) for reason in read.script.opaque
            if read.keyed or reason != PARSE_ERROR or (wide and reads_as_command(read.script.raw))]


#: Operators that join commands; prose seldom holds them.
_JOINS = re.compile(r"&&|\|\||[;|]")


def reads_as_command(text: str) -> bool:
    """Whether a string that does not parse still reads as a shell command: it joins commands
    (``&&``, ``||``, ``;``, ``|``), or its first word is a path or names a program the floor knows."""
    if _JOINS.search(text):
        return True
    first = text.split(None, 1)[0].lstrip("({!") if text.strip() else ""
    if "/" in first:
        return True
    return bool(first) and name_regex(_program_names()).match(first) is not None


@lru_cache(maxsize=1)
def _program_names() -> tuple[str, ...]:
    """Every program the catalogue names, the shells and the wrappers, and the test command."""
    data = catalogue()
    names = {"[", "[[", "test", "eval", "exec", "source", ".", *data["writers"], *_shell.SHELLS, *_shell.WRAPPERS,
             *RUNNERS}
    for entry in data["entries"]:
        params = entry.get("params", {})
        for key in ("programs", "always", "downloaders", "interpreters", "readers", "shell_programs", "network",
                    "dumps", "awk"):
            names.update(params.get(key, ()))  # a list of names, or a table keyed by them
    return tuple(sorted(names))


# ---------------------------------------------------------------------------- words of a command


@lru_cache(maxsize=512)
def name_regex(patterns: tuple[str, ...]) -> re.Pattern[str]:
    # Every alternative anchored at the end: `a|b\Z` would leave all but the last a prefix match.
    return re.compile("(?:" + "|".join(".*".join(re.escape(p) for p in pat.split("*")) for pat in patterns) + r")\Z",
                      re.DOTALL)


def named(command: Simple, names: Iterable[str]) -> bool:
    program = _shell.basename(command.program)
    return program is not None and name_regex(tuple(names)).match(program) is not None


def operands(command: Simple) -> list[Word]:
    """Its words after the program that are not options; an unknown one when more come at run time."""
    found = [w for w in command.words[1:] if not (w.literal and w.text.startswith("-") and len(w.text) > 1)]
    if command.fed:
        found.append(Word(f"<operands from {command.fed}>", False, None))
    return found


def options(command: Simple) -> list[str]:
    return [w.text for w in command.words[1:] if w.literal and w.text.startswith("-") and len(w.text) > 1]


def has_flag(command: Simple, short: str, long: Sequence[str]) -> bool:
    for option in options(command):
        if option.startswith("--"):
            if option.split("=", 1)[0] in long:
                return True
        elif any(ch in option[1:] for ch in short):
            return True
    return False


def option_values(command: Simple, wanted: Sequence[str]) -> Iterator[Word]:
    """The values of options `wanted` (``-C DIR``, ``-CDIR``, ``--directory=DIR``, ``-xzf F -C DIR``)."""
    words = command.words[1:]
    for i, word in enumerate(words):
        if not word.literal:
            continue
        text = word.text
        for option in wanted:
            if text == option:
                if i + 1 < len(words):
                    yield words[i + 1]
                else:
                    yield Word(f"<the value of {option}>", False, None)
            elif option.startswith("--") and text.startswith(option + "="):
                yield Word(text[len(option) + 1:])
            elif not option.startswith("--") and len(option) == 2 and text.startswith(option) and len(text) > 2 \
                    and not text.startswith("--"):
                # -v=/:/h is -v /:/h to docker's flag parser; elsewhere `=` would be part of the
                # value (tar -C=x), and reading the value without it can only read more places.
                yield Word(text[2:].removeprefix("="))


def writes(command: Simple) -> Iterator[Word]:
    """Every word the command writes to as a path: output redirections and the writers table."""
    for redirect in command.redirects:
        if redirect.writes:
            yield redirect.target
    name = _shell.basename(command.program)
    spec = catalogue()["writers"].get(name or "")
    if spec is None:
        return
    if spec.get("unless") and has_flag(command, spec.get("unless_short", ""), spec["unless"]):
        return
    if spec.get("only_with") and not has_flag(command, spec.get("only_with_short", ""), spec["only_with"]):
        return
    if spec.get("anywhere") and has_flag(command, spec.get("anywhere_short", ""), spec["anywhere"]) \
            and not has_flag(command, "", spec.get("anywhere_unless", ())):
        yield Word(ANYWHERE, False, None)  # tar -P, cpio -i: member names may be absolute
    found = operands(command)
    if spec.get("script_options"):
        found = _files_of_a_script_program(command, found, spec["script_options"])
    which = spec.get("operands", "")
    if which == "all":
        yield from found
    elif which == "last" and found:
        yield found[-1]
    elif which == "first" and found:
        yield found[0]
    named_folder = list(option_values(command, spec.get("options", ())))
    yield from named_folder
    if not named_folder and spec.get("into_folder") and _extracts(command, spec["into_folder"]):
        yield Word(".")  # tar -xf a.tar, unzip a.zip: into the folder it runs in
    for key in spec.get("keys", ()):  # dd of=FILE
        for word in command.words[1:]:
            if word.literal and word.text.startswith(key + "="):
                yield Word(word.text[len(key) + 1:])
            elif not word.literal and word.text.startswith(key + "="):
                yield Word(word.text, False, None)


def _extracts(command: Simple, when: Mapping[str, Any]) -> bool:
    """Whether an archiver extracts (tar -x, also `tar xf`; unzip unless it lists; 7z x)."""
    words = command.words[1:]
    if "subcommands" in when:
        return bool(words) and words[0].text in when["subcommands"]
    if "short" in when:
        first = words[0].text if words and words[0].literal else ""
        old_style = first.isalpha() and any(ch in first for ch in when["short"])
        return old_style or has_flag(command, when["short"], when.get("long", ()))
    return not has_flag(command, when.get("unless_short", ""), when.get("unless", ()))


def _files_of_a_script_program(command: Simple, found: list[Word], script_options: Sequence[str]) -> list[Word]:
    """A program's operands without its script (sed: the values of -e/-f, or else the first
    operand): `sed -i '/^$/d' notes.txt` writes notes.txt, not a file named `/^$/d`."""
    values = list(option_values(command, script_options))
    if not values:  # the script is the first operand (also after a cluster: sed -ne '…' FILE)
        return found[1:] if found and not command.fed else found
    out = list(found)
    for value in values:
        for i, word in enumerate(out):
            if word == value or (word.literal and word.text == value.text):
                del out[i]
                break
    return out


def paths_named(command: Simple) -> Iterator[str | None]:
    """Every value of the command read as a possible path: operands, option values after `=`,
    ``@file`` arguments, and redirection targets."""
    for word in command.words[1:]:
        value = word.value
        if value is None:
            continue
        if value.startswith("-") and "=" in value:
            value = value.split("=", 1)[1]
        elif value.startswith("@"):
            value = value[1:]
        if value:
            yield value
    for redirect in command.redirects:
        if redirect.target.value:
            yield redirect.target.value
