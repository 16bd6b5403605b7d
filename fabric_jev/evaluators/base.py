"""The Evaluator protocol every judgment source implements."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import anyio
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..contract.values import JsonValue
from ..contract.wire_model import WireModel, omit_none

if TYPE_CHECKING:  # the request's models load with the first request (start-up of `run`)
    from ..contract.evaluation import Evaluation, EvaluationRequest


#: Built when first used: a run that never asks for a status builds no more than its defaults.
_STATUS = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class CredentialSource(enum.StrEnum):
    """Where a route's key is found (`CredentialStatus.source`); equal to its JSON string."""

    STORE = "store"
    ENVIRONMENT = "environment"
    COMMAND = "command"
    MISSING = "missing"
    NOT_NEEDED = "not needed"


class CredentialStatus(WireModel):
    """Whether a route's key can be found, and where; never whether it works."""

    model_config = _STATUS

    configured: bool
    source: CredentialSource
    #: where exactly: the auth store's entry or the variable's name (never a value); not in the JSON
    detail: str | None = Field(default=None, exclude=True)
    #: Presence only: a status never tries a key.
    verified: Literal[False] = False


# Made without validating (the values are known): importing this module builds no schema.
NO_CREDENTIALS = CredentialStatus.model_construct(configured=False, source=CredentialSource.MISSING)
#: What an offline evaluator reports: it needs no key, so none is "missing".
NO_CREDENTIALS_NEEDED = CredentialStatus.model_construct(configured=False, source=CredentialSource.NOT_NEEDED)
#: offline: nothing leaves the host; online: requests go to an endpoint.
Mode = Literal["offline", "online"]


class ProfileStatus(WireModel):
    """The learned profile a local evaluator answers with."""

    model_config = _STATUS

    name: str
    signatures: int
    examples: int


class EvaluatorStatus(WireModel):
    """Route, model and credential presence of an evaluator, and what keeps it from answering."""

    model_config = _STATUS

    route: str
    model: str
    mode: Mode = "offline"
    #: Whether it can answer: `problem` is None (derived from it, whatever is given).
    ready: bool = True
    credentials: CredentialStatus = NO_CREDENTIALS
    profile: ProfileStatus | None = Field(default=None, exclude_if=omit_none)
    #: Why it cannot answer (missing weights, no key for its route); None when it is ready.
    problem: str | None = Field(default=None, exclude_if=omit_none)

    def __init__(self, route: str, model: str, credentials: CredentialStatus = NO_CREDENTIALS,
                 problem: str | None = None, profile: ProfileStatus | None = None, mode: Mode = "offline") -> None:
        # By position as well, as custom evaluators build it (the JSON's order differs).
        BaseModel.__init__(self, route=route, model=model, mode=mode, credentials=credentials, profile=profile,
                           problem=problem)

    @model_validator(mode="before")
    @classmethod
    def _ready_unless_a_problem(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {**data, "ready": data.get("problem") is None}
        return data

    def __getitem__(self, key: str) -> JsonValue:
        """Deprecated (0.2.0; removed in 0.3.0): `status()["route"]`, as when status() was a dict."""
        deprecated_item("Evaluator.status()", key)
        value: JsonValue = self.to_json()[key]
        return value


def known_status(route: str, model: str, credentials: CredentialStatus = NO_CREDENTIALS, problem: str | None = None,
                 profile: ProfileStatus | None = None, mode: Mode = "offline") -> EvaluatorStatus:
    """`EvaluatorStatus(...)` of values an evaluator of fabric-jev made itself (of their types already),
    without validating them again: a run that asks its evaluator whether it is ready builds no schema
    (docs/performance.md, "Start-up of run")."""
    return EvaluatorStatus.model_construct(route=route, model=model, mode=mode, ready=problem is None,
                                           credentials=credentials, profile=profile, problem=problem)


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
