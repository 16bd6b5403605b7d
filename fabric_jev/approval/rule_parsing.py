"""Parsing a rule from its text (``allow shell.exec(cmd: "pytest *")``) or from a config's
rule object (``{"allow": "…", "lifts": […]}``); what is wrong raises `RuleError`, saying where.
The rule language is described in `fabric_jev.approval.rules`. Pure code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, get_args

from ..contract.policy import RISKS, Ruling
from .rule_matching import KEYWORDS, Matcher, Rule, RuleError, glob_regex, matcher

RULINGS: tuple[Ruling, ...] = get_args(Ruling)
MAX_RULES = 1_000
MAX_RULE_CHARS = 2_000


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
    matchers: list[Matcher] = []
    if rest:
        if not rest.startswith("(") or not rest.endswith(")"):
            raise RuleError(f"in {text!r}: after {target} comes (key: \"pattern\", ...) or nothing")
        matchers = _arguments(rest[1:-1], text)
    if decision == "allow" and operands not in (None, "inside-tree"):
        raise RuleError(f"operands must be \"inside-tree\" (in {text!r})")
    try:
        without_rx = tuple(glob_regex(w) for w in without)
        lifted = tuple(str(x) for x in lifts)
    except TypeError:
        raise RuleError(f"lifts and without must be lists of strings (in {text!r})") from None
    return Rule(decision, target, tuple(matchers), source, lifted, operands == "inside-tree", without_rx, note)


def _arguments(body: str, text: str) -> list[Matcher]:
    out: list[Matcher] = []
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
            out.append(matcher(key, None, keyword.group(0)))
            i += keyword.end()
        else:
            try:
                value, end = _DECODER.raw_decode(body, i)
            except json.JSONDecodeError:
                raise RuleError(f"in {text!r}: the pattern of {key} must be a quoted string, a JSON literal "
                                f"or a keyword ({', '.join(sorted(KEYWORDS))})") from None
            if isinstance(value, dict | list):
                raise RuleError(f"in {text!r}: the pattern of {key} must be a string or a JSON literal")
            out.append(matcher(key, value, None))
            i = end
        while i < len(body) and body[i] == " ":
            i += 1
        if i < len(body):
            if body[i] != ",":
                raise RuleError(f"in {text!r}: expected ',' after the pattern of {key}")
            i += 1
    return out


def parse_rules(raw: object, *, source: str) -> tuple[Rule, ...]:
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
