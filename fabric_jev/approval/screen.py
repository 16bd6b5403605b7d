"""The rules' layers of one decision, before the classifier and a person. Pure code.

In order (docs/approvals.md):

1. a deny rule denies;
2. the floor asks a person, unless an allow rule that names the hit entry
   matches the call (a broad allow rule never lifts it);
3. an ask rule asks a person;
4. an allow rule allows;
5. (the risk's policy, decided by the gate);
6. a default rule allows, where the policy would ask or consult the classifier.

`screen` does 1–4, `screen_defaults` 6. Rules come from the config, the
project's and the user's settings, the answers given in this run (`a`), and
fabric-jev's defaults (`default_rules.json`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from ..contract.policy import Ruling
from .floor import FloorEntry, floor_hits
from .rules import CallView, Rule, RuleSet, parse_rules


@dataclass(frozen=True, slots=True)
class Screening:
    decision: Ruling
    reason: str
    rule: Rule | None = None
    floor: FloorEntry | None = None

    @property
    def why(self) -> str:
        """Why a person is asked, as the question says it."""
        return self.reason


def screen(view: CallView, rules: RuleSet | None) -> Screening | None:
    """Layers 1–4 for one call; None when no rule and no floor entry speak. Without rules
    (None), the floor still speaks."""
    candidates = rules.candidates(view.ref, view.risk) if rules is not None and len(rules) else []
    if candidates:
        assert rules is not None
        deny = rules.first("deny", view)
        if deny is not None:
            return Screening("deny", f"the rule {deny.text} ({deny.source}) denies it", deny)
    hits = floor_hits(view)
    for entry in hits:
        lifting = rules.lifting(entry.id, view, candidates) if rules is not None and candidates else None
        if lifting is None:
            return Screening("ask", f"the floor: {entry.what} ({entry.id})", floor=entry)
    if candidates and rules is not None:
        ask = rules.first("ask", view)
        if ask is not None:
            return Screening("ask", f"the rule {ask.text} ({ask.source}) asks", ask)
        allow = rules.first("allow", view)
        if allow is not None:
            lifted = [e.id for e in hits]
            extra = f", lifting the floor's {', '.join(lifted)}" if lifted else ""
            return Screening("allow", f"the rule {allow.text} ({allow.source}) allows it{extra}", allow)
    return None


def screen_defaults(view: CallView, defaults: RuleSet) -> Screening | None:
    """Layer 6: a default rule that allows the call (the floor was checked before)."""
    if not len(defaults):
        return None
    allow = defaults.first("allow", view)
    if allow is None:
        return None
    return Screening("allow", f"the default rule {allow.text} allows it", allow)


@lru_cache(maxsize=1)
def default_rules() -> RuleSet:
    """fabric-jev's default rules (default_rules.json), read once."""
    data = json.loads(resources.files(__package__).joinpath("default_rules.json").read_text("utf-8"))
    return RuleSet(parse_rules(data["rules"], source="default rules"))
