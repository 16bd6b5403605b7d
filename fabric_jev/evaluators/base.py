"""The Evaluator protocol every judgment source implements."""

from __future__ import annotations

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


async def with_cancel(event: anyio.Event | None, timeout: float, coro: Any) -> Any:
    """Await `coro` under `timeout`, abandoning it early if `event` is set."""
    from ..errors import UpstreamError

    result: list[Any] = []

    async def body() -> None:
        result.append(await coro)

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
            if not result:
                raise UpstreamError("evaluation cancelled")
    if scope.cancelled_caught:
        raise UpstreamError(f"evaluation timed out after {timeout:g} s")
    return result[0]
