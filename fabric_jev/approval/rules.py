"""Permission rules: a capability ref and patterns over its arguments → allow, ask or deny.

Written as Claude Code writes them, with the decision first::

    allow shell.exec(cmd: "pytest *")
    deny  fs.write(path: "./.env")
    allow browser.cdp(method: "Runtime.evaluate", params.expression: read-only-script)

The target is a ref (``shell.exec``), a ref pattern (``shell.*``, ``*``) or a
risk (``execute``). Each ``key: value`` names an argument (``params.url``
reaches inside ``params``) and a pattern:

- ``cmd`` (any of the command arguments: cmd, command, script, argv, …) is a
  shell command pattern, matched on parsed words (`fabric_jev.approval.shell`):
  ``*`` as a word stands for any further words, ``*`` inside a word for any
  characters, ``npm run test:*`` is Claude Code's spelling of
  ``npm run test *``. A pattern of one command never matches a compound
  command (``;``, ``&&``, ``||``, ``|``, ``$(…)``, backticks): only a pattern
  written for that whole shape does;
- ``path`` (path, file, dir, cwd, src, dest, …) is a path pattern
  (`fabric_jev.approval.paths`), matched on normalised paths;
- any other key is a string pattern (``*`` for any characters), or a JSON
  number, true, false or null compared as it is;
- a keyword instead of a pattern: ``inside-tree`` (every path inside the
  working directory), ``same-origin`` (a URL on an origin the run's input
  named), ``read-only-script`` (JavaScript that only reads the page,
  `fabric_jev.approval.scripts`), ``any`` (present, any value).

An allow rule must match every value it reads (every path, every command of
the shape, no expansion under a wildcard); a deny or ask rule matches when
any does, wrappers (``sudo``, ``env X=1``, ``bash -c "…"``) and nested
commands included. Pure code: the host passes the working directory, the
home folder and, to resolve symlinks, a function.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, get_args

from ..contract.policy import RISKS, Ruling
from ..errors import JevError
from . import paths as _paths
from . import shell as _shell

RULINGS: tuple[Ruling, ...] = get_args(Ruling)
KEYWORDS = frozenset({"inside-tree", "same-origin", "read-only-script", "any"})

#: The arguments each facet reads, at the top level or inside params/args/arguments/input.
COMMAND_KEYS = ("cmd", "command", "commandLine", "command_line", "script", "shellCommand",
                "shell_command", "argv")
PATH_KEYS = ("path", "paths", "file", "files", "filePath", "file_path", "filename", "fileName", "dir",
             "directory", "cwd", "workdir", "src", "source", "dest", "destination", "from", "to",
             "target_file", "targetFile")
URL_KEYS = ("url", "uri", "href", "endpoint")
SQL_KEYS = ("sql", "query", "statement")
_NESTS = ("params", "args", "arguments", "input")
FACETS = {"cmd": COMMAND_KEYS, "path": PATH_KEYS, "url": URL_KEYS, "sql": SQL_KEYS}

MAX_RULES = 1_000
MAX_RULE_CHARS = 2_000


class RuleError(JevError, ValueError):
    """A rule that cannot be read; the message says where. A JevError like every error the
    host raises, and still a ValueError for code that caught it as one."""


# ---------------------------------------------------------------------------- a call, as rules read it


@dataclass(slots=True)
class RuleContext:
    """Where the call runs: the working directory, the home folder, the run's origins."""

    cwd: str
    home: str
    origins: frozenset[str] = frozenset()
    #: Resolves symlinks (os.path.realpath on the host); None keeps paths lexical.
    resolve: Callable[[str], str] | None = None
    #: The temporary roots (/tmp, /var/tmp, $TMPDIR) below which a folder the user owns is theirs
    #: to change (fabric_jev.approval.places).
    temporary: tuple[str, ...] = ()
    #: The user id owning a path (os.lstat on the host), None when nothing is there; without it
    #: no temporary folder counts as the user's.
    owner: Callable[[str], int | None] | None = None
    #: The user the host runs as.
    uid: int | None = None

    @classmethod
    def here(cls, cwd: str, home: str, origins: frozenset[str] = frozenset()) -> RuleContext:
        """The context of a call made on this machine: symlinks resolved, its temporary roots,
        ownership looked up with lstat, the user the process runs as."""
        import os
        import os.path

        return cls(cwd, home, origins, os.path.realpath, temporary_roots(), owner_of, os.getuid())

    @property
    def where(self) -> _paths.Where:
        return _paths.Where(self.cwd, self.home)

    @property
    def known(self) -> _shell.Known:
        return _shell.Known(self.home, self.cwd)


