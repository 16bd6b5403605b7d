"""The Evaluator protocol every judgment source implements."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

import anyio

from ..contract.evaluation import Evaluation, EvaluationRequest


@runtime_checkable
class Evaluator(Protocol):
    """Answers typed questions. Implementations validate answers before returning.

    ``timeout`` (seconds) bounds the whole call, credential lookup included:
    past it the call is abandoned with an `UpstreamError`. To stop a call
    early, cancel the calling task's scope (anyio): nothing is sent when the
    caller is already cancelled, and the cancellation is always re-raised.
    """

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation: ...

    def status(self) -> dict[str, Any]:
        """Route, model and credential presence; never runs a command or the network."""
        ...

    async def aclose(self) -> None: ...


@contextmanager
def evaluation_deadline(timeout: float) -> Iterator[None]:
    """A cancel scope bounding one evaluation: past `timeout` seconds it is
    abandoned and an `UpstreamError` says so. Other errors keep their own type."""
    try:
        with anyio.fail_after(timeout):
            yield
    except TimeoutError:
        from ..errors import UpstreamError

        raise UpstreamError(f"evaluation timed out after {timeout:g} s") from None
