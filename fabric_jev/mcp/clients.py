"""Per-client limits of `fabric-jev mcp --transport streamable-http`, so one client cannot starve the others.

A client is one MCP session (the `Mcp-Session-Id` the server gave it at `initialize`): the
host has a single bearer token, which every client presents, so the token tells no client
from another, and a peer address is shared by every agent of one machine. A client that
opens many sessions counts as many clients; the host-wide limits (`maxConcurrentRuns`,
`maxQueuedRuns`, the session cap) still bound them all together.

Each client has `per_client` run places: a run holds one from its launch until it ends
(queued in the host counts). A `jev_run` beyond them waits in the client's own queue, first
in first out, so a flood of one client queues behind itself and the host's queue holds at
most `per_client` runs of it; a `jev_spawn` beyond them is refused at once (its caller
expects an answer now), with the reason. The compiler slots are charged to the client too
(typecheck.slots.SLOT_OWNER), not to the program's name.

The calls that ask the model outside a run (`jev_evaluate`, `jev_approve`) have `per_client`
places of their own per client, apart from its runs: past them a client's next call waits in
its own queue, so a flood of evaluations from one client cannot take every turn of the
evaluator from the others, and a client's long runs never hold up its evaluations.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup

#: `--client-runs` when not given.
DEFAULT_CLIENT_RUNS = 4


class ClientLimitReached(Exception):
    """A spawn beyond the client's run places; the message is what the client sees."""


def client_of(ctx: object) -> str:
    """The client a request comes from: its MCP session id, else its session object's identity
    (a transport without session ids has one client per connection)."""
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    session_id = headers.get("mcp-session-id") if headers is not None else None
    return f"client:{session_id}" if session_id else f"client:{id(getattr(ctx, 'session', ctx)):x}"


class ClientRuns:
    """Run places per client: `async with runs.placed(client)` for a run the call waits for,
    `place_spawned` then `release_when` for one that ends later."""

    def __init__(self, per_client: int, task_group: TaskGroup) -> None:
        if per_client < 1:
            raise ValueError("per_client must be at least 1")
        self.per_client = per_client
        self._tg = task_group
        self._places: dict[str, anyio.Semaphore] = {}
        #: The places of `jev_evaluate` and `jev_approve` calls, by client (apart from its runs').
        self._calls: dict[str, anyio.Semaphore] = {}
        #: Runs placed so far, by client (what a test or a status line reads).
        self.placed_count: dict[str, int] = {}

    def _semaphore(self, client: str, places: dict[str, anyio.Semaphore] | None = None) -> anyio.Semaphore:
        places = self._places if places is None else places
        found = places.get(client)
        if found is None:
            found = places[client] = anyio.Semaphore(self.per_client, fast_acquire=True)
        return found

    def in_flight(self, client: str) -> int:
        found = self._places.get(client)
        return 0 if found is None else self.per_client - found.value

    def waiting(self, client: str) -> int:
        found = self._places.get(client)
        return 0 if found is None else found.statistics().tasks_waiting

    def calls_in_flight(self, client: str) -> int:
        found = self._calls.get(client)
        return 0 if found is None else self.per_client - found.value

    def _release(self, client: str, places: dict[str, anyio.Semaphore] | None = None) -> None:
        places = self._places if places is None else places
        semaphore = places[client]
        semaphore.release()
        self._forget_if_idle(client, places)

    def _forget_if_idle(self, client: str, places: dict[str, anyio.Semaphore]) -> None:
        semaphore = places.get(client)
        if semaphore is not None and semaphore.value == self.per_client and not semaphore.statistics().tasks_waiting:
            del places[client]  # an idle client costs nothing

    def _count(self, client: str) -> None:
        self.placed_count[client] = self.placed_count.get(client, 0) + 1

    @asynccontextmanager
    async def placed(self, client: str) -> AsyncIterator[None]:
        """Hold one of the client's run places for the block, waiting for it in the client's queue."""
        async with self._held(client, self._places):
            self._count(client)
            yield

    @asynccontextmanager
    async def calling(self, client: str) -> AsyncIterator[None]:
        """Hold one of the client's call places (`jev_evaluate`, `jev_approve`) for the block,
        waiting for it in the client's queue."""
        async with self._held(client, self._calls):
            yield

    @asynccontextmanager
    async def _held(self, client: str, places: dict[str, anyio.Semaphore]) -> AsyncIterator[None]:
        semaphore = self._semaphore(client, places)
        try:
            await semaphore.acquire()
        except BaseException:  # cancelled while waiting: an idle client still costs nothing
            self._forget_if_idle(client, places)
            raise
        try:
            yield
        finally:
            self._release(client, places)

    def place_spawned(self, client: str) -> None:
        """Take one of the client's places now, for a spawn, or raise ClientLimitReached. Then
        `release_when` the run has ended, or `unplace_spawned` if the spawn failed."""
        semaphore = self._semaphore(client)
        try:
            semaphore.acquire_nowait()
        except anyio.WouldBlock:
            raise ClientLimitReached(
                f"this client already has {self.per_client} runs queued or running (--client-runs "
                f"{self.per_client}); wait for one to end (jev_wait) or use jev_run, which waits its turn"
            ) from None
        self._count(client)

    def release_when(self, client: str, until: Callable[[], Awaitable[object]]) -> None:
        """Give the place back when `until()` returns (the spawned run has ended) or raises."""

        async def watch() -> None:
            try:
                await until()
            except Exception:  # the run is gone (pruned, or the host closed): its place is free
                pass
            finally:
                self._release(client)

        self._tg.start_soon(watch)

    def unplace_spawned(self, client: str) -> None:
        """Give back a place taken by `place_spawned` whose spawn then failed (no watcher runs)."""
        self._release(client)
