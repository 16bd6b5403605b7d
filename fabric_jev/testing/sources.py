"""What a check looks at and what a plan replays on: snapshot sources and channels, never a page.

The helpers take the protocols of the layers below: a `SnapshotSource` (or one
`Snapshot`) for checks, `Channels` for plans. An object that can give one says
so with a method, as `os.fspath` asks a path-like object for its path:
`snapshot_source()` (a `SnapshotSourceProvider`) and `verification_channels()`
(a `ChannelsProvider`). The browser connector's `Page` is both. A provider is
asked for its source once, on first use, and the source is kept with it, so
a page's source tracks every action from the first check on (the diff since
the last action).

`bind_source(target, source, artifacts_dir=...)` says it ahead of time, with the
folder where failed checks write their artifacts: the browser's `jev_page`
fixture binds each page it opens to its test's folder.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeAlias, runtime_checkable

from ..assertions import Snapshot, SnapshotSource
from ..verification import Channels


@runtime_checkable
class SnapshotSourceProvider(Protocol):
    """An object checks can look at through the snapshot source it gives (the browser's `Page`)."""

    def snapshot_source(self) -> SnapshotSource: ...


@runtime_checkable
class ChannelsProvider(Protocol):
    """An object plans can replay on through the channels it gives (the browser's `Page`)."""

    def verification_channels(self) -> Channels: ...


#: What a check can look at: a snapshot source, one snapshot, or an object that gives a source.
Target: TypeAlias = SnapshotSource | Snapshot | SnapshotSourceProvider
#: What a plan can replay on: channels, or an object that gives them.
ReplayTarget: TypeAlias = Channels | ChannelsProvider


@dataclass(frozen=True)
class Bound:
    source: SnapshotSource
    artifacts_dir: Path | None = None


class _Still:
    """A snapshot that never changes, as a source (for judging recorded snapshots)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    async def snapshot(self) -> Snapshot:
        return self._snapshot


_bound: weakref.WeakKeyDictionary[object, Bound] = weakref.WeakKeyDictionary()


def bind_source(target: object, source: SnapshotSource, *, artifacts_dir: Path | None = None) -> None:
    """Checks on `target` take their snapshots from `source` and, when they fail, write their
    artifacts into `artifacts_dir` (until `unbind_source(target)`)."""
    _bound[target] = Bound(source, artifacts_dir)


def unbind_source(target: object) -> None:
    _bound.pop(target, None)


def bound_to(target: Target | object) -> Bound:
    """How checks look at `target`: its binding, a snapshot as it is, a provider's source
    (asked for once, then kept), or the snapshot source itself."""
    if isinstance(target, Snapshot):
        return Bound(_Still(target))
    try:
        found = _bound.get(target)
    except TypeError:  # not weakly referenceable: cannot be bound
        found = None
    if found is not None:
        return found
    # Before SnapshotSource: a provider may also have a `snapshot()` of its own (a page's is data).
    if isinstance(target, SnapshotSourceProvider):
        entry = Bound(target.snapshot_source())
        with contextlib.suppress(TypeError):  # not weakly referenceable: asked again next time
            _bound[target] = entry
        return entry
    if isinstance(target, SnapshotSource):
        return Bound(target)
    raise TypeError(f"cannot take snapshots of {type(target).__name__}: pass a snapshot source (an object "
                    "with async snapshot() -> Snapshot), a Snapshot, or an object with snapshot_source() "
                    "(the browser connector's Page)")


def channels_of(target: ReplayTarget | object) -> Channels:
    """The channels a plan replays on: a provider's (fresh for each replay), or `target` itself."""
    if isinstance(target, ChannelsProvider):
        return target.verification_channels()
    if isinstance(target, Channels):
        return target
    raise TypeError(f"cannot replay a plan on {type(target).__name__}: pass verification channels "
                    "(fabric_jev.verification.Channels) or an object with verification_channels() "
                    "(the browser connector's Page)")


__all__ = ["Bound", "ChannelsProvider", "ReplayTarget", "SnapshotSourceProvider", "Target", "bind_source",
           "bound_to", "channels_of", "unbind_source"]
