"""Shell commands as parsed words, never as raw strings (the approvals' rules and floor read them).

A real parser reads the command: tree-sitter's bash grammar, as Codex CLI does
for `bash -lc` scripts. A command becomes a `Script` (`shell_words`):

- `segments` and `operators`: the simple commands joined by ``;``, ``&&``,
  ``||``, ``|``, ``&`` (a newline counts as ``;``), each one's words after
  quote removal. This is its *shape*: an allow rule matches a command only
  when the rule was written for that whole shape (`plain` scripts only);
- `commands`: every simple command anywhere in it — inside ``$(…)``,
  backticks, ``<(…)``, subshells, loops, function bodies, the string of
  ``bash -c "…"`` and ``eval``, and the command behind a wrapper (``sudo``,
  ``env X=1``, ``nice``, ``timeout``, ``xargs``, ``busybox``, …,
  `shell_wrappers`); a redirection with no command (``> /etc/passwd``) and
  an assignment (``export PATH=…``) are commands without words. Deny and ask
  rules and the floor look at all of them, so no spelling hides a command
  from them. Each knows its standard input (a pipe, a here-document), the
  folders an earlier ``cd`` names, and the function whose body holds it;
- `opaque`: what the parser could not read (a parse error, scripts nested too
  deep, too many commands): the floor asks a person about those.

A word is `literal` when no expansion is left in it. ``~``, ``$HOME``,
``$PWD`` and ``$(pwd)`` are known (the person's home and the working
directory; ``$PWD`` and ``$(pwd)`` only in a script that does not change
folder); the value with them expanded is `expanded`. Any other expansion or
substitution makes a word dynamic: an allow rule's wildcard never matches it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache
from typing import Any

from . import shell_fresh as _fresh
from .shell_words import (
    Known,
    Redirect,
    Script,
    Simple,
    Word,
    basename,
    misread,
    plain_declaration,
    quote,
    substitutions,
    unescape,
    unescape_dq,
)
from .shell_wrappers import MAX_NESTING, SHELLS, WRAPPERS, effective

__all__ = [
    "HARMLESS_TARGETS",
    "MAX_COMMANDS",
    "MAX_COMMAND_CHARS",
    "MAX_NESTING",
    "SHELLS",
    "WRAPPERS",
    "Known",
    "Redirect",
    "Script",
    "Simple",
    "Word",
    "basename",
    "parse",
    "parse_argv",
]

#: A command longer than this is not parsed: it matches no allow rule (and is shown whole).
MAX_COMMAND_CHARS = 65_536
#: At most this many simple commands are collected from one script; more is opaque.
MAX_COMMANDS = 512
#: Redirections that change no file: duplicating a descriptor, or writing to /dev/null.
HARMLESS_TARGETS = frozenset({"/dev/null"})

_STRUCTURE = frozenset({"program", "list", "pipeline", "redirected_statement", "negated_command"})
_OPERATORS = frozenset({";", "&&", "||", "|", "|&", "&"})
_REDIRECTS = frozenset({"file_redirect", "herestring_redirect", "heredoc_redirect"})
#: Redirections after which the grammar may read the command's own words (`_spilled`).
_SPILLING = frozenset({"file_redirect", "heredoc_redirect"})
#: Files that stand for a descriptor the command inherits (its input is not a file one can read).
_INPUT_FILES = ("/dev/stdin", "/dev/fd/", "/proc/self/fd/", "/dev/tcp/", "/dev/udp/")
#: Commands that change the folder later commands run in.
_CHDIR = frozenset({"cd", "pushd", "popd", "chdir"})
#: A script that may change folder: $PWD and $(pwd) in it are not the working directory. Read
#: over the raw text on purpose: a false alarm only makes $PWD unknown (more is asked, never less).
_MAY_CHANGE_FOLDER = re.compile(r"\b(?:cd|pushd|popd|chdir)\b")
#: Nothing known: no home folder, no working directory.
NOWHERE = Known()


def parse(command: str, known: Known = NOWHERE) -> Script:
    """The command as a Script (cached: the same command is parsed once)."""
    return _parse_cached(command, known.home, known.cwd, known.tmpdir)


def parse_argv(argv: list[str], known: Known = NOWHERE) -> Script:
    """An argv list (no shell between it and the program): one segment of literal words."""
    words = tuple(Word(a, True, a) for a in argv)
    simple = Simple(words)
    opaque: list[str] = []
    commands = tuple(effective(simple, known, 0, _nested_parser(known), opaque))
    return Script(" ".join(quote(w) for w in words), (simple,), (), True, commands, (),
                  tuple(dict.fromkeys(opaque)))


@lru_cache(maxsize=2048)
def _parse_cached(command: str, home: str, cwd: str, tmpdir: str | None) -> Script:
    return _parse(command, Known(home, cwd, tmpdir), 0, None)


def _nested_parser(known: Known) -> Any:
    def nested(text: str, depth: int, outer: Simple) -> Script:
        # After a cd (or `env -C`), $PWD in a nested script is that folder, not the working directory.
        inner = known if not outer.dirs else replace(known, cwd="")
        program = basename(outer.program)
        if inner.fresh and program not in ("trap", "eval") and (
                program in ("ssh", "rsh") or any(w.literal and w.text == text for w in outer.words)):
            # sh -c '… "$d"': another process, whose $d is not this script's (it is not exported);
            # ssh host "rm -rf $d": that path on another machine.
            inner = replace(inner, fresh=frozenset())
        return _parse(text, inner, depth, outer)
    return nested


def _parser() -> Any:
    global _PARSER
    if _PARSER is None:
        import tree_sitter
        import tree_sitter_bash

        _PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
    return _PARSER


_PARSER: Any = None


def _parse(command: str, known: Known, depth: int, outer: Simple | None) -> Script:
    """`outer` is the command a nested script runs in (`bash -c "…"`): its commands inherit its
    standard input, folders and function."""
    if len(command) > MAX_COMMAND_CHARS or "\x00" in command:
        return Script(command, plain=False, unusual=("too long to read",), opaque=("too long to read",))
    if known.cwd and _MAY_CHANGE_FOLDER.search(command):
        known = replace(known, cwd="")
    if known.tmpdir is not None and _fresh.sets_tmpdir(command):
        known = replace(known, tmpdir=None)  # TMPDIR=/ … "$TMPDIR/x": not the host's
    source = command.encode("utf-8", "surrogatepass")
    tree = _parser().parse(source)
    walker = _Walker(source, known, depth, outer)
    walker.spans = _fresh.fresh_names(tree.root_node, walker.text, known)
    walker.fresh = frozenset(walker.spans)
    segments, operators = walker.shape(tree.root_node)
    walker.collect(tree.root_node)
    if tree.root_node.has_error:
        walker.unusual.append("a part the shell parser could not read")
        walker.opaque.append("a part the shell parser could not read")
    plain = not walker.unusual and bool(segments)
    return Script(command, tuple(segments), tuple(operators), plain, tuple(walker.commands[:MAX_COMMANDS]),
                  tuple(dict.fromkeys(walker.unusual)), tuple(dict.fromkeys(walker.opaque)))


class _Walker:
    def __init__(self, source: bytes, known: Known, depth: int, outer: Simple | None) -> None:
        self.source = source
        self.known = known
        self.depth = depth
        self.outer = outer
        self.unusual: list[str] = []
        self.opaque: list[str] = []
        self.commands: list[Simple] = []
        #: The folders named by a cd so far (None: one cannot be known).
        self.dirs: tuple[str, ...] | None = outer.dirs if outer is not None else ()
        self.nested = _nested_parser(known)
        #: Variables that provably hold a path mktemp made (`shell_fresh`), and where in the text.
        self.fresh: frozenset[str] = frozenset()
        self.spans: dict[str, tuple[int, int]] = {}

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
            segments.append(self._with_statement_redirects(simple, node, body))
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
            elif kind == "command_name":
                words.append(self.word(child.children[0] if child.children else child))
            elif kind in _REDIRECTS:
                redirects.extend(self.redirects(child))
                words.extend(self.word(d) for d in _spilled(child))
            elif kind == "number" and _descriptor(child):
                continue  # bash 0<<<'…': the grammar reads the 0 of `0<` as a word
            elif child.is_named and kind != "comment":
                words.append(self.word(child))
        return Simple(tuple(words), tuple(assignments), tuple(redirects))

    def redirects(self, node: Any) -> list[Redirect]:
        """A redirection as Redirects: none for a here-document or here-string (their text is
        input, not a file), but the file redirections written after a here-document's start."""
        if node.type == "heredoc_redirect":
            self.unusual.append("a here-document")
            return [r for c in node.children if c.type == "file_redirect" for r in self.redirects(c)]
        if node.type == "herestring_redirect":
            self.unusual.append("a here-string")
            return []
        if node.type != "file_redirect":
            return []
        descriptor = ""
        operator = ""
        target: Word | None = None
        for child in node.children:
            if child.type == "file_descriptor":
                descriptor = self.text(child)
            elif not child.is_named:
                operator = child.type
            elif target is None:  # the first word is the target; the grammar reads on (`_spilled`)
                target = self.word(child)
        return [Redirect(descriptor + operator, target or Word(""))]

    def _with_statement_redirects(self, simple: Simple, statement: Any, body: Any) -> Simple:
        """The command with the redirections written after it, and the words the grammar read
        as more targets of one (`rm >/dev/null -rf /` is `rm -rf /` to bash)."""
        spilled = [self.word(d) for c in statement.children if c is not body and c.type in _SPILLING
                   for d in _spilled(c)]
        return replace(simple, words=simple.words + tuple(spilled),
                       redirects=simple.redirects + self._statement_redirects(statement, body))

    def _statement_redirects(self, statement: Any, body: Any) -> tuple[Redirect, ...]:
        return tuple(r for c in statement.children if c is not body and c.type in _REDIRECTS
                     for r in self.redirects(c))

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
        elif expanded is not None and _fresh.FRESH in expanded and expanded.rstrip("/") != _fresh.FRESH:
            expanded = None  # "$(mktemp -d)/..": only the new path itself is known to be new
        return Word(text, literal, expanded)

    def _pieces(self, node: Any, parts: list[tuple[str, str | None]], *, top: bool = False,
                quoted: bool = False) -> bool:
        """Append (text, expanded) pieces of a word; False when something in it is dynamic."""
        kind = node.type
        raw = self.text(node)
        if kind == "word":
            if "\n" in raw.replace("\\\n", ""):
                # Bash ends a word at an unquoted line break; the grammar sometimes reads on
                # (`ls<newline>\m\k\f\s /dev/sdb1`): what bash would run is not what was parsed.
                self.opaque.append("a word the shell parser read across a line break")
            if top and raw.startswith("~"):
                user, slash, rest = raw[1:].partition("/")
                if not user and self.known.home:
                    parts.append((raw, self.known.home + slash + unescape(rest)))
                else:
                    parts.append((raw, None))
                return False
            value = unescape(raw)
            parts.append((value, value))
            return True
        if kind in ("number", "string_content"):
            value = unescape_dq(raw) if kind == "string_content" else raw
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
                ok = self._pieces(child, parts, quoted=True) and ok
            return ok
        if kind == "concatenation":
            ok = True
            for i, child in enumerate(node.children):
                ok = self._pieces(child, parts, top=top and i == 0, quoted=quoted) and ok
            return ok
        if kind in ("simple_expansion", "expansion"):
            name = next((self.text(c) for c in node.children if c.type == "variable_name"), "")
            plain_form = raw in (f"${name}", f"${{{name}}}")
            known = {"HOME": self.known.home, "PWD": self.known.cwd}.get(name) if plain_form else None
            one_word = quoted or _fresh.unquoted_ok(self.known)
            if name == "TMPDIR" and one_word:
                known = _fresh.tmpdir_value(raw, self.known)
            elif plain_form and name in self.fresh and one_word:
                known = _fresh.FRESH
            parts.append((raw, known or None))
            return False
        if kind in ("command_substitution", "process_substitution"):
            self.unusual.append("a command substitution" if kind == "command_substitution"
                                else "a process substitution")
            inner_text = raw[2:-1] if raw.startswith("$(") else raw[1:-1]
            pwd = self.known.cwd if kind == "command_substitution" and inner_text.strip() in (
                "pwd", "pwd -L", "pwd -P") else ""
            if kind == "command_substitution" and self.known.tmpdir is not None \
                    and (quoted or _fresh.unquoted_ok(self.known)) and _fresh.substitution_is_fresh(node, self.text):
                pwd = _fresh.FRESH
            parts.append((raw, pwd or None))
            return False
        parts.append((raw, None))
        if kind not in ("ansi_c_string", "translated_string"):
            self.unusual.append(_describe(kind))
        return False

    # ---------------------------------------------------------------- every command (deny, ask, floor)

    def collect(self, root: Any) -> None:
        stack = [root]
        while stack:
            node = stack.pop()
            if node.type == "test_command" and _test_reads_on(self.source, node):
                # Fail closed: what the test swallowed are commands bash runs (`[ -d / ] && rm -rf ~ ]`).
                self.opaque.append("a test [ … ] the parser read past its end")
            if node.type == "heredoc_body":
                self._heredoc_substitutions(node)
            found = self._statement(node)
            if found is not None:
                if len(self.commands) >= MAX_COMMANDS:
                    self.opaque.append(f"more than {MAX_COMMANDS} commands")
                    return
                self._add(found, node)
            stack.extend(reversed(node.children))

    def _heredoc_substitutions(self, body: Any) -> None:
        """The commands of ``$(…)`` and backticks in an unquoted here-document's body that the
        grammar left as text (backticks, ``<<-``): bash runs them before the command."""
        start = next((c for c in body.parent.children if c.type == "heredoc_start"), None) if body.parent else None
        if start is None or any(q in self.text(start) for q in "'\"\\"):
            return  # <<'EOF': the body is literal
        parsed = [(c.start_byte - body.start_byte, c.end_byte - body.start_byte) for c in body.children
                  if c.type == "command_substitution"]
        raw = self.text(body)
        for a, b in parsed:  # read by the grammar already (collect walks them)
            raw = raw[:a] + " " * (b - a) + raw[b:]
        inner = substitutions(raw)
        if inner is None:
            self.opaque.append("a here-document whose substitutions cannot be read")
            return
        for text in inner:
            if self.depth >= MAX_NESTING:
                self.opaque.append(f"scripts nested deeper than {MAX_NESTING}")
                return
            script = self.nested(text, self.depth + 1, Simple((), dirs=self.dirs))
            self.opaque.extend(script.opaque)
            self.commands.extend(script.commands)

    def _statement(self, node: Any) -> Simple | None:
        """The simple command a node stands for: a command, a redirection with no command (or
        around a group, a loop), a declaration or a bare assignment; None for any other node."""
        kind = node.type
        parent = node.parent
        if kind == "command":
            simple = self.simple(node)
            if parent is not None and parent.type == "redirected_statement":
                simple = self._with_statement_redirects(simple, parent, node)
            return simple
        if kind == "redirected_statement":
            body = node.child_by_field_name("body")
            if body is None or body.type != "command":
                redirects = self._statement_redirects(node, body)
                if any(_spilled(c) for c in node.children if c.type in _SPILLING):
                    # Words bash hands to the last command of the group or list, read as targets.
                    self.opaque.append("a redirection the parser read on past its target")
                return Simple((), (), redirects) if redirects else None
            return None
        if kind == "declaration_command":
            if not plain_declaration(node, self.text):
                self.opaque.append("a variable name spelled with quotes, escapes or braces")
            words = [Word(c.type) for c in node.children[:1] if not c.is_named]
            words += [Word(self.text(c)) if c.type == "variable_name" else self.word(c)
                      for c in node.children if c.is_named and c.type != "variable_assignment"]
            assignments = tuple(self.text(c) for c in node.children if c.type == "variable_assignment")
            return Simple(tuple(words), assignments)
        if kind == "variable_assignment" and parent is not None \
                and parent.type not in ("command", "declaration_command"):
            return Simple((), (self.text(node),))
        return None

    def _add(self, simple: Simple, node: Any) -> None:
        outer = self.outer
        simple = replace(simple, stdin=self._stdin(node) or (outer.stdin if outer else ""),
                         dirs=self.dirs, within=self._within(node) or (outer.within if outer else ""),
                         fed=outer.fed if outer else "")
        nested = self.nested
        inherited = frozenset(n for n, (after, end) in self.spans.items() if after <= node.start_byte < end)
        if inherited:  # a script in this command sees the variables assigned before it
            nested = _nested_parser(replace(self.known, fresh=inherited))
        for command in effective(simple, self.known, self.depth, nested, self.opaque):
            why = misread(command)
            if why:
                self.opaque.append(why)
            self.commands.append(command)
            self._chdir(command)

    def _stdin(self, node: Any) -> str:
        """What the command at `node` reads as its standard input, from the nearest place that says."""
        current = node
        while current is not None:
            for child in current.children:
                kind = child.type
                if kind == "heredoc_redirect":
                    return "here-document"
                if kind == "herestring_redirect":
                    return "here-string"
                if kind == "file_redirect" and any(c.type in ("<", "<&") for c in child.children):
                    target = next((c for c in child.children if c.is_named and c.type != "file_descriptor"), None)
                    word = self.word(target) if target is not None else None
                    if word is None or not word.literal or word.text.startswith(_INPUT_FILES):
                        return "substitution"  # < <(…), < /dev/stdin: what it reads only the run knows
                    return "file"
            before = current.prev_sibling
            if before is not None and before.type in ("|", "|&"):
                return "pipe"
            current = current.parent
        return ""

    def _within(self, node: Any) -> str:
        current = node.parent
        while current is not None:
            if current.type == "function_definition":
                name = next((c for c in current.children if c.type == "word"), None)
                return self.text(name) if name is not None else ""
            current = current.parent
        return ""

    def _chdir(self, command: Simple) -> None:
        """A cd, pushd or chdir adds its folder to those later commands may run in."""
        changes, target = folder_change(command)
        if not changes or self.dirs is None:
            return
        self.dirs = None if target is None or len(self.dirs) >= 16 else (*self.dirs, target)


