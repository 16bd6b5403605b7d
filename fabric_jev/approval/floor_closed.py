"""The floor fails closed: checks for commands it cannot read (floor.json names them). Pure code.

What the floor cannot read, it cannot clear, so a person is asked under every
policy (`allow` included; where no one can be asked, the call is refused):

- code given inline to an interpreter (``python -c``, ``perl -e``,
  ``node -e``, an ``awk`` program that runs commands or writes files);
- a shell or an interpreter reading its program from a pipe, a here-document,
  a here-string or a process substitution (``… | base64 -d | sh``,
  ``bash <<EOF``, ``source <(…)``), and commands handed to ``at``;
- an alias, a function that calls itself (a fork bomb), a changed command
  search path (``PATH=…``, ``LD_PRELOAD=…``, ``hash -p``);
- a destructive command whose operands arrive at run time (``xargs rm``);
- a container that mounts the host's files or takes its privileges;
- a command the shell parser could not read whole (a parse error, scripts
  nested deeper than four, more commands than it reads).

Multi-call binaries (``busybox``, ``toybox``) are a floor entry of their own,
checked by the `programs` check.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import shell as _shell
from .floor_reading import (
    FloorParams,
    commands,
    name_regex,
    named,
    opaque,
    option_values,
    ref_words,
    strings_under,
    writes,
)
from .places import in_places, word_paths

if TYPE_CHECKING:
    from .call_view import CallView

_CLUSTER = re.compile(r"-[A-Za-z]+")
#: Standard inputs a program read from them cannot be known by reading the command.
_UNREAD_INPUT = frozenset({"pipe", "here-document", "here-string", "substitution"})
_STDIN_FILES = ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")


def _spec(command: _shell.Simple, table: Mapping[str, Any]) -> Any:
    name = _shell.basename(command.program)
    if name is None:
        return None
    for pattern, spec in table.items():
        if name_regex((pattern,)).match(name):
            return spec
    return None


def _flag_given(word: str, flags: list[str], caseless: bool) -> bool:
    text = word.lower() if caseless else word
    for flag in flags:
        flag = flag.lower() if caseless else flag
        if text == flag or (flag.startswith("--") and text.startswith(flag + "=")):
            return True
        if len(flag) == 2 and flag[0] == "-" and _CLUSTER.fullmatch(word) and flag[1] in word[1:]:
            return True  # -Bc, -ne, -pie
        if len(flag) == 2 and flag[0] == "-" and not caseless and word.startswith(flag) and len(word) > 2:
            return True  # the code attached to its flag: python3 -c'import os', perl -e'unlink 1'
    return False


def _inline(command: _shell.Simple, spec: Mapping[str, Any]) -> bool:
    words = command.words[1:]
    if spec.get("subcommands") and words and words[0].literal and words[0].text in spec["subcommands"]:
        return True  # deno eval '…'
    for word in words:
        if not word.literal:
            continue
        if word.text in spec.get("stop", ()) or word.text == "--":
            return False
        if _flag_given(word.text, spec.get("flags", []), bool(spec.get("caseless"))):
            return True
    return False


def _awk_runs(command: _shell.Simple) -> bool:
    """An awk program that runs a command or writes a file (system(), a pipe, print > file)."""
    words = command.words[1:]
    program = None
    i = 0
    while i < len(words):
        text = words[i].text
        if text in ("-f", "--file"):
            # The program is a file, read like any script file; but a program from its input
            # or a process substitution (awk -f /dev/stdin, awk -f <(curl …)) cannot be read.
            source = words[i + 1] if i + 1 < len(words) else None
            return source is None or source.value is None or source.value == "-" \
                or source.value.startswith(_STDIN_FILES[1:]) or source.value.startswith("/dev/fd/")
        if text in ("-e", "--source") and i + 1 < len(words):
            program = words[i + 1]
            break
        if text in ("-F", "-v", "--assign", "--field-separator"):
            i += 2
            continue
        if text.startswith("-") and len(text) > 1:
            i += 1
            continue
        program = words[i]
        break
    if program is None:
        return False
    if not program.literal:
        return True
    code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', program.text)  # a string's text runs nothing
    return bool(re.search(r"\bsystem\s*\(|\bprintf?\b[^;{}\n]*>", code)) or "|" in code.replace("||", "")


def inline_code(view: CallView, params: FloorParams) -> bool:
    interpreters = params["interpreters"]
    if not isinstance(interpreters, Mapping):
        raise ValueError("floor.json: inline-code's interpreters must be a table of interpreters and their flags")
    if set(params["capabilities"]) & ref_words(view.ref) and strings_under(view, params["code_keys"]):
        return True  # sandbox.python(code: "…"): an interpreter's capability given code
    for command in commands(view):
        spec = _spec(command, interpreters)
        if spec is not None and _inline(command, spec):
            return True
        if named(command, params["awk"]) and _awk_runs(command):
            return True
    return False


def _operands(command: _shell.Simple, takes_value: frozenset[str]) -> list[_shell.Word]:
    out: list[_shell.Word] = []
    words = command.words[1:]
    i = 0
    while i < len(words):
        word = words[i]
        if word.literal and word.text.startswith("-") and word.text != "-":
            if word.text == "--":
                out.extend(words[i + 1:])
                break
            i += 2 if word.text in takes_value else 1
            continue
        out.append(word)
        i += 1
    return out


#: Modules that run what they read from their input (a console, a debugger): the input is the program.
_INPUT_MODULES = frozenset({"code", "pdb", "asyncio", "IPython", "ipython", "bpython", "ptpython", "idlelib",
                            "runpy", "xonsh", "ipdb", "pudb", "jupyter_console"})


def runs_module(command: _shell.Simple) -> str | None:
    """The module a python runs when it is its program (``python3 -m json.tool``): None for a
    script, inline code, its input, or a module that runs what it reads (a console, a debugger)."""
    module = module_of(command)
    return module if module and module.split(".", 1)[0] not in _INPUT_MODULES else None


def saves_download(found: Sequence[_shell.Simple], downloaders: Sequence[str]) -> bool:
    """Whether a downloader among `found` may write a file (``curl -o``, ``wget`` without ``-O -``,
    ``curl … > json.py``): a module a later python runs may then be the download."""
    for command in found:
        if not named(command, downloaders):
            continue
        texts = [w.text if w.literal else "\x00" for w in command.words[1:]]
        if "\x00" in texts or any(writes(command)):
            return True
        wget = _shell.basename(command.program) == "wget"
        if wget and not any(t in ("-O-", "-qO-", "--output-document=-") or (t == "-" and p in ("-O", "-qO"))
                            for p, t in itertools.pairwise(["", *texts])):
            return True
        if not wget and any(t.startswith(("-o", "-O", "--output", "--remote-name", "-J")) or
                            (_CLUSTER.fullmatch(t) and ("o" in t or "O" in t)) for t in texts):
            return True
    return False


def module_of(command: _shell.Simple) -> str | None:
    """The module a python runs (``-m json.tool``, ``-mjson.tool``, ``-Im json.tool``), or None."""
    if not (_shell.basename(command.program or "") or "").startswith(("python", "py", "pypy")):
        return None
    words = command.words[1:]
    i = 0
    while i < len(words):
        text = words[i].text if words[i].literal else ""
        if text.startswith("--") and text != "--":
            i += 1
            continue
        if not text.startswith("-") or text in ("-", "--"):
            return None  # a script, its input, or a word only known at run time
        for k, letter in enumerate(text[1:], start=2):
            if letter == "c":
                return None
            if letter == "m":
                given = words[i + 1].value if i + 1 < len(words) else None
                return text[k:] or given or None
            if letter in "WXQ":  # -W error, -Werror, -X dev: its value
                i += 0 if text[k:] else 1
                break
        i += 1
    return None


def _from_input(command: _shell.Simple, spec: Mapping[str, Any]) -> str | None:
    """Why the program is read from somewhere the floor cannot see, or None."""
    module = module_of(command)
    if module is not None:  # python -m json.tool reads data; python -m code reads a program
        return None if runs_module(command) or command.stdin not in _UNREAD_INPUT else command.stdin
    if _inline(command, spec) or any(
            w.literal and w.text in spec.get("stop", ()) and w.text != "-m" for w in command.words[1:]):
        return None  # inline code (its own entry) or a module (python -m json.tool)
    found = _operands(command, frozenset(spec.get("takes_value", ())))
    first = found[0] if found else None
    if first is not None and not first.literal and ("<(" in first.text or first.text.startswith("$")):
        return "a process substitution"
    if first is not None and first.value is not None and (
            first.value in _STDIN_FILES or first.value.startswith(("/dev/fd/", "/proc/self/fd/"))):
        return "its input"
    reads_input = first is None or spec.get("always") or any(
        w.literal and w.text in spec.get("from_input", ()) for w in command.words[1:])
    if reads_input and command.stdin in _UNREAD_INPUT:
        return command.stdin
    return None


def program_from_input(view: CallView, params: FloorParams) -> bool:
    found = list(commands(view))
    written: set[str] | None = None
    for command in found:
        spec = _spec(command, params["readers"])
        if spec is not None and _from_input(command, spec) is not None:
            return True
        # A program the same call writes first (echo … > x.sh && bash x.sh, cp /bin/rm x && ./x):
        # the floor read the command that wrote it, never what it holds.
        program = command.words[0].value if command.words else None
        runs = [program] if program is not None and "/" in program else []
        if spec is not None:
            runs += [w.value for w in _operands(command, frozenset(spec.get("takes_value", ())))[:1] if w.value]
        if runs:
            if written is None:
                written = _written(view, found)
            if any(p in written for value in runs for p in _lexical(view, command, value)):
                return True
    return False


def _written(view: CallView, found: list[_shell.Simple]) -> set[str]:
    return {p for command in found for target in writes(command) for p in _lexical(view, command, target.value)}


def _lexical(view: CallView, command: _shell.Simple, value: str | None) -> list[str]:
    return [lexical for lexical, _ in word_paths(view, command, value) or []]


def _calls_itself(view: CallView) -> bool:
    """A function that calls itself, directly or through others (`:(){ :|:& };:`)."""
    calls: dict[str, set[str]] = {}
    for command in commands(view):
        if command.within:
            calls.setdefault(command.within, set())
    for command in commands(view):
        name = _shell.basename(command.program)
        if command.within and name in calls and not command.via:  # `command ls` in ls() runs the program
            calls[command.within].add(name)
    for start in calls:
        seen: set[str] = set()
        todo = list(calls[start])
        while todo:
            name = todo.pop()
            if name == start:
                return True
            if name not in seen:
                seen.add(name)
                todo.extend(calls.get(name, ()))
    return False


def redefinitions(view: CallView, params: FloorParams) -> bool:
    variables = name_regex(tuple(params["variables"]))
    for command in commands(view):
        if named(command, ["alias"]) and any("=" in (w.value or "=") for w in command.words[1:]):
            return True
        if named(command, ["hash"]) and any(w.literal and w.text.startswith("-") and "p" in w.text
                                            for w in command.words[1:]):
            return True
        if named(command, ["enable"]) and any(w.literal and w.text.startswith("-") and "f" in w.text
                                              for w in command.words[1:]):
            return True  # a builtin loaded from a file
        for assignment in command.assignments:
            name = re.split(r"\+?=", assignment, maxsplit=1)[0]
            if variables.match(name):
                return True
        if named(command, ["export", "declare", "typeset", "local", "readonly"]) and any(
                variables.match(re.split(r"\+?=", w.text if w.literal else w.text.lstrip("\"'$"), maxsplit=1)[0])
                for w in command.words[1:]):  # export "PATH=/x:$PATH": its source, unquoted
            return True
        if named(command, ["printf"]) and any(
                a.text == "-v" and b.literal and variables.match(b.text) for a, b in itertools.pairwise(command.words)):
            return True  # printf -v PATH %s /tmp/x
    return _calls_itself(view)


def input_operands(view: CallView, params: FloorParams) -> bool:
    return any(c.fed and named(c, params["programs"]) for c in commands(view))


def _mount_source(spec: str | None) -> str | bool | None:
    """The host path a volume or mount names: a str, None when unknown, False for a named volume."""
    if spec is None:
        return None
    if "=" in spec.split(",", 1)[0]:  # --mount type=bind,source=/,target=/h
        fields = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
        source = fields.get("source") or fields.get("src")
        if fields.get("type", "volume") not in ("bind", "volume") or not source:
            return False
        return source if fields.get("type") == "bind" or "/" in source or source.startswith((".", "~")) else False
    source = spec.split(":", 1)[0]
    return source if "/" in source or source.startswith((".", "~", "$")) else False


def container_host(view: CallView, params: FloorParams) -> bool:
    for command in commands(view):
        if not named(command, params["programs"]):
            continue
        words = [w.value or "" for w in command.words[1:]]
        subcommands = [w for w in words if not w.startswith("-")][:3]
        if "cp" in subcommands[:2]:
            places = [w for w in command.words[1:] if not (w.literal and w.text.startswith("-"))][-2:]
            if len(places) == 2 and ":" in (places[0].value or "") and ":" not in (places[1].value or ":") \
                    and not in_places(view, word_paths(view, command, places[1].value)):
                return True
            continue
        if not set(params["subcommands"]) & set(subcommands):
            continue
        if any(w.literal and w.text.split("=", 1)[0] in params["privileges"] for w in command.words[1:]):
            return True
        if any(w.value == "host" for w in option_values(command, params["host_namespaces"])):
            return True
        mounts = [*option_values(command, params["volumes"]), *_clustered(command, "v"), *_attached(command)]
        for word in mounts:
            source = _mount_source(word.value)
            if source is False:
                continue
            if not isinstance(source, str) or not in_places(view, word_paths(view, command, source)):
                return True
    return False


def _clustered(command: _shell.Simple, letter: str) -> list[_shell.Word]:
    """The value after a short-option cluster ending in `letter` (docker run -itv /:/h)."""
    words = command.words
    return [words[i + 1] for i, w in enumerate(words[:-1])
            if w.literal and _CLUSTER.fullmatch(w.text) and len(w.text) > 2 and w.text.endswith(letter)]


#: A docker short-flag cluster of switches ending in -v with its value attached (-itv/:/h).
_ATTACHED_VOLUME = re.compile(r"-[ditP]*v(?!-)(.+)")


def _attached(command: _shell.Simple) -> list[_shell.Word]:
    """A volume attached to -v (or --volume=, --mount=) in a word that holds an expansion
    (-v$HOME:/h), or after switches (-itv/:/h): its value, expanded where it can be."""
    out = []
    for w in command.words[1:]:
        name, eq, _ = w.text.partition("=")
        cut = len(name) + 1 if eq and name in ("--volume", "--mount") else None
        match = _ATTACHED_VOLUME.fullmatch(w.text)
        if cut is None and match and (not w.literal or (len(w.text) > 2 and w.text[1] != "v")):
            cut = match.start(1)
        if cut is None or (w.literal and w.text.startswith("--")):
            continue
        expanded = w.value[cut:] if w.value is not None and len(w.value) >= cut else None
        out.append(_shell.Word(w.text[cut:], False, expanded))
    return out


def unreadable(view: CallView, params: FloorParams) -> bool:
    return bool(opaque(view))

