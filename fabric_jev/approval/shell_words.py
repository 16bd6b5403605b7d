"""What a parsed shell command is made of: words, redirections, simple commands, scripts. Pure data.

`fabric_jev.approval.shell` builds them from a command's text; rules match
them, and the floor reads them. Besides its words, a simple command carries
what the floor needs to know about where it runs and what feeds it: its
standard input (a pipe, a here-document), the folders a `cd` before it may
have moved to, operands it takes from its input (`xargs`), and the function
whose body holds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