def temporary_roots() -> tuple[str, ...]:
    """The temporary roots of this machine: /tmp, /var/tmp and $TMPDIR (an absolute folder that
    neither is nor holds the home folder), each also as its symlinks resolve (/tmp is
    /private/tmp on macOS)."""
    import os
    import posixpath

    roots = ["/tmp", "/var/tmp"]
    tmpdir = os.environ.get("TMPDIR", "")
    if tmpdir.startswith("/"):
        folder = posixpath.normpath(tmpdir)
        if folder != "/" and not _paths.inside(posixpath.normpath(os.path.expanduser("~")), folder):
            roots.append(folder)
    return tuple(dict.fromkeys([*roots, *(os.path.realpath(r) for r in roots)]))


def owner_of(path: str) -> int | None:
    """The user id that owns `path` itself (a symlink's own owner), None when nothing is there."""
    import os

    try:
        return os.lstat(path).st_uid
    except FileNotFoundError:
        return None


@dataclass(slots=True)
class CallView:
    """One capability call's arguments, read once per facet whatever the number of rules."""

    ref: str
    risk: str
    arguments: Any
    context: RuleContext
    _cache: dict[Any, Any] = field(default_factory=dict)

    def values(self, keys: Sequence[str]) -> list[Any]:
        """The values of `keys`, at the top level and one level inside params/args/arguments/input."""
        args = self.arguments
        if not isinstance(args, dict):  # JSON arguments: objects are dicts
            return []
        cached: list[Any] | None = self._cache.get(id(keys))  # keys are the module's constant tuples
        if cached is not None:
            return cached
        present = args.keys() & keys
        out = [args[k] for k in keys if k in present] if present else []
        for nest in _NESTS:
            inner = args.get(nest)
            if isinstance(inner, dict) and (found := inner.keys() & keys):
                out.extend(inner[k] for k in keys if k in found)
        self._cache[id(keys)] = out
        return out

    def get(self, dotted: str) -> tuple[bool, Any]:
        value = self.arguments
        for part in dotted.split("."):
            if not isinstance(value, dict) or part not in value:
                return False, None
            value = value[part]
        return True, value

    def scripts(self) -> list[_shell.Script]:
        """The commands in the call (a string is parsed by the shell grammar; a list is an argv)."""
        if "scripts" not in self._cache:
            out = []
            for value in self.values(COMMAND_KEYS):
                if isinstance(value, str):
                    out.append(_shell.parse(value, self.context.known))
                elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                    out.append(_shell.parse_argv(list(value), self.context.known))
            self._cache["scripts"] = out
        result: list[_shell.Script] = self._cache["scripts"]
        return result

    def paths(self) -> list[tuple[str, str] | None]:
        """Each path argument as (lexical, real); None for one that cannot be known."""
        if "paths" not in self._cache:
            out: list[tuple[str, str] | None] = []
            for value in self.values(PATH_KEYS):
                items = value if isinstance(value, list) else [value]
                for item in items:
                    out.append(self.path(item) if isinstance(item, str) else None)
            self._cache["paths"] = out
        result: list[tuple[str, str] | None] = self._cache["paths"]
        return result

    def path(self, text: str) -> tuple[str, str] | None:
        known: dict[str, tuple[str, str] | None] = self._cache.setdefault("path", {})
        if text in known:
            return known[text]
        found = known[text] = self._path(text)
        return found

    def _path(self, text: str) -> tuple[str, str] | None:
        lexical = _paths.normalise(text, self.context.where)
        if lexical is None:
            return None
        resolve = self.context.resolve
        real = lexical
        if resolve is not None:
            try:
                real = resolve(lexical)
            except (OSError, ValueError):
                real = lexical
        return lexical, real

    def strings(self, keys: Sequence[str]) -> list[str]:
        out = []
        for value in self.values(keys):
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, list):
                out.extend(v for v in value if isinstance(v, str))
        return out


