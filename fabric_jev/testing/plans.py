"""Verification dictionaries as tests: a reviewed plan replayed on a page, with zero model calls.

`plan_checks(plan, dictionary)` turns each check the plan selected into a
pytest parameter named by the check's id, so each is its own pass or fail;
`replay_plan(target, plan, dictionary)` replays them all in one test and, when
any fails, fails with one line per check. Both replay through
`run_verification` (which takes no evaluator) on the target's channels (a
`Channels`, or an object that gives them: the browser connector's `Page`); a
stale plan (digest mismatch, unknown ids) is refused before anything runs
(`fabric_jev.verification.load_plan`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..verification import Dictionary, Observation, Plan, VerificationFailed, load_plan, run_verification
from .sources import ReplayTarget, channels_of


@dataclass(frozen=True)
class PlanCheck:
    """One check a plan selected, replayable on its own."""

    id: str
    description: str
    dictionary: Dictionary
    plan: Plan

    async def replay(self, target: ReplayTarget, observations: Mapping[str, Observation] | None = None) -> None:
        """Replay this check on `target` (channels, or a page: `jev_page`); raises `VerificationFailed`
        (an `AssertionError`) on a mismatch."""
        __tracebackhide__ = True
        sub = Plan(self.plan.dictionary_digest, self.plan.intent, (self.id,), self.plan.probabilities,
                   self.plan.schema_version)
        await run_verification(sub, self.dictionary, observations, channels_of(target))

    def __str__(self) -> str:
        return self.id


def plan_checks(plan: str | Path | Mapping[str, object] | Plan,
                dictionary: str | Path | Mapping[str, object] | Dictionary) -> list[object]:
    """One `pytest.param` per check the plan selected (dictionary order), its id the check's id::

        @pytest.mark.parametrize("check", plan_checks("plan.json", "dictionary.json"))
        async def test_page(jev_page, check): ...; await check.replay(jev_page)
    """
    import pytest

    return [pytest.param(check, id=check.id) for check in _selected(*load_plan(plan, dictionary))]


def _selected(dictionary: Dictionary, plan: Plan) -> list[PlanCheck]:
    """The checks the plan selected, in dictionary order."""
    selected = set(plan.check_ids)
    return [PlanCheck(c.id, c.description, dictionary, plan) for c in dictionary.checks if c.id in selected]


@dataclass(frozen=True)
class CheckOutcome:
    id: str
    description: str
    passed: bool
    expected: str = ""
    actual: str = ""


def plan_report(intent: str, outcomes: list[CheckOutcome]) -> str:
    passed = sum(o.passed for o in outcomes)
    lines = [f"verification plan for {intent!r}: {passed} of {len(outcomes)} checks passed"]
    width = max((len(o.id) for o in outcomes), default=0)
    for o in outcomes:
        lines.append(f"  {'PASS' if o.passed else 'FAIL'} {o.id:<{width}}  {o.description}")
        if not o.passed:
            lines.append(f"       expected: {o.expected}")
            lines.append(f"       actual:   {o.actual}")
    return "\n".join(lines)


async def replay_plan(target: ReplayTarget, plan: str | Path | Mapping[str, object] | Plan,
                      dictionary: str | Path | Mapping[str, object] | Dictionary,
                      observations: Mapping[str, Observation] | None = None) -> list[CheckOutcome]:
    """Replay every check the plan selected, each on its own, and fail with one line per check
    if any failed. Returns the outcomes when all passed."""
    __tracebackhide__ = True
    parsed, checked = load_plan(plan, dictionary)
    outcomes = []
    for c in _selected(parsed, checked):
        try:
            await c.replay(target, observations)
        except VerificationFailed as exc:
            outcomes.append(CheckOutcome(c.id, c.description, False, exc.expected, exc.actual))
        else:
            outcomes.append(CheckOutcome(c.id, c.description, True))
    if not all(o.passed for o in outcomes):
        raise AssertionError(plan_report(checked.intent, outcomes))
    return outcomes


__all__ = ["CheckOutcome", "PlanCheck", "load_plan", "plan_checks", "plan_report", "replay_plan"]
