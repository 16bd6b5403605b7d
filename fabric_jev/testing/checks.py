"""Assertions that read like pytest: `assert_`, `assert_eventually`, `check_done`, `expect`.

Each is a thin face over `fabric_jev.assertions.check(...)`: the same
predicates, snapshots, escalation and messages. What they add for tests:

- any snapshot source, a `Snapshot`, or an object that gives a source
  (`snapshot_source()`: the browser connector's `Page`, such as `jev_page`) is
  accepted, and a query string means `exists(query)`;
- a failure raises `AssertionFailed` (an `AssertionError`), so pytest reports it
  as a failed assertion, with the reason, the nearest matches, the diff since
  the last action and the attempt log, and the traceback ends at the test's line;
- on a target bound to an artifacts folder (`bind_source`: the browser's `jev_page`
  fixture binds each page), a failed check writes its snapshot, screenshot and
  trace into it.

Options left out keep the defaults of `Check.eventually` (docs/assertions.md).
"""

from __future__ import annotations

from typing import Any

from ..assertions import (
    AssertionFailed,
    CheckResult,
    Escalation,
    Predicate,
    Query,
    VisionFallback,
    check,
    exists,
    is_checked,
    is_collapsed,
    is_disabled,
    is_enabled,
    is_expanded,
    is_unchecked,
    not_exists,
    url_matches,
    value_contains,
    value_equals,
)
from .sources import Target, bound_to

#: What the helpers check: a predicate, or a query meaning "a visible match exists".
Checkable = Predicate | Query | str


def _predicate(what: Checkable) -> Predicate:
    return what if isinstance(what, Predicate) else exists(what)


async def _judge(target: Target, what: Checkable, label: str | None, *,
                 eventually: dict[str, Any] | None = None, options: dict[str, Any] | None = None
                 ) -> CheckResult:
    __tracebackhide__ = True
    predicate = _predicate(what)
    bound = bound_to(target)
    built = check(predicate, label or str(predicate), False, artifacts_dir=bound.artifacts_dir, **(options or {}))
    if eventually is None:
        result = await built.once(bound.source)
    else:
        result = await built.eventually(bound.source, **eventually)
    if not result.passed:
        raise AssertionFailed(result)
    return result


def _given(**options: Any) -> dict[str, Any]:
    return {k: v for k, v in options.items() if v is not None}


async def assert_(target: Target, predicate: Checkable, label: str | None = None, *,
                  nearest_n: int | None = None) -> CheckResult:
    """One fresh snapshot, judged as it is; raises `AssertionFailed` if the predicate does not hold."""
    __tracebackhide__ = True
    return await _judge(target, predicate, label, options=_given(nearest_n=nearest_n))


async def assert_eventually(target: Target, predicate: Checkable, label: str | None = None, *,
                            timeout: float | None = None, poll: float | None = None,
                            min_confidence: float | None = None, max_retries: int | None = None,
                            policy: Escalation | None = None, vision: VisionFallback | None = None,
                            nearest_n: int | None = None) -> CheckResult:
    """Fresh snapshots until the predicate holds, or raise `AssertionFailed` when the check gives up."""
    __tracebackhide__ = True
    return await _judge(target, predicate, label,
                        eventually=_given(timeout=timeout, poll=poll, min_confidence=min_confidence,
                                          max_retries=max_retries),
                        options=_given(policy=policy, vision=vision, nearest_n=nearest_n))


class DoneCheck:
    """The check that says a task is finished (seed 002's `check_done`): required, labelled."""

    def __init__(self, predicate: Checkable, label: str, options: dict[str, Any]) -> None:
        self.predicate = _predicate(predicate)
        self.label = label
        self._options = options

    async def once(self, target: Target) -> CheckResult:
        __tracebackhide__ = True
        return await _judge(target, self.predicate, self.label, options=self._options)

    async def eventually(self, target: Target, *, timeout: float | None = None, poll: float | None = None,
                         min_confidence: float | None = None, max_retries: int | None = None) -> CheckResult:
        __tracebackhide__ = True
        return await _judge(target, self.predicate, self.label, options=self._options,
                            eventually=_given(timeout=timeout, poll=poll, min_confidence=min_confidence,
                                              max_retries=max_retries))


def check_done(predicate: Checkable, label: str = "task done", *, policy: Escalation | None = None,
               vision: VisionFallback | None = None, nearest_n: int | None = None) -> DoneCheck:
    """The task-completion check: ``await check_done(exists("text~Saved")).eventually(page)``."""
    return DoneCheck(predicate, label, _given(policy=policy, vision=vision, nearest_n=nearest_n))


class Expectation:
    """`expect(page, query)`: Playwright-style names, each one `assert_eventually` of a predicate."""

    def __init__(self, target: Target, query: Query | str | None, timeout: float | None) -> None:
        self._target = target
        self._query = query
        self._timeout = timeout

    def _q(self) -> Query | str:
        if self._query is None:
            raise ValueError("this expectation needs a query: expect(page, 'role=button name=Save')")
        return self._query

    async def to_pass(self, predicate: Checkable, label: str | None = None) -> CheckResult:
        __tracebackhide__ = True
        return await assert_eventually(self._target, predicate, label, timeout=self._timeout)

    async def to_exist(self) -> CheckResult:
        __tracebackhide__ = True
        return await self.to_pass(exists(self._q()))

    async def not_to_exist(self) -> CheckResult:
        __tracebackhide__ = True
        return await self.to_pass(not_exists(self._q()))

    async def to_be_enabled(self) -> CheckResult:
        __tracebackhide__ = True
        return await self.to_pass(is_enabled(self._q()))

    async def to_be_disabled(self) -> CheckResult:
        __tracebackhide__ = True
        return await self.to_pass(is_disabled(self._q()))

    async def to_be_checked(self) -> CheckResult:
        __tracebackhide__ = True
        return await self.to_pass(is_checked(self._q()))

    async def to_be_unchecked(self) -> CheckResult:
        __tracebackhide__ = True
        return await self.to_pass(is_unchecked(self._q()))

    async def to_be_expanded(self) -> CheckResult:
        __tracebackhide__ = True
        return await self.to_pass(is_expanded(self._q()))

    async def to_be_collapsed(self) -> CheckResult:
        __tracebackhide__ = True
        return await self.to_pass(is_collapsed(self._q()))

    async def to_have_value(self, value: str) -> CheckResult:
        __tracebackhide__ = True
        return await self.to_pass(value_equals(self._q(), value))

    async def to_contain_value(self, part: str) -> CheckResult:
        __tracebackhide__ = True
        return await self.to_pass(value_contains(self._q(), part))

    async def to_have_url(self, pattern: str) -> CheckResult:
        __tracebackhide__ = True
        return await self.to_pass(url_matches(pattern))


def expect(target: Target, query: Query | str | None = None, *, timeout: float | None = None) -> Expectation:
    """``await expect(page, 'role=button name="Save"').to_be_enabled()``."""
    return Expectation(target, query, timeout)


__all__ = ["Checkable", "DoneCheck", "Expectation", "assert_", "assert_eventually", "check_done", "expect"]
