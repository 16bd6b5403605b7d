"""run_verification: replay a reviewed plan with zero model calls (contract §11).

Everything is validated before the first check runs: the plan's shape, its
digest against the dictionary, its ids, and every selected observation
binding (present, same version). Then the selected checks run in dictionary
order, each as a step of the caller's test. `passed` comes only after all of
them completed; any mismatch raises `VerificationFailed`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from ..errors import CheckFailed, ReaderFailed
from ..errors import PlanInvalid as PlanInvalid
from .channels import Channels, PollOutcome, target_text
from .compile import Plan
from .dictionary import (
    Dictionary,
    DictionaryCheck,
    NotSee,
    Observe,
    See,
    TextContains,
    parse_dictionary,
)
from .digest import dictionary_digest

ObservationRead = Callable[[anyio.Event], Awaitable[Any]]


@dataclass(frozen=True)
class Observation:
    """An author-bound, reviewed, read-only reader. Bump `version` when its meaning changes."""

    version: str
    read: ObservationRead


class VerificationFailed(CheckFailed):
    def __init__(self, check_id: str, expected: str, actual: str) -> None:
        super().__init__(f"verification check {check_id!r} failed\n  expected: {expected}\n"
                         f"  actual:   {actual}")
        self.check_id = check_id
        self.expected = expected
        self.actual = actual


@dataclass
class RunResult:
    #: "passed" once every selected check has run; a failing check raises instead.
    status: Literal["running", "passed"]
    check_ids: tuple[str, ...]
    durations_ms: dict[str, float] = field(default_factory=dict)


def parse_plan(raw: Plan | Mapping[str, object]) -> Plan:
    if isinstance(raw, Plan):
        return raw
    if not isinstance(raw, Mapping) or set(raw) != {"schemaVersion", "dictionaryDigest", "intent",
                                                      "checkIds", "probabilities"}:
        raise PlanInvalid("a plan is {schemaVersion, dictionaryDigest, intent, checkIds, probabilities}")
    if raw["schemaVersion"] != 1:
        raise PlanInvalid(f"unsupported plan schemaVersion {raw['schemaVersion']!r} (expected 1)")
    ids = raw["checkIds"]
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids) \
            or len(set(ids)) != len(ids):
        raise PlanInvalid("plan checkIds must be a non-empty list of unique strings")
    probs = raw["probabilities"]
    if not isinstance(probs, Mapping) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in probs.values()):
        raise PlanInvalid("plan probabilities must map names to numbers")
    if not isinstance(raw["dictionaryDigest"], str) or not isinstance(raw["intent"], str):
        raise PlanInvalid("plan dictionaryDigest and intent must be strings")
    return Plan(raw["dictionaryDigest"], raw["intent"], tuple(ids), dict(probs))


def _resolve(value: Any, path: tuple[str | int, ...]) -> tuple[bool, Any]:
    for step in path:
        if isinstance(step, int):
            if not isinstance(value, list) or step >= len(value):
                return False, None
            value = value[step]
        else:
            if not isinstance(value, dict) or step not in value:
                return False, None
            value = value[step]
    return True, value


def _holds(assertion: Observe, value: Any) -> bool:
    found, v = _resolve(value, assertion.path)
    if not found:
        return False
    p = assertion.predicate
    if p.kind == "equals":
        return bool(v == p.value and type(v) is type(p.value)) or (
            isinstance(v, int | float) and isinstance(p.value, int | float)
            and not isinstance(v, bool) and not isinstance(p.value, bool) and v == p.value)
    if p.kind == "includes":
        return isinstance(v, str) and p.value in v
    if p.kind == "length":
        return isinstance(v, str | list | dict) and len(v) == p.value
    if not isinstance(v, int | float) or isinstance(v, bool):
        return False
    return bool(v >= p.value if p.kind == "atLeast" else v <= p.value)


def check_plan_fits(plan: Plan, dictionary: Dictionary) -> None:
    """Refuse a stale plan: one compiled for another dictionary, or naming checks it lacks."""
    if plan.dictionary_digest != dictionary_digest(dictionary):
        raise PlanInvalid("the plan was compiled for a different dictionary (digest mismatch); "
                          "recompile and review it")
    known = {c.id for c in dictionary.checks}
    unknown = [i for i in plan.check_ids if i not in known]
    if unknown:
        raise PlanInvalid(f"the plan names checks the dictionary does not have: {unknown}")


async def run_verification(plan: Plan | Mapping[str, object], dictionary: Dictionary | Mapping[str, object],
                           observations: Mapping[str, Observation] | None, channels: Channels) -> RunResult:
    parsed = parse_dictionary(dict(dictionary) if isinstance(dictionary, Mapping) else dictionary)
    checked = parse_plan(plan)
    check_plan_fits(checked, parsed)
    selected = [c for c in parsed.checks if c.id in set(checked.check_ids)]  # dictionary order
    observations = observations or {}
    for c in selected:
        a = c.assertion
        if isinstance(a, Observe):
            bound = observations.get(a.observation.id)
            if bound is None:
                raise PlanInvalid(f"check {c.id!r} needs observation {a.observation.id!r}, which is not bound")
            if bound.version != a.observation.version:
                raise PlanInvalid(f"check {c.id!r} expects observation {a.observation.id!r} version "
                                  f"{a.observation.version!r}, bound version is {bound.version!r}")
    result = RunResult("running", tuple(c.id for c in selected))
    for c in selected:
        start = time.perf_counter()

        async def body(c: DictionaryCheck = c) -> None:
            await _run_check(c, observations, channels)

        await channels.step(f"verify {c.id}: {c.description}", body)
        result.durations_ms[c.id] = (time.perf_counter() - start) * 1000
    result.status = "passed"
    return result


async def _run_check(c: DictionaryCheck, observations: Mapping[str, Observation], channels: Channels) -> None:
    a = c.assertion
    if isinstance(a, See):
        ok, actual = await channels.see(a.target, a.options)
        if not ok:
            opts = a.options.model_dump(exclude_none=True, exclude={"timeout_ms"})
            raise VerificationFailed(c.id, f"see {target_text(a.target)!r} {opts}".rstrip(), actual)
        return
    if isinstance(a, NotSee):
        ok, actual = await channels.not_see(a.target, a.timeout_ms)
        if not ok:
            raise VerificationFailed(c.id, f"{target_text(a.target)!r} absent for {a.timeout_ms} ms", actual)
        return
    if isinstance(a, TextContains):
        outcome = await _eventually(c, channels, channels.text, lambda t: isinstance(t, str) and a.text in t,
                                    a.timeout_ms)
        if not outcome.passed:
            raise VerificationFailed(c.id, f"page text containing {a.text!r}", _actual(outcome, a.timeout_ms))
        return
    assert isinstance(a, Observe)
    reader = observations[a.observation.id]
    outcome = await _eventually(c, channels, reader.read, lambda v: _holds(a, v), a.timeout_ms)
    if not outcome.passed:
        raise VerificationFailed(
            c.id, f"{a.observation.id}{''.join(f'[{s!r}]' for s in a.path)} {a.predicate.kind} "
                  f"{a.predicate.value!r}", _actual(outcome, a.timeout_ms))


async def _eventually(c: DictionaryCheck, channels: Channels, read: Any, test: Any, timeout_ms: int) -> PollOutcome:
    try:
        outcome: PollOutcome = await channels.eventually(read, test, timeout_ms / 1000)
    except ReaderFailed as exc:
        raise VerificationFailed(c.id, "a reader that answers", f"the reader raised {exc}") from exc
    return outcome


def _actual(outcome: PollOutcome, timeout_ms: int) -> str:
    from .._waiting import READ_GRACE

    grace = f"the {timeout_ms} ms deadline and its {READ_GRACE:g} s grace"
    if outcome.stalled:
        return f"the read stalled past {grace}"
    if outcome.late:
        return f"the read answered after {grace}; a late answer never passes"
    if outcome.reads == 0:
        return f"no read completed within {timeout_ms} ms"
    return f"{outcome.value!r} (after {outcome.reads} reads in {timeout_ms} ms)"
