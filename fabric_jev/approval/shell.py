"""Shell commands as parsed words, never as raw strings (the approvals' rules and floor read them).

A real parser reads the command: tree-sitter's bash grammar, as Codex CLI does
for `bash -lc` scripts. A command becomes a `Script`:

- `segments` and `operators`: the simple commands joined by ``;``, ``&&``,
  ``||``, ``|``, ``&`` (a newline counts as ``;``), each one's words after
  quote removal. This is its *shape*: an allow rule matches a command only
  when the rule was written for that whole shape (`plain` scripts only);
- `commands`: every simple command anywhere in it — inside ``$(…)``,
  backticks, ``<(…)``, subshells, loops, the string of ``bash -c "…"`` and
  ``eval``, and the command behind a wrapper (``sudo``, ``env X=1``,
  ``nice``, ``timeout``, ``xargs``, …). Deny and ask rules and the floor look
  at all of them, so no spelling hides a command from them.

A word is `literal` when no expansion is left in it. ``~``, ``$HOME`` and
``$PWD`` are known (the person's home and the working directory); the value
with them expanded is `expanded`. Any other expansion or substitution makes
a word dynamic: an allow rule's wildcard never matches it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

#: A command longer than this is not parsed: it matches no allow rule (and is shown whole).
MAX_COMMAND_CHARS = 65_536
#: How deep `bash -c "…"` / `eval` strings are parsed inside one another.
MAX_NESTING = 4
#: At most this many simple commands are collected from one script.
MAX_COMMANDS = 512

#: Shells whose `-c STRING` is a script of its own.
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "busybox", "fish"})
#: Wrappers that run the command after their options: name → options that take a value.
WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group"}),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "-o", "--format", "--output"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "ionice": frozenset({"-c", "-n", "-p", "--class", "--classdata"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "xargs": frozenset({"-I", "-i", "-n", "-P", "-d", "-L", "-l", "-s", "-a", "-E", "-e",
                        "--max-args", "--max-procs", "--delimiter", "--arg-file", "--replace"}),
    "chroot": frozenset(),
    "flock": frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}),
    "unbuffer": frozenset(),
    "strace": frozenset({"-e", "-o", "-p", "-s", "-u"}),
    "watch": frozenset({"-n", "--interval", "-d"}),
    "caffeinate": frozenset(),
    "torsocks": frozenset(),
    "proxychains": frozenset({"-f"}),
    "firejail": frozenset(),
}
#: Wrappers whose first operand is not the command (timeout DURATION cmd, chroot DIR cmd, flock FILE cmd).
_LEADING_OPERAND = frozenset({"timeout", "chroot", "flock"})
#: Redirections that change no file: duplicating a descriptor, or writing to /dev/null.
HARMLESS_TARGETS = frozenset({"/dev/null"})

_STRUCTURE = frozenset({"program", "list", "pipeline", "redirected_statement", "negated_command"})
_OPERATORS = frozenset({";", "&&", "||", "|", "|&", "&"})


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


@dataclass(frozen=True, slots=True)
class Simple:
    """One simple command: assignments, words (the program first) and redirections."""

    words: tuple[Word, ...]
    assignments: tuple[str, ...] = ()
    redirects: tuple[Redirect, ...] = ()

    @property
    def program(self) -> str | None:
        """The program's name as written (a path kept), or None when it comes from an expansion."""
        return self.words[0].value if self.words else None

    def argv(self) -> list[str | None]:
        return [w.value for w in self.words]

    def text(self) -> str:
        return " ".join([*self.assignments, *(_quote(w) for w in self.words),
                         *(f"{r.operator}{_quote(r.target)}" for r in self.redirects)])


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
    """What the parser may expand: the home folder and the working directory."""

    home: str = ""
    cwd: str = ""


def parse(command: str, known: Known = Known()) -> Script:
    """The command as a Script (cached: the same command is parsed once)."""
    return _parse_cached(command, known.home, known.cwd)


def parse_argv(argv: list[str], known: Known = Known()) -> Script:
    """An argv list (no shell between it and the program): one segment of literal words."""
    words = tuple(Word(a, True, a) for a in argv)
    simple = Simple(words)
    commands = tuple(_effective(simple, known, 0))
    return Script(" ".join(_quote(w) for w in words), (simple,), (), True, commands)


@lru_cache(maxsize=2048)
def _parse_cached(command: str, home: str, cwd: str) -> Script:
    return _parse(command, Known(home, cwd), 0)


def _parser() -> Any:
    global _PARSER
    if _PARSER is None:
        import tree_sitter
        import tree_sitter_bash

        _PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
    return _PARSER


_PARSER: Any = None


