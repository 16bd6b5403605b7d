"""The Evaluator protocol every judgment source implements."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol, runtime_checkable

import anyio

from ..contract.evaluation import Evaluation, EvaluationRequest


@runtime_checkable
class Evaluator(Protocol):
    """Answers typed questions. Implementations validate answers before returning.

    ``timeout`` (seconds) bounds the whole call, credential lookup included;
    ``cancel``, when set, aborts an in-flight call. Anyio cancellation of the
    calling task aborts it too and is always re-raised.
    """

    async def evaluate(
        self, request: EvaluationRequest, *, timeout: float, cancel: anyio.Event | None = None
    ) -> Evaluation: ...

    def status(self) -> dict[str, Any]:
        """Route, model and credential presence; never runs a command or the network."""
        ...

    async def aclose(self) -> None: ...


CANCELLED_BEFORE_SENDING = "evaluation cancelled before it was sent"


def refuse_if_cancelled(event: anyio.Event | None) -> None:
    """An already-set cancel event: nothing is sent, a typed error is raised."""
    if event is not None and event.is_set():
        from ..errors import UpstreamError

        raise UpstreamError(CANCELLED_BEFORE_SENDING)


async def with_cancel(event: anyio.Event | None, timeout: float, coro: Coroutine[Any, Any, Any]) -> Any:
    """Await `coro` under `timeout`, abandoning it early if `event` is set.

    With an already-set event the coroutine never starts (nothing is sent).
    Errors keep their own type: the coroutine's exception is re-raised as it
    is, never wrapped in an ExceptionGroup by the watcher's task group; a
    timeout or a cancel event becomes an `UpstreamError`.
    """
    from ..errors import UpstreamError

    if event is not None and event.is_set():
        coro.close()
        raise UpstreamError(CANCELLED_BEFORE_SENDING)
    result: list[Any] = []
    failure: list[Exception] = []

    async def body() -> None:
        try:
            result.append(await coro)
        except Exception as exc:  # kept to re-raise outside the task group, unwrapped
            failure.append(exc)

    with anyio.move_on_after(timeout) as scope:
        if event is None:
            await body()
        else:
            async with anyio.create_task_group() as tg:
                async def watch() -> None:
                    await event.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                await body()
                tg.cancel_scope.cancel()
    if failure:
        raise failure[0]
    if scope.cancelled_caught:
        raise UpstreamError(f"evaluation timed out after {timeout:g} s")
    if not result:
        raise UpstreamError("evaluation cancelled")
    return result[0]