def folder_change(command: Simple) -> tuple[bool, str | None]:
    """(whether the command changes folder, the folder as written or None when it cannot be
    known): ``cd -``, ``popd``, ``pushd`` alone and ``pushd +1`` go back to a folder of the stack
    the floor does not know, and ``cd`` alone to the home folder (unknown without one)."""
    name = basename(command.program)
    if name not in _CHDIR:
        return False, None
    operands = [w for w in command.words[1:] if not (w.literal and w.text.startswith("-") and w.text != "-")]
    if name == "popd" or not operands:
        return True, "~" if name in ("cd", "chdir") and not operands else None
    if operands[0].literal and operands[0].text[:1] in ("-", "+"):
        return True, None
    return True, operands[0].value


#: Parts of a test whose text cannot end it: quoted, expanded or substituted (masked before reading).
_SEALED = frozenset({"string", "raw_string", "ansi_c_string", "translated_string", "command_substitution",
                     "process_substitution", "expansion", "simple_expansion", "arithmetic_expansion"})
#: What ends a `[ … ]` test (and so a command) in bash; `[[ … ]]` also allows `&&`, `||`, newlines
#: and, after `=~`, a `|` in the regex.
_ENDS_TEST = re.compile(rb"&&|\|\||[|&;\n]")
_ENDS_DOUBLE_TEST = re.compile(rb"(?<![&|])[&;](?![&|])")