# ---------------------------------------------------------------------------- patterns


class _Matcher:
    """One `key: pattern` of a rule."""

    key: str
    shown: str

    def strict(self, view: CallView) -> bool:  # allow rules: every value matches
        raise NotImplementedError

    def loose(self, view: CallView) -> bool:  # ask and deny rules: some value matches
        raise NotImplementedError


@lru_cache(maxsize=4096)
def _target_regex(pattern: str) -> re.Pattern[str]:
    return _glob_regex(pattern)


def _glob_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")) + r"\Z", re.DOTALL)


@dataclass(slots=True)
class _CommandMatcher(_Matcher):
    key: str
    shown: str
    pattern: _shell.Script
    #: Each pattern segment as (word regexes or None for a trailing/inner `*` word).
    segments: list[list[re.Pattern[str] | None]]

    @classmethod
    def make(cls, key: str, text: str) -> _CommandMatcher:
        source = re.sub(r":\*(?=\s*(?:$|[;&|]))", " *", text)  # npm run test:* → npm run test *
        script = _shell.parse(source)
        if not script.plain:
            raise RuleError(f"the command pattern {text!r} has {', '.join(script.unusual) or 'no command'}; "
                            "write a plain command (words joined by ;, &&, ||, |)")
        segments = []
        for segment in script.segments:
            words: list[re.Pattern[str] | None] = []
            for word in segment.words:
                words.append(None if word.text == "*" else _glob_regex(word.text))
            segments.append(words)
        return cls(key, f"{key}: {json.dumps(text)}", script, segments)

    def strict(self, view: CallView) -> bool:
        scripts = view.scripts() if self.key in FACETS else self._own(view)
        if not scripts:
            return False
        # The first word decides most rules at once (many rules, one call: ls, git, pytest, ...).
        head = self.pattern.segments[0].words[0].text if self.pattern.segments[0].words else ""
        if "*" not in head:
            for script in scripts:
                words = script.segments[0].words if script.segments else ()
                if not words or words[0].text != head:
                    return False
        return all(self._shape(s) for s in scripts)

    def _own(self, view: CallView) -> list[_shell.Script]:
        found, value = view.get(self.key)
        if not found:
            return []
        if isinstance(value, str):
            return [_shell.parse(value, view.context.known)]
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return [_shell.parse_argv(list(value), view.context.known)]
        return []

    def _shape(self, script: _shell.Script) -> bool:
        if not script.plain or script.operators != self.pattern.operators:
            return False
        if len(script.segments) != len(self.segments):
            return False
        for segment, pattern, pat_seg in zip(script.segments, self.segments, self.pattern.segments, strict=True):
            if segment.assignments != pat_seg.assignments:
                return False
            if _shown_redirects(segment) != _shown_redirects(pat_seg):
                return False
            if not _words_match(segment.words, pattern, strict=True):
                return False
        return True

    def loose(self, view: CallView) -> bool:
        scripts = view.scripts() if self.key in FACETS else self._own(view)
        for script in scripts:
            if len(self.segments) > 1:
                if self._shape(script):
                    return True
                continue
            if any(_words_match(c.words, self.segments[0], strict=False, home=view.context.home)
                   for c in script.commands):
                return True
        return False


def _shown_redirects(segment: _shell.Simple) -> tuple[tuple[str, str], ...]:
    return tuple((r.operator, r.target.text) for r in segment.redirects
                 if not (r.operator.endswith(">&") or r.target.text in _shell.HARMLESS_TARGETS))


