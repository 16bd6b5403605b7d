"""The Evaluator protocol every judgment source implements."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

import anyio

from ..contract.values import JsonObject, JsonValue

if TYPE_CHECKING:  # the request's models load with the first request (start-up of `run`)
    from ..contract.evaluation import Evaluation, EvaluationRequest


@dataclass(frozen=True, slots=True)
class CredentialStatus:
    """Whether a route's key can be found, and where; never whether it works."""

    configured: bool
    source: str  # store | environment | command | missing | not needed
    #: where exactly: the auth store's entry or the variable's name (never a value)
    detail: str | None = None

    def to_json(self) -> JsonObject:
        return {"configured": self.configured, "source": self.source, "verified": False}


NO_CREDENTIALS = CredentialStatus(False, "missing")
#: What an offline evaluator reports: it needs no key, so none is "missing".
NO_CREDENTIALS_NEEDED = CredentialStatus(False, "not needed")
#: offline: nothing leaves the host; online: requests go to an endpoint.
Mode = Literal["offline", "online"]


@dataclass(frozen=True, slots=True)
class ProfileStatus:
    """The learned profile a local evaluator answers with."""

    name: str
    signatures: int
    examples: int


@dataclass(frozen=True, slots=True)
class EvaluatorStatus:
    """Route, model and credential presence of an evaluator, and what keeps it from answering."""

    route: str
    model: str
    credentials: CredentialStatus = NO_CREDENTIALS
    #: Why it cannot answer (missing weights, no key for its route); None when it is ready.
    problem: str | None = None
    profile: ProfileStatus | None = None
    mode: Mode = "offline"

    @property
    def ready(self) -> bool:
        return self.problem is None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"route": self.route, "model": self.model, "mode": self.mode, "ready": self.ready,
                           "credentials": self.credentials.to_json()}
        if self.profile is not None:
            out["profile"] = {"name": self.profile.name, "signatures": self.profile.signatures,
                              "examples": self.profile.examples}
        if self.problem is not None:
            out["problem"] = self.problem
        return out

    def __getitem__(self, key: str) -> JsonValue:
        """Deprecated (0.2.0; removed in 0.3.0): `status()["route"]`, as when status() was a dict."""
        deprecated_item("Evaluator.status()", key)
        return self.to_json()[key]


def deprecated_item(what: str, key: str) -> None:
    """The warning of a typed status read like the dict it was in 0.1.0 (CHANGELOG.md)."""
    import warnings

    warnings.warn(f"{what}[{key!r}] is deprecated and will be removed in 0.3.0: {what} is typed now; "
                  f"read its attribute, or to_json()[{key!r}] for the JSON", DeprecationWarning, stacklevel=3)


@runtime_checkable
class Evaluator(Protocol):
    """Answers typed questions. Implementations validate answers before returning.

    ``timeout`` (seconds) bounds the whole call, credential lookup included:
    past it the call is abandoned with an `UpstreamError`. To stop a call
    early, cancel the calling task's scope (anyio): nothing is sent when the
    caller is already cancelled, and the cancellation is always re-raised.
    """

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation: ...

    def status(self) -> EvaluatorStatus:
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
