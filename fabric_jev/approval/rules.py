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

This module holds a set of rules (`RuleSet`, indexed so a call reads only
the rules that may concern it) and keeps every name of the rules importable
here; a call as rules read it is `call_view`, the matchers and `Rule` are
`rule_matching`, reading a rule's text is `rule_parsing`. fabric-jev's own
default rule set is `default_rules.json`, loaded by `screen.default_rules`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..contract.policy import Ruling
from . import shell as _shell
from .call_view import (
    COMMAND_KEYS,
    FACETS,
    PATH_KEYS,
    SQL_KEYS,
    URL_KEYS,
    CallView,
    RuleContext,
    owner_of,
    temporary_roots,
)
from .rule_matching import KEYWORDS, Rule, RuleError, hashable, origin_of
from .rule_parsing import MAX_RULE_CHARS, MAX_RULES, RULINGS, parse_rule, parse_rules

__all__ = [
    "COMMAND_KEYS",
    "FACETS",
    "KEYWORDS",
    "MAX_RULES",
    "MAX_RULE_CHARS",
    "PATH_KEYS",
    "RULINGS",
    "SQL_KEYS",
    "URL_KEYS",
    "CallView",
    "Rule",
    "RuleContext",
    "RuleError",
    "RuleMatch",
    "RuleSet",
    "origin_of",
    "owner_of",
    "parse_rule",
    "parse_rules",
    "temporary_roots",
]


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
                hit = table.get(hashable(value))
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