def _words_match(words: Sequence[_shell.Word], pattern: Sequence[re.Pattern[str] | None], *, strict: bool,
                 home: str = "") -> bool:
    """Words against pattern words; None in the pattern is `*` (zero or more words).

    Strict (allow): a dynamic word matches only a pattern word of the same text, never a
    wildcard. Loose (deny, ask): a dynamic word matches any wildcard, and the program is
    compared by its name (/usr/bin/rm is rm)."""
    def word_ok(word: _shell.Word, regex: re.Pattern[str], first: bool) -> bool:
        if not word.literal:
            if strict:
                return regex.pattern == re.escape(word.text) + r"\Z"
            value = word.expanded
            if value is not None and home and value.startswith(home + "/") \
                    and regex.match("~" + value[len(home):]) is not None:  # "$HOME"/x is ~/x
                return True
            return (value is not None and regex.match(value) is not None) or regex.pattern == r".*\Z"
        text = word.text
        if first and not strict:
            text = _shell.basename(text) or text
        return regex.match(text) is not None

    def go(i: int, j: int) -> bool:
        if j == len(pattern):
            return i == len(words)
        regex = pattern[j]
        if regex is None:
            if j == len(pattern) - 1:
                return strict is False or all(w.literal for w in words[i:])
            for k in range(i, len(words) + 1):
                if (not strict or all(w.literal for w in words[i:k])) and go(k, j + 1):
                    return True
            return False
        return i < len(words) and word_ok(words[i], regex, i == 0) and go(i + 1, j + 1)

    return go(0, 0)


@dataclass(slots=True)
class _PathMatcher(_Matcher):
    key: str
    shown: str
    text: str

    def _paths(self, view: CallView) -> list[tuple[str, str] | None]:
        if self.key in FACETS:
            return view.paths()
        found, value = view.get(self.key)
        if not found:
            return []
        items = value if isinstance(value, list) else [value]
        return [view.path(v) if isinstance(v, str) else None for v in items]

    def strict(self, view: CallView) -> bool:
        pattern = _paths.compile_path_pattern(self.text, view.context.where)
        found = self._paths(view)
        return bool(found) and all(p is not None and pattern.matches(p[0]) and pattern.matches(p[1])
                                   for p in found)

    def loose(self, view: CallView) -> bool:
        pattern = _paths.compile_path_pattern(self.text, view.context.where)
        return any(p is not None and (pattern.matches(p[0]) or pattern.matches(p[1]))
                   for p in self._paths(view))


_NOTHING: Any = object()


def _hashable(value: Any) -> Any:
    """A JSON scalar with its type (1, 1.0 and True differ in a rule), or _NOTHING."""
    if isinstance(value, str | int | float | bool) or value is None:
        return (type(value).__name__, value)
    return _NOTHING


@dataclass(slots=True)
class _ValueMatcher(_Matcher):
    key: str
    shown: str
    regex: re.Pattern[str] | None
    literal: Any = None
    #: The one value this pattern matches, when it is exact (no `*`); else _NOTHING.
    exact: Any = _NOTHING

    def __post_init__(self) -> None:
        if self.regex is None:
            self.exact = _hashable(self.literal)
        elif "*" not in self.shown.split(": ", 1)[1]:
            self.exact = _hashable(json.loads(self.shown.split(": ", 1)[1]))

    def _values(self, view: CallView) -> list[Any]:
        if self.key in FACETS:
            return view.values(FACETS[self.key])
        found, value = view.get(self.key)
        return [value] if found else []

    def _one(self, value: Any) -> bool:
        if self.regex is None:
            return bool(value == self.literal and type(value) is type(self.literal))
        return isinstance(value, str) and self.regex.match(value) is not None

    def strict(self, view: CallView) -> bool:
        values = self._values(view)
        return bool(values) and all(self._one(v) for v in values)

    def loose(self, view: CallView) -> bool:
        return any(self._one(v) for v in self._values(view))