#: Children of a here-document's redirection that are words of the command (the grammar also puts
#: there the pipeline or list that follows, read as commands of their own).
_WORDS = frozenset({"word", "string", "raw_string", "ansi_c_string", "translated_string", "number", "concatenation",
                    "simple_expansion", "expansion", "command_substitution", "process_substitution",
                    "arithmetic_expansion", "brace_expression"})


def _descriptor(number: Any) -> bool:
    """Whether a number the grammar read as a word is a redirection's descriptor (``0<``)."""
    after = number.next_sibling
    if after is None and number.parent is not None and number.parent.type == "command":
        after = number.parent.next_sibling
    return after is not None and after.type in _REDIRECTS and after.start_byte == number.end_byte


def _spilled(redirect: Any) -> list[Any]:
    """The words after a redirection's target that the grammar reads as more targets: bash ends
    the target at the first word, the rest are the command's arguments. After a here-document's
    delimiter every word is one (``rm <<EOF -rf ~`` runs ``rm -rf ~``), also those after a file
    redirection written there."""
    if redirect.type == "heredoc_redirect":
        return [d for c in redirect.children if c.type in _WORDS or c.type == "file_redirect"
                for d in (_spilled(c) if c.type == "file_redirect" else [c])]
    found = [c for c in redirect.children if c.is_named and c.type != "file_descriptor"]
    return found[1:] if redirect.type == "file_redirect" else []


