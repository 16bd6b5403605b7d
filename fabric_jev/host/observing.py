"""The typed seam between the host and whatever observes a session.

The host never imports the session implementation (`host/observers.py`), and
the session never touches the host's internals: a session registers itself
with `JevHost.bind_session`, the host asks it for an `ObserverHandle` per
observing run, and hands that observation a callback that stops the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..contract.advice import AdviceRequest

if TYPE_CHECKING:
    from ..contract.envelope import ObservationCounts
    from ..contract.observe import ObserveOptions

StopRun = Callable[[], None]
#: The user's words, read when a call is decided (the classifier's user text, the approver's
#: "user asked"): a launch's own `intent`, or else the bound session's latest real input as it
#: is at that moment. Read at launch it would be stale: an observer is normally spawned before
#: the session's first input, and would carry none for its whole life.
UserText = Callable[[], str | None]


def user_text(intent: str | UserText | None) -> UserText:
    """A launch's intent as a `UserText` (a fixed text stays fixed)."""
    if callable(intent):
        return intent
    return lambda: intent


class ObserverHandle(Protocol):
    """One observing run's inbox and advice state, as the host drives it."""

    def attach(self, run_id: str, stop_run: StopRun) -> None:
        """The run exists: remember its id, and how to stop it when the session ends."""
        ...

    def cancel(self) -> None:
        """The run ended: stop receiving and discard the inbox."""
        ...

    def counts(self) -> ObservationCounts:
        """The envelope's `observation` summary."""
        ...

    async def next_event(self) -> dict[str, object]: ...

    async def advise(self, advice: AdviceRequest) -> dict[str, object]:
        """Deliver well-formed advice, or say why it was suppressed."""
        ...


class ObservationSource(Protocol):
    """A bound session: creates one `ObserverHandle` per program spawned with `observe`."""

    #: The session's latest real user input: what the auto-approval classifier weighs
    #: a run's calls against when its launch named no intent, read at each call.
    user_text: str | None

    def create(self, options: ObserveOptions) -> ObserverHandle: ...