@dataclass(slots=True)
class _KeywordMatcher(_Matcher):
    key: str
    shown: str
    keyword: str

    def _values(self, view: CallView) -> list[Any]:
        if self.key in FACETS:
            return view.values(FACETS[self.key])
        found, value = view.get(self.key)
        return [value] if found else []

    def _one(self, view: CallView, value: Any) -> bool:
        kind = self.keyword
        if kind == "any":
            return True
        if kind == "same-origin":
            return isinstance(value, str) and origin_of(value) in view.context.origins
        if kind == "read-only-script":
            from .scripts import reads_only

            return isinstance(value, str) and reads_only(value)
        if kind == "inside-tree":
            if not isinstance(value, str):
                return False
            found = view.path(value)
            return found is not None and all(_paths.inside(p, view.context.cwd) for p in found)
        return False

    def strict(self, view: CallView) -> bool:
        values = self._values(view)
        return bool(values) and all(self._one(view, v) for v in values)

    def loose(self, view: CallView) -> bool:
        return any(self._one(view, v) for v in self._values(view))


def origin_of(url: str) -> str | None:
    """scheme://host[:port] of an http(s) URL, lower-cased; None for anything else."""
    match = re.match(r"(https?)://([^/?#@\s]+)(?:[/?#]|\Z)", url, re.IGNORECASE)
    return f"{match.group(1)}://{match.group(2)}".lower() if match else None


def _matcher(key: str, value: Any, keyword: str | None) -> _Matcher:
    if keyword is not None:
        if keyword not in KEYWORDS:
            raise RuleError(f"unknown keyword {keyword!r} for {key}; expected a quoted pattern or one of "
                            f"{', '.join(sorted(KEYWORDS))}")
        return _KeywordMatcher(key, f"{key}: {keyword}", keyword)
    if not isinstance(value, str):
        return _ValueMatcher(key, f"{key}: {json.dumps(value)}", None, value)
    leaf = key.rsplit(".", 1)[-1]
    if key == "cmd" or leaf in COMMAND_KEYS:
        return _CommandMatcher.make(key, value)
    if key == "path" or leaf in PATH_KEYS:
        return _PathMatcher(key, f"{key}: {json.dumps(value)}", value)
    return _ValueMatcher(key, f"{key}: {json.dumps(value)}", _glob_regex(value))


# ---------------------------------------------------------------------------- rules


@dataclass(slots=True)
class Rule:
    decision: Ruling
    target: str
    matchers: tuple[_Matcher, ...]
    #: Where it was written: "config", "project settings", "user settings", "default rules", "this run".
    source: str = "config"
    #: Floor entries this rule lifts (only a rule that names an entry lifts it).
    lifts: tuple[str, ...] = ()
    #: For commands: every operand that reads as a path lies inside the working directory.
    operands_inside: bool = False
    #: For commands: words that must not appear (patterns, e.g. "-exec", "--output*").
    without: tuple[re.Pattern[str], ...] = ()
    note: str | None = None
    #: Whether the rule reads the call's command facet (and so cannot match a call without one).
    on_command: bool = field(init=False, default=False)
    #: (key, value) of an exact, literal pattern the call must hold (an index of rules by it).
    exact: tuple[str, Any] | None = field(init=False, default=None)
    #: The program a rule's single command must start with (an index of rules by it): as written
    #: for an allow rule, its name (rm for /bin/rm) for a deny or ask rule.
    program: str | None = field(init=False, default=None)
    #: The folder of the working directory an allow rule's one path pattern lies in (an index).
    folder: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.on_command = any(m.key == "cmd" for m in self.matchers)
        for m in self.matchers:
            if isinstance(m, _ValueMatcher) and m.key not in FACETS and m.exact is not _NOTHING:
                self.exact = (m.key, m.exact)
                break
        for m in self.matchers:
            if isinstance(m, _CommandMatcher) and m.key in FACETS and len(m.segments) == 1 \
                    and m.pattern.segments[0].words and "*" not in m.pattern.segments[0].words[0].text:
                head = m.pattern.segments[0].words[0].text
                # An allow rule matches the program as written; deny and ask rules by its name.
                self.program = head if self.decision == "allow" else _shell.basename(head)
                break
        if self.decision == "allow" and self.exact is None and self.program is None and len(self.matchers) == 1:
            m = self.matchers[0]
            if isinstance(m, _PathMatcher) and m.key == "path":
                relative = m.text.strip()
                relative = relative[2:] if relative.startswith("./") else relative
                first, slash, _ = relative.partition("/")
                if slash and first and not relative.startswith(("/", "~")) and not set(first) & set("*?[.$"):
                    self.folder = first

    @property
    def pattern(self) -> str:
        """The rule as written, without its decision: ``shell.exec(cmd: "pytest *")``."""
        if not self.matchers:
            return self.target
        return f"{self.target}({', '.join(m.shown for m in self.matchers)})"

    @property
    def text(self) -> str:
        return f"{self.decision} {self.pattern}"

    def targets(self, ref: str, risk: str) -> bool:
        target = self.target
        if target in (ref, risk):
            return True
        return "*" in target and _target_regex(target).match(ref) is not None

    def matches(self, view: CallView) -> bool:
        if self.decision == "allow":
            if not all(m.strict(view) for m in self.matchers):
                return False
            return self._commands_ok(view)
        return all(m.loose(view) for m in self.matchers)

    def _commands_ok(self, view: CallView) -> bool:
        if not self.operands_inside and not self.without:
            return True
        for script in view.scripts():
            for segment in script.segments:
                words = segment.words[1:]
                if self.without and any(w.match(word.text) for word in words for w in self.without):
                    return False
                if self.operands_inside and not _operands_inside(words, view):
                    return False
        return True


