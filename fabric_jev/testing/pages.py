"""What the test helpers know about a page: its snapshot source, where its artifacts go, its failures.

The pytest plugin binds each `jev_page` when it opens it, so the source tracks
every action from the start (for the diff since the last action) and failed
checks write their artifacts into the test's folder. Any other page is adapted
on first use through the browser connector's `page_source` hook; any other
`SnapshotSource`, or a `Snapshot`, is used as it is.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from ..assertions import CheckResult, Snapshot, SnapshotSource


class BrowserPage(Protocol):
    """The browser connector's `Page` as the helpers see it (the core never imports the
    connector): snapshots as data, and hooks run before each action."""

    def on_before_action(self, hook: Callable[[], Awaitable[None]]) -> Callable[[], None]: ...

    async def snapshot(self) -> dict[str, Any]: ...


#: What a check can look at: a page, any snapshot source, or one snapshot.
Target: TypeAlias = BrowserPage | SnapshotSource | Snapshot


@dataclass
class Bound:
    source: SnapshotSource
    artifacts_dir: Path | None = None
    failures: list[CheckResult] = field(default_factory=list)


class _Still:
    """A snapshot that never changes, as a source (for judging recorded snapshots)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    async def snapshot(self) -> Snapshot:
        return self._snapshot


_bound: weakref.WeakKeyDictionary[Any, Bound] = weakref.WeakKeyDictionary()


def bind(page: BrowserPage, source: SnapshotSource, *, artifacts_dir: Path | None = None) -> Bound:
    """Say how checks on `page` take snapshots and where they write artifacts."""
    entry = Bound(source, artifacts_dir)
    _bound[page] = entry
    return entry


def unbind(page: BrowserPage) -> None:
    _bound.pop(page, None)


def _is_browser_page(target: object) -> bool:
    # The browser connector's Page, recognised by its public face (the core never
    # imports the connector): snapshots as data, and hooks before each action.
    return callable(getattr(target, "on_before_action", None)) and callable(getattr(target, "snapshot", None))


def bound_to(target: Target | object) -> Bound:
    """The binding of `target`: a page, any snapshot source, or a snapshot."""
    if isinstance(target, Snapshot):
        return Bound(_Still(target))
    try:
        found = _bound.get(target)
    except TypeError:  # not weakly referenceable: cannot be a bound page
        found = None
    if found is not None:
        return found
    if _is_browser_page(target):
        from ..plugins import find_hook

        page: Any = target
        return bind(page, find_hook("page_source")(page))
    if isinstance(target, SnapshotSource):
        return Bound(target)
    raise TypeError(f"cannot take snapshots of {type(target).__name__}: pass a page, a snapshot "
                    "source (an object with async snapshot()) or a Snapshot")


__all__ = ["Bound", "BrowserPage", "Target", "bind", "bound_to", "unbind"]
