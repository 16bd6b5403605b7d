"""Vendor token shapes from kept secret-scanner rule sets, read as data (contract §8).

The rules live in `secret_rules/` beside this module, as their projects wrote
them: gitleaks' default rules (MIT) and Kingfisher's Ethereum private-key rule
(Apache-2.0); each file names its source, commit and licence. They are regexes
in RE2 syntax (gitleaks is written in Go, whose regexp is RE2), so they keep
redaction's linear time.

They are applied as gitleaks applies them, with three differences that suit
redaction better than scanning: entropy thresholds are not kept (a key whose
body is `0000…` is still a key someone pasted), a rule's file-path
conditions do not exist (redaction sees text, not files), and a token may end
at any word boundary, not only before a quote, a space or `;` (`dop_v1_…,`). A rule runs only
when one of its keywords occurs in the text (case-insensitively), found for
all rules at once by one RE2 set; its secret is the rule's `secretGroup`, else
its first non-empty group, else the whole match; a secret its allowlist (or
the rule set's global allowlist) matches is left alone. Files are read and
patterns compiled on first use, not at import.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import re2

__all__ = ["VendorRule", "rule_sources", "rules_for"]

_FILES = ("gitleaks.toml", "kingfisher.toml")
#: No kept rule matches fewer characters (curl-auth-user's shortest match; a test keeps this true).
SHORTEST_MATCH = 10
#: How gitleaks ends most of its token patterns: a quote, a space, `;`, an escaped newline or the
#: end. Redaction widens it to any word boundary, so `dop_v1_…,` in a list is a key too.
_CLOSING = r"""(?:[\x60'"\s;]|\\[nr]|$)"""


class VendorRule:
    """One kept rule: its id, the rule set it comes from, its regex, keywords, secret group and
    allowlist regexes (the rule's own and its rule set's)."""

    __slots__ = ("__dict__", "allow", "id", "keywords", "regex", "secret_group", "source")

    def __init__(self, id: str, source: str, regex: str, keywords: tuple[str, ...],
                 secret_group: int | None, allow: tuple[str, ...]) -> None:
        self.id, self.source, self.regex = id, source, regex
        self.keywords, self.secret_group, self.allow = keywords, secret_group, allow

    @property
    def kind(self) -> str:
        """The marker's words: `digitalocean-pat` is `[redacted: digitalocean pat]`."""
        return self.id.replace("-", " ")

    @functools.cached_property
    def pattern(self) -> Any:
        return re2.compile(self.regex.replace(_CLOSING, r"(?:\b|$)"))

    @functools.cached_property
    def allowed(self) -> Any:
        """One pattern for the allowlist regexes (the rule's and its rule set's), or None."""
        return re2.compile("|".join(f"(?:{r})" for r in self.allow)) if self.allow else None


def _read(name: str) -> dict[str, Any]:
    import tomllib  # the rule files are read on first use, not at import

    text = (Path(__file__).parent / "secret_rules" / name).read_text(encoding="utf-8")
    return tomllib.loads(text)


@functools.cache
def _loaded() -> tuple[tuple[VendorRule, ...], dict[str, tuple[int, ...]], Any, Any]:
    """(rules, keyword -> rule indexes, the keyword set, the always-run indexes as a tuple)."""
    rules: list[VendorRule] = []
    for name in _FILES:
        data = _read(name)
        source = str(data["source"]["name"])
        shared = tuple(data.get("allowlist", {}).get("regexes", ()))
        for r in data["rules"]:
            group = r.get("secretGroup")
            rules.append(VendorRule(str(r["id"]), source, str(r["regex"]),
                                    tuple(k.lower() for k in r.get("keywords", ())),
                                    int(group) if group is not None else None,
                                    tuple(r.get("allow", ())) + shared))
    by_keyword: dict[str, list[int]] = {}
    always: list[int] = []
    for i, rule in enumerate(rules):
        for k in rule.keywords:
            by_keyword.setdefault(k, []).append(i)
        if not rule.keywords:
            always.append(i)
    keywords = sorted(by_keyword)
    found = re2.Set.SearchSet(re2.Options())
    for k in keywords:
        found.Add(re2.escape(k))
    found.Compile()
    index = {k: tuple(by_keyword[k]) for k in keywords}
    return tuple(rules), index, (found, keywords), tuple(always)


def rules_for(text: str) -> list[VendorRule]:
    """The rules whose keywords occur in the text, in the rule sets' order (one linear scan)."""
    if len(text) < SHORTEST_MATCH:
        return []
    rules, index, (found, keywords), always = _loaded()
    hits = found.Match(text.lower()) or []
    chosen = set(always)
    for i in hits:
        chosen.update(index[keywords[i]])
    return [rules[i] for i in sorted(chosen)]


def rule_sources() -> dict[str, int]:
    """How many rules each kept rule set gives (for docs and tests)."""
    counts: dict[str, int] = {}
    for rule in _loaded()[0]:
        counts[rule.source] = counts.get(rule.source, 0) + 1
    return counts


def all_rules() -> tuple[VendorRule, ...]:
    return _loaded()[0]