def _operands_inside(words: Sequence[_shell.Word], view: CallView) -> bool:
    for word in words:
        if not word.literal:
            return False
        text = word.text
        if text.startswith("-"):
            if "=" not in text:
                continue
            text = text.split("=", 1)[1]
            if not text:
                continue
        found = view.path(text)
        if found is None or not all(_paths.inside(p, view.context.cwd) for p in found):
            return False
    return True


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")
_TARGET = re.compile(r"[A-Za-z0-9_*][A-Za-z0-9_.*\-]{0,255}")
_DECODER = json.JSONDecoder()


def parse_rule(text: str, decision: Ruling | None = None, *, source: str = "config",
               lifts: Iterable[str] = (), operands: str | None = None, without: Iterable[str] = (),
               note: str | None = None) -> Rule:
    """A rule from its text: ``allow shell.exec(cmd: "pytest *")``, or the pattern alone with
    `decision` given. RuleError says what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise RuleError("a rule must be a non-empty string")
    if len(text) > MAX_RULE_CHARS:
        raise RuleError(f"a rule holds at most {MAX_RULE_CHARS} characters")
    rest = text.strip()
    first, _, after = rest.partition(" ")
    if first in RULINGS:
        if decision is not None and decision != first:
            raise RuleError(f"the rule {text!r} says {first} under {decision}")
        decision, rest = first, after.strip()
    if decision is None:
        raise RuleError(f"the rule {text!r} must start with allow, ask or deny")
    target_match = _TARGET.match(rest)
    if target_match is None:
        raise RuleError(f"the rule {text!r} must name a capability ref, a ref pattern (shell.*) or a risk")
    target = target_match.group(0)
    if "*" not in target and "." not in target and target not in RISKS:
        raise RuleError(f"{target!r} is neither a capability ref (such as shell.exec) nor a risk "
                        f"({', '.join(RISKS)})")
    rest = rest[target_match.end():].strip()
    matchers: list[_Matcher] = []
    if rest:
        if not rest.startswith("(") or not rest.endswith(")"):
            raise RuleError(f"in {text!r}: after {target} comes (key: \"pattern\", ...) or nothing")
        matchers = _arguments(rest[1:-1], text)
    if decision == "allow" and operands not in (None, "inside-tree"):
        raise RuleError(f"operands must be \"inside-tree\" (in {text!r})")
    try:
        without_rx = tuple(_glob_regex(w) for w in without)
        lifted = tuple(str(x) for x in lifts)
    except TypeError:
        raise RuleError(f"lifts and without must be lists of strings (in {text!r})") from None
    return Rule(decision, target, tuple(matchers), source, lifted, operands == "inside-tree", without_rx, note)


def _arguments(body: str, text: str) -> list[_Matcher]:
    out: list[_Matcher] = []
    i = 0
    seen: set[str] = set()
    while True:
        while i < len(body) and body[i] in " \t":
            i += 1
        if i >= len(body):
            break
        key_match = _KEY.match(body, i)
        if key_match is None:
            raise RuleError(f"in {text!r}: expected an argument name at {body[i:i + 20]!r}")
        key = key_match.group(0)
        if key in seen:
            raise RuleError(f"in {text!r}: {key} is given twice")
        seen.add(key)
        i = key_match.end()
        while i < len(body) and body[i] == " ":
            i += 1
        if i >= len(body) or body[i] != ":":
            raise RuleError(f"in {text!r}: {key} must be followed by ':' and a pattern")
        i += 1
        while i < len(body) and body[i] == " ":
            i += 1
        keyword = re.match(r"[a-z][a-z\-]*", body[i:])
        if keyword and keyword.group(0) not in ("true", "false", "null"):
            out.append(_matcher(key, None, keyword.group(0)))
            i += keyword.end()
        else:
            try:
                value, end = _DECODER.raw_decode(body, i)
            except json.JSONDecodeError:
                raise RuleError(f"in {text!r}: the pattern of {key} must be a quoted string, a JSON literal "
                                f"or a keyword ({', '.join(sorted(KEYWORDS))})") from None
            if isinstance(value, dict | list):
                raise RuleError(f"in {text!r}: the pattern of {key} must be a string or a JSON literal")
            out.append(_matcher(key, value, None))
            i = end
        while i < len(body) and body[i] == " ":
            i += 1
        if i < len(body):
            if body[i] != ",":
                raise RuleError(f"in {text!r}: expected ',' after the pattern of {key}")
            i += 1
    return out


def parse_rules(raw: Any, *, source: str) -> tuple[Rule, ...]:
    """A list of rule objects (`{"allow": "ref(…)", "lifts"?, "operands"?, "without"?, "note"?}`) or strings."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RuleError(f"the {source} rules must be a list")
    if len(raw) > MAX_RULES:
        raise RuleError(f"the {source} rules hold at most {MAX_RULES} entries")
    out = []
    for n, item in enumerate(raw, start=1):
        where = f"{source} rule {n}"
        try:
            out.append(_rule_of(item, source))
        except RuleError as exc:
            raise RuleError(f"{where}: {exc}") from None
    return tuple(out)