def _parse(command: str, known: Known, depth: int) -> Script:
    if len(command) > MAX_COMMAND_CHARS or "\x00" in command:
        return Script(command, plain=False, unusual=("too long to read",))
    source = command.encode("utf-8", "surrogatepass")
    tree = _parser().parse(source)
    walker = _Walker(source, known, depth)
    segments, operators = walker.shape(tree.root_node)
    walker.collect(tree.root_node)
    if tree.root_node.has_error:
        walker.unusual.append("a part the shell parser could not read")
    plain = not walker.unusual and bool(segments)
    return Script(command, tuple(segments), tuple(operators), plain, tuple(walker.commands[:MAX_COMMANDS]),
                  tuple(dict.fromkeys(walker.unusual)))


class _Walker:
    def __init__(self, source: bytes, known: Known, depth: int) -> None:
        self.source = source
        self.known = known
        self.depth = depth
        self.unusual: list[str] = []
        self.commands: list[Simple] = []

    def text(self, node: Any) -> str:
        return self.source[node.start_byte:node.end_byte].decode("utf-8", "replace")

    # ---------------------------------------------------------------- the shape (allow rules)

    def shape(self, root: Any) -> tuple[list[Simple], list[str]]:
        segments: list[Simple] = []
        operators: list[str] = []
        self._shape(root, segments, operators)
        # A newline between statements separates them as ';' does.
        while len(operators) < len(segments) - 1:
            operators.append(";")
        if len(operators) == len(segments) and operators and operators[-1] == ";":
            operators.pop()  # a trailing ';' ends the last command and joins nothing
        return segments, operators

    def _shape(self, node: Any, segments: list[Simple], operators: list[str]) -> None:
        kind = node.type
        if kind == "comment":
            return
        if kind == "command":
            if len(operators) < len(segments):
                operators.append(";")
            segments.append(self.simple(node))
            return
        if kind == "redirected_statement":
            body = node.child_by_field_name("body")
            if body is None or body.type != "command":
                self.unusual.append(_describe(body.type if body is not None else "redirection"))
                return
            if len(operators) < len(segments):
                operators.append(";")
            simple = self.simple(body)
            redirects = tuple(r for r in (self.redirect(c) for c in node.children if c is not body) if r)
            segments.append(Simple(simple.words, simple.assignments, simple.redirects + redirects))
            return
        if kind == "negated_command":
            self.unusual.append("a negated command (!)")
            return
        if kind in _STRUCTURE:
            for child in node.children:
                if not child.is_named and child.type in _OPERATORS:
                    operators.append("|" if child.type == "|&" else child.type)
                elif child.is_named:
                    self._shape(child, segments, operators)
            return
        if kind == "variable_assignment":
            self.unusual.append("a variable assignment on its own")
            return
        self.unusual.append(_describe(kind))

    # ---------------------------------------------------------------- words

    def simple(self, node: Any) -> Simple:
        words: list[Word] = []
        assignments: list[str] = []
        redirects: list[Redirect] = []
        for child in node.children:
            kind = child.type
            if kind == "variable_assignment":
                assignments.append(self.text(child))
                self._note_dynamic(child)
            elif kind == "command_name":
                words.append(self.word(child.children[0] if child.children else child))
            elif kind in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                redirect = self.redirect(child)
                if redirect is not None:
                    redirects.append(redirect)
            elif child.is_named and kind != "comment":
                words.append(self.word(child))
        return Simple(tuple(words), tuple(assignments), tuple(redirects))

    def redirect(self, node: Any) -> Redirect | None:
        if node.type == "heredoc_redirect":
            self.unusual.append("a here-document")
            return None
        if node.type == "herestring_redirect":
            self.unusual.append("a here-string")
            return None
        if node.type != "file_redirect":
            return None
        descriptor = ""
        operator = ""
        target: Word | None = None
        for child in node.children:
            if child.type == "file_descriptor":
                descriptor = self.text(child)
            elif not child.is_named:
                operator = child.type
            else:
                target = self.word(child)
        return Redirect(descriptor + operator, target or Word(""))

    def _note_dynamic(self, node: Any) -> None:
        for child in node.children:
            self._note_dynamic(child)

    def word(self, node: Any) -> Word:
        parts: list[tuple[str, str | None]] = []  # (literal text or None-marked dynamic, expanded)
        literal = self._pieces(node, parts, top=True)
        text = "".join(p for p, _ in parts) if literal else self.text(node)
        expanded: str | None
        if all(e is not None for _, e in parts):
            expanded = "".join(e for _, e in parts if e is not None)
        else:
            expanded = None
        if literal:
            expanded = text
        return Word(text, literal, expanded)

    def _pieces(self, node: Any, parts: list[tuple[str, str | None]], *, top: bool = False) -> bool:
        """Append (text, expanded) pieces of a word; False when something in it is dynamic."""
        kind = node.type
        raw = self.text(node)
        if kind == "word":
            if top and raw.startswith("~"):
                user, slash, rest = raw[1:].partition("/")
                if not user and self.known.home:
                    parts.append((raw, self.known.home + slash + _unescape(rest)))
                else:
                    parts.append((raw, None))
                return False
            value = _unescape(raw)
            parts.append((value, value))
            return True
        if kind in ("number", "string_content"):
            value = _unescape_dq(raw) if kind == "string_content" else raw
            parts.append((value, value))
            return True
        if kind == "raw_string":
            value = raw[1:-1]
            parts.append((value, value))
            return True
        if kind == "string":
            ok = True
            inner = [c for c in node.children if c.is_named]
            if not inner:
                parts.append(("", ""))
            for child in inner:
                ok = self._pieces(child, parts) and ok
            return ok
        if kind == "concatenation":
            ok = True
            for i, child in enumerate(node.children):
                ok = self._pieces(child, parts, top=top and i == 0) and ok
            return ok
        if kind in ("simple_expansion", "expansion"):
            name = next((self.text(c) for c in node.children if c.type == "variable_name"), "")
            plain_form = raw in (f"${name}", f"${{{name}}}")
            known = {"HOME": self.known.home, "PWD": self.known.cwd}.get(name) if plain_form else None
            parts.append((raw, known or None))
            return False
        if kind in ("command_substitution", "process_substitution"):
            self.unusual.append("a command substitution" if kind == "command_substitution"
                                else "a process substitution")
            parts.append((raw, None))
            return False
        parts.append((raw, None))
        if kind not in ("ansi_c_string", "translated_string"):
            self.unusual.append(_describe(kind))
        return False

    # ---------------------------------------------------------------- every command (deny, ask, floor)

    def collect(self, node: Any) -> None:
        stack = [node]
        while stack:
            current = stack.pop()
            if current.type == "command":
                if len(self.commands) >= MAX_COMMANDS:
                    return
                simple = self.simple(current)
                parent = current.parent
                if parent is not None and parent.type == "redirected_statement":
                    extra = tuple(r for r in (self.redirect(c) for c in parent.children if c is not current) if r)
                    simple = Simple(simple.words, simple.assignments, simple.redirects + extra)
                self.commands.extend(_effective(simple, self.known, self.depth))
            stack.extend(reversed(current.children))