def _test_reads_on(source: bytes, node: Any) -> bool:
    """Whether the grammar read a test past where bash ends it. tree-sitter-bash takes a lone
    ``/``, ``*``, ``==``, … inside the brackets for an operator and extends the one test through
    ``&&``, ``|`` or ``;`` up to a later ``]`` or ``]]``, with no parse error: the commands in it
    would be read by no one. Bash ends ``[`` at any unquoted separator, ``[[`` at its first ``]]``."""
    start = node.start_byte
    text = bytearray(source[start:node.end_byte])
    stack = list(node.children)
    while stack:
        child = stack.pop()
        if child.type in _SEALED:
            text[child.start_byte - start:child.end_byte - start] = b"x" * (child.end_byte - child.start_byte)
        else:
            stack.extend(child.children)
    masked = re.sub(rb"\\.", b"xx", bytes(text), flags=re.DOTALL)
    tokens = masked.split()
    if not tokens:
        return False
    closer = b"]]" if tokens[0] == b"[[" else b"]"
    if tokens[-1] != closer or any(t in (b"]", b"]]") for t in tokens[1:-1]):
        return True
    if closer == b"]":
        return _ENDS_TEST.search(masked) is not None
    if _ENDS_DOUBLE_TEST.search(masked) or (b"|" in masked.replace(b"||", b"") and b"=~" not in masked):
        return True
    # A line break inside [[ … ]] is bash's only after && or || (or an opening parenthesis).
    return re.search(rb"(?<![&|(\s])[ \t]*\n", masked) is not None


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