def _rule_of(item: Any, source: str) -> Rule:
    if isinstance(item, str):
        return parse_rule(item, source=source)
    if not isinstance(item, dict):
        raise RuleError("a rule must be an object {\"allow\"|\"ask\"|\"deny\": \"ref(...)\"} or a string")
    decisions = [d for d in RULINGS if d in item]
    unknown = set(item) - {*RULINGS, "lifts", "operands", "without", "note", "from"}
    if len(decisions) != 1 or unknown:
        raise RuleError("a rule holds exactly one of allow, ask, deny"
                        + (f" (unknown keys: {', '.join(sorted(map(str, unknown)))})" if unknown else ""))
    decision = decisions[0]
    lifts, without, note = item.get("lifts", []), item.get("without", []), item.get("note")
    if not isinstance(lifts, list) or not isinstance(without, list) or not (note is None or isinstance(note, str)):
        raise RuleError("lifts and without are lists of strings, note a string")
    kept = item.get("from", source)  # where the command line found it: "project settings (PATH)", ...
    return parse_rule(item[decision], decision, source=str(kept), lifts=lifts, operands=item.get("operands"),
                      without=without, note=note)


# ---------------------------------------------------------------------------- a set of rules


@dataclass(frozen=True, slots=True)
class RuleMatch:
    decision: Ruling
    rule: Rule


