"""What a parsed shell command is made of: words, redirections, simple commands, scripts. Pure data.

`fabric_jev.approval.shell` builds them from a command's text; rules match
them, and the floor reads them. Besides its words, a simple command carries
what the floor needs to know about where it runs and what feeds it: its
standard input (a pipe, a here-document), the folders a `cd` before it may
have moved to, operands it takes from its input (`xargs`), and the function
whose body holds it. `misread` and `plain_declaration` say where the grammar's reading is
not bash's (the floor then fails closed).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node  # the grammar's tree, parsed by shell.py


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word: its value after quote removal (`text`), or its source when dynamic."""

    text: str
    literal: bool = True
    #: The value with ~, $HOME and $PWD expanded; None when another expansion is in it.
    expanded: str | None = None

    @property
    def value(self) -> str | None:
        """What the shell would pass, when it is known."""
        return self.text if self.literal else self.expanded


@dataclass(frozen=True, slots=True)
class Redirect:
    operator: str  # ">", ">>", "<", "&>", ">&", "2>", ...
    target: Word

    @property
    def writes(self) -> bool:
        """Whether it opens its target for writing (``>&2`` only duplicates a descriptor)."""
        op = self.operator.lstrip("0123456789")
        if op in ("<>", "&>", "&>>", ">", ">>", ">|"):
            return True
        if op == ">&":  # `>& file` writes stdout and stderr to a file; `>&2`, `>&-` duplicate or close
            value = self.target.value
            return not (value is not None and (value.isdigit() or value == "-"))
        return False


#: What a command's standard input is, when the script says: a pipe from the command before
#: it, a here-document or here-string, a file, or something only the shell knows (`< <(…)`).
STDIN_KINDS = ("", "pipe", "here-document", "here-string", "file", "substitution")


@dataclass(frozen=True, slots=True)
class Simple:
    """One simple command: assignments, words (the program first) and redirections."""

    words: tuple[Word, ...]
    assignments: tuple[str, ...] = ()
    redirects: tuple[Redirect, ...] = ()
    #: Its standard input as the script sets it (one of STDIN_KINDS; "" when inherited).
    stdin: str = ""
    #: Folders a `cd`, `pushd` or `env -C` before it names, in order, as written; None when one
    #: of them cannot be known. A relative path may be read against any of them.
    dirs: tuple[str, ...] | None = ()
    #: What hands it further operands at run time ("xargs", "parallel"), or "".
    fed: str = ""
    #: The function whose body holds it, or "".
    within: str = ""
    #: The wrapper it runs behind (sudo, xargs, busybox, …); "" for a command as written.
    via: str = ""

    @property
    def program(self) -> str | None:
        """The program's name as written (a path kept), or None when it comes from an expansion."""
        return self.words[0].value if self.words else None

    def argv(self) -> list[str | None]:
        return [w.value for w in self.words]

    def text(self) -> str:
        return " ".join([*self.assignments, *(quote(w) for w in self.words),
                         *(f"{r.operator}{quote(r.target)}" for r in self.redirects)])


@dataclass(frozen=True, slots=True)
class Script:
    raw: str
    segments: tuple[Simple, ...] = ()
    operators: tuple[str, ...] = ()
    #: Every part was understood as simple commands joined by operators.
    plain: bool = True
    #: Every simple command anywhere in it, wrappers unwrapped, nested scripts parsed.
    commands: tuple[Simple, ...] = ()
    #: Why it is not plain ("a subshell", "a parse error", ...), for the question a person reads.
    unusual: tuple[str, ...] = field(default=())
    #: What the parser could not read at all, here or in a script nested in it ("a part the
    #: shell parser could not read", "scripts nested deeper than 4", ...): the floor asks.
    opaque: tuple[str, ...] = field(default=())

    @property
    def compound(self) -> bool:
        return len(self.segments) != 1 or not self.plain

    def shown_segments(self) -> list[str]:
        """Each segment with the operator that follows it, as a person should read them."""
        out = []
        for i, segment in enumerate(self.segments):
            op = self.operators[i] if i < len(self.operators) else ""
            out.append(segment.text() + (f" {op}" if op else ""))
        return out