def _effective(simple: Simple, known: Known, depth: int) -> Iterator[Simple]:
    """The command itself, the command behind each wrapper, and the commands of a `-c` string."""
    yield simple
    words = list(simple.words)
    for _ in range(8):  # wrappers inside wrappers (sudo env X=1 nice rm …), bounded
        if not words or not words[0].literal:
            return
        name = _basename(words[0].text)
        if name in SHELLS or name == "eval":
            yield from _nested(name, words, known, depth)
            return
        takes_value = WRAPPERS.get(name)
        if takes_value is None:
            return
        i = 1
        while i < len(words):
            w = words[i].value or ""
            if name == "env" and "=" in w and not w.startswith("-"):
                i += 1
            elif w == "--":
                i += 1
                break
            elif w.startswith("-") and len(w) > 1:
                i += 2 if w in takes_value else 1
            else:
                break
        if name in _LEADING_OPERAND:
            i += 1
        words = words[i:]
        if not words:
            return
        yield Simple(tuple(words), (), simple.redirects)


def _nested(name: str, words: list[Word], known: Known, depth: int) -> Iterator[Simple]:
    if depth >= MAX_NESTING:
        return
    if name == "eval":
        script_words = words[1:]
    else:
        script_words = []
        for i, w in enumerate(words[1:], start=1):
            value = w.value or ""
            if value.startswith("-") and not value.startswith("--") and "c" in value[1:]:
                script_words = words[i + 1:i + 2]
                break
    if not script_words:
        return
    # A string with an expansion in it is still read: what it would run is what deny rules and
    # the floor must see ($HOME expanded where known, the rest as written).
    inner = _parse(" ".join(_script_text(w) for w in script_words), known, depth + 1)
    yield from inner.commands


def _script_text(word: Word) -> str:
    if word.value is not None:
        return word.value
    text = word.text
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'" else text


def _basename(program: str) -> str:
    return program.rsplit("/", 1)[-1]


def basename(program: str | None) -> str | None:
    return None if program is None else _basename(program)


def _unescape(raw: str) -> str:
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


def _unescape_dq(raw: str) -> str:
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


_SAFE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%^*")


def _quote(word: Word) -> str:
    if not word.literal:
        return word.text
    if word.text and all(ch in _SAFE_CHARS for ch in word.text):
        return word.text
    return "'" + word.text.replace("'", "'\\''") + "'"


_DESCRIPTIONS = {
    "subshell": "a subshell ( … )", "compound_statement": "a command group { … }",
    "if_statement": "an if statement", "while_statement": "a loop", "for_statement": "a loop",
    "c_style_for_statement": "a loop", "case_statement": "a case statement",
    "function_definition": "a function definition", "ERROR": "a part the shell parser could not read",
    "arithmetic_expansion": "an arithmetic expansion", "test_command": "a test [[ … ]]",
    "declaration_command": "a declaration", "unset_command": "an unset",
}


def _describe(kind: str) -> str:
    return _DESCRIPTIONS.get(kind, f"shell syntax ({kind.replace('_', ' ')})")