@dataclass(slots=True)
class _Plan:
    """The rules of one decision for one (ref, risk), indexed so a call reads only those it may match."""

    rest: list[tuple[int, Rule]] = field(default_factory=list)
    keyed: dict[str, dict[Any, list[tuple[int, Rule]]]] = field(default_factory=dict)
    programs: dict[str, list[tuple[int, Rule]]] = field(default_factory=dict)
    commands: list[tuple[int, Rule]] = field(default_factory=list)
    folders: dict[str, list[tuple[int, Rule]]] = field(default_factory=dict)
    #: Whether `programs` holds deny/ask rules (keyed by every command's name, not the first word).
    loose: bool = False

    def chosen(self, view: CallView) -> list[Rule]:
        found = list(self.rest)
        many = False
        for key, table in self.keyed.items():
            present, value = view.get(key)
            if present:
                hit = table.get(_hashable(value))
                if hit:
                    found += hit
                    many = True
        if self.programs or self.commands:
            scripts = view.scripts()
            if scripts:
                found += self.commands
                many = True
                if self.loose:
                    names = {_shell.basename(c.words[0].text) for s in scripts for c in s.commands
                             if c.words and c.words[0].literal}
                    for name in names:
                        found += self.programs.get(name or "", [])
                else:
                    first = scripts[0].segments[0].words if scripts[0].segments else ()
                    if first and self.programs:
                        found += self.programs.get(first[0].text, [])
        if self.folders:
            paths = view.paths()
            cwd = view.context.cwd.rstrip("/") + "/"
            if paths and paths[0] is not None and paths[0][0].startswith(cwd):
                found += self.folders.get(paths[0][0][len(cwd):].split("/", 1)[0], [])
                many = True
        if many and len(found) > 1:
            found.sort(key=lambda item: item[0])
        return [rule for _, rule in found]


class RuleSet:
    """Rules indexed by target, then by an exact argument or a command's program, so a call
    reads only the rules that can concern it (a few of hundreds)."""

    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        self.rules: list[Rule] = []
        self._by_target: dict[str, list[Rule]] = {}
        self._patterned: list[Rule] = []
        #: The rules that can concern each (ref, risk), worked out once.
        self._candidates: dict[tuple[str, str], list[Rule]] = {}
        self._plans: dict[tuple[str, str], dict[str, _Plan]] = {}
        for rule in rules:
            self.add(rule)

    def add(self, rule: Rule) -> None:
        self.rules.append(rule)
        self._candidates.clear()
        self._plans.clear()
        if "*" in rule.target:
            self._patterned.append(rule)
        else:
            self._by_target.setdefault(rule.target, []).append(rule)

    def __len__(self) -> int:
        return len(self.rules)

    def candidates(self, ref: str, risk: str) -> list[Rule]:
        found = self._candidates.get((ref, risk))
        if found is None:
            by = self._by_target
            found = [*by.get(ref, ()), *by.get(risk, ()), *(r for r in self._patterned if r.targets(ref, risk))]
            found.sort(key=self.rules.index)  # the order they were written in
            if len(self._candidates) < 4096:
                self._candidates[(ref, risk)] = found
        return found

    def _plan(self, ref: str, risk: str) -> dict[str, _Plan]:
        plans = self._plans.get((ref, risk))
        if plans is None:
            plans = {d: _Plan() for d in RULINGS}
            for position, rule in enumerate(self.candidates(ref, risk)):
                plan = plans[rule.decision]
                item = (position, rule)
                if rule.exact is not None:
                    key, value = rule.exact
                    plan.keyed.setdefault(key, {}).setdefault(value, []).append(item)
                elif rule.program is not None:
                    plan.programs.setdefault(rule.program, []).append(item)
                    plan.loose = rule.decision != "allow"
                elif rule.folder is not None:
                    plan.folders.setdefault(rule.folder, []).append(item)
                elif rule.on_command:
                    plan.commands.append(item)
                else:
                    plan.rest.append(item)
            if len(self._plans) < 4096:
                self._plans[(ref, risk)] = plans
        return plans

    def first(self, decision: Ruling, view: CallView) -> Rule | None:
        for rule in self._plan(view.ref, view.risk)[decision].chosen(view):
            if rule.matches(view):
                return rule
        return None

    def lifting(self, entry: str, view: CallView, candidates: Sequence[Rule]) -> Rule | None:
        for rule in candidates:
            if rule.decision == "allow" and entry in rule.lifts and rule.matches(view):
                return rule
        return None
