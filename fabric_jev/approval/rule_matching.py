"""Matching: each `key: pattern` of a rule as a matcher, and a rule as its target and matchers.

A command pattern is matched on parsed words (`fabric_jev.approval.shell`), a
path pattern on normalised paths (`fabric_jev.approval.paths`), any other
pattern on the argument's string, a keyword (`inside-tree`, `same-origin`,
`read-only-script`, `any`) by what it names. An allow rule must match every
value it reads (`strict`), a deny or ask rule some value (`loose`). Reading a
pattern raises `RuleError` when it cannot be a matcher. Pure code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..contract.policy import Ruling
from ..errors import JevError
from . import paths as _paths
from . import shell as _shell
from .call_view import COMMAND_KEYS, FACETS, PATH_KEYS, CallView

KEYWORDS = frozenset({"inside-tree", "same-origin", "read-only-script", "any"})


class RuleError(JevError, ValueError):
    """A rule that cannot be read; the message says where. A JevError like every error the
    host raises, and still a ValueError for code that caught it as one."""


# ---------------------------------------------------------------------------- patterns


class Matcher:
    """One `key: pattern` of a rule."""

    key: str
    shown: str

    def strict(self, view: CallView) -> bool:  # allow rules: every value matches
        raise NotImplementedError

    def loose(self, view: CallView) -> bool:  # ask and deny rules: some value matches
        raise NotImplementedError


@lru_cache(maxsize=4096)
def target_regex(pattern: str) -> re.Pattern[str]:
    return glob_regex(pattern)


def glob_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")) + r"\Z", re.DOTALL)


@dataclass(slots=True)
class _CommandMatcher(Matcher):
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
                words.append(None if word.text == "*" else glob_regex(word.text))
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
class _PathMatcher(Matcher):
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


def hashable(value: object) -> object:
    """A JSON scalar with its type (1, 1.0 and True differ in a rule), or _NOTHING."""
    if isinstance(value, str | int | float | bool) or value is None:
        return (type(value).__name__, value)
    return _NOTHING


@dataclass(slots=True)
class _ValueMatcher(Matcher):
    key: str
    shown: str
    regex: re.Pattern[str] | None
    literal: Any = None
    #: The one value this pattern matches, when it is exact (no `*`); else _NOTHING.
    exact: Any = _NOTHING

    def __post_init__(self) -> None:
        if self.regex is None:
            self.exact = hashable(self.literal)
        elif "*" not in self.shown.split(": ", 1)[1]:
            self.exact = hashable(json.loads(self.shown.split(": ", 1)[1]))

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
class _KeywordMatcher(Matcher):
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


def matcher(key: str, value: object, keyword: str | None) -> Matcher:
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
    return _ValueMatcher(key, f"{key}: {json.dumps(value)}", glob_regex(value))


# ---------------------------------------------------------------------------- a rule


@dataclass(slots=True)
class Rule:
    decision: Ruling
    target: str
    matchers: tuple[Matcher, ...]
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
        return "*" in target and target_regex(target).match(ref) is not None

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