@dataclass(frozen=True, slots=True)
class Known:
    """What the parser may expand: the home folder, the working directory and ``$TMPDIR`` (""
    when it is not set: ``${TMPDIR:-/tmp}`` is then ``/tmp``; None when it cannot be known)."""

    home: str = ""
    cwd: str = ""
    tmpdir: str | None = None
    #: Variables of an enclosing script that hold a path mktemp made (`shell_fresh`), for a
    #: script nested in it (``trap 'rm -rf "$d"' EXIT``).
    fresh: frozenset[str] = frozenset()


def basename(program: str | None) -> str | None:
    return None if program is None else program.rsplit("/", 1)[-1]


_SAFE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%^*")


def quote(word: Word) -> str:
    if not word.literal:
        return word.text
    if word.text and all(ch in _SAFE_CHARS for ch in word.text):
        return word.text
    return "'" + word.text.replace("'", "'\\''") + "'"


#: A variable name as bash reads it in an assignment (an array element's index may follow).
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[\w$@*]*\])?")
#: Words bash reads as syntax where a command starts: the grammar reads them as a command's name
#: after ``time``, ``!`` or ``coproc`` (`misread`).
_KEYWORDS = frozenset({"{", "}", "if", "then", "elif", "else", "fi", "for", "select", "while", "until", "do",
                       "done", "case", "esac", "in", "function", "!", "[[", "]]", "(", ")"})


def misread(command: Simple) -> str:
    """Why the grammar's reading of a command is not bash's: a keyword read as a command's name
    (``time { rm -rf /; }``, ``! for …``: bash runs the group the grammar split), or a name
    ``printf -v`` sets that only the run knows. Empty when none."""
    words = command.words
    if words and words[0].literal and words[0].text in _KEYWORDS:
        return f"a shell keyword ({words[0].text}) read as a command"
    if words and basename(command.program) == "printf":
        for flag, name in itertools.pairwise(words[1:]):
            if flag.literal and flag.text == "--":
                break
            if flag.literal and flag.text == "-v" and (not name.literal or _PLAIN_NAME.fullmatch(name.text) is None):
                return "a variable name printf -v sets only known at run time"
    return ""


def plain_declaration(node: Node, text: Callable[[Node], str]) -> bool:
    """Whether every name an export, declare, typeset, local or readonly sets is written plainly:
    ``export P""ATH=…``, ``declare TMP\\DIR=/``, ``export {TMP,}DIR=/`` set names the raw text hides."""
    named = [c for c in node.children if c.is_named]
    for before, after in itertools.pairwise(named):
        if before.end_byte == after.start_byte:
            return False  # one word the grammar split in two (PA""TH=…)
    for child in named:
        raw = text(child)
        if child.type == "variable_assignment" or raw.startswith(("-", "+")):
            continue
        if child.type in ("string", "raw_string") and len(raw) > 1:
            raw = raw[1:-1]  # export "PATH=$HOME/bin": the whole word quoted, its name plain
        if _PLAIN_NAME.fullmatch(raw.split("=", 1)[0].removesuffix("+")) is None:
            return False
    return True


def substitutions(text: str) -> list[str] | None:
    """The scripts of the ``$(…)`` and backticks in a here-document body's text, None when one
    does not close (the body is then not read)."""
    found: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "`":
            end = text.find("`", i + 1)
            while end > 0 and text[end - 1] == "\\":
                end = text.find("`", end + 1)
            if end < 0:
                return None
            found.append(text[i + 1:end].replace("\\`", "`"))
            i = end + 1
            continue
        if text.startswith("$(", i) and not text.startswith("$((", i):
            depth, j = 1, i + 2
            while j < len(text) and depth:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
            if depth:
                return None
            found.append(text[i + 2:j - 1])
            i = j
            continue
        i += 1
    return found


def unescape(raw: str) -> str:
    """An unquoted word's text with its backslashes removed (a backslash-newline joins lines)."""
    if "\\" not in raw:
        return raw
    out = []
    chars = iter(raw)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "")
            if nxt != "\n":
                out.append(nxt)
        else:
            out.append(ch)
    return "".join(out)


def unescape_dq(raw: str) -> str:
    """A double-quoted string's text with the backslashes bash removes there removed."""
    if "\\" not in raw:
        return raw
    out = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw) and raw[i + 1] in '$`"\\\n':
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)
