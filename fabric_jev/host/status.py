"""The host's status (contract §6): its evaluator's route, model and credentials, and its runs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, PlainSerializer, SerializerFunctionWrapHandler, computed_field, model_serializer

from ..contract.envelope import ApprovalCounts, RunState
from ..contract.languages import CheckerStatus
from ..contract.values import JsonValue
from ..contract.wire_model import WireData, omit_none, wire_time
from ..evaluators.base import CredentialStatus, Mode, deprecated_item

#: A timestamp as the contract writes it (the record is made by the host: nothing to validate).
_WIRE_TIME = PlainSerializer(wire_time, return_type=str, when_used="json")


@dataclass(frozen=True, slots=True)
class RunSummary(WireData):
    """One run as the host's status lists it; its envelope has the rest."""

    id: str
    name: str
    state: RunState
    background: bool
    started_at: Annotated[datetime, _WIRE_TIME]
    approvals_allowed: Annotated[int, Field(exclude=True)]
    approvals_denied: Annotated[int, Field(exclude=True)]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def approvals(self) -> ApprovalCounts:
        """The run's policy decisions, counted (the JSON's `approvals`)."""
        return ApprovalCounts(allowed=self.approvals_allowed, denied=self.approvals_denied)


# The key order of 0.1.0's JSON: `ready`, computed, among the fields.
_ORDER = ("credentials", "model", "route", "mode", "ready", "runs", "problem", "typecheck")


@dataclass(frozen=True, slots=True)
class HostStatus(WireData):
    """What `JevHost.status()` answers. Reading it never runs a command or the network."""

    credentials: CredentialStatus
    model: str
    route: str
    runs: tuple[RunSummary, ...]
    #: The evaluator's mode, and why it cannot answer (no key for its route, missing weights).
    mode: Mode = "offline"
    problem: Annotated[str | None, Field(exclude_if=omit_none)] = None
    #: The type checker: the modes, and the compiler or why there is none (fabric_jev.typecheck).
    typecheck: Annotated[CheckerStatus | None, Field(exclude_if=omit_none)] = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ready(self) -> bool:
        """The evaluator can answer: nothing keeps it from it (`problem` is None)."""
        return self.problem is None

    # No return annotation: pydantic would take it for the JSON Schema of the whole status.
    @model_serializer(mode="wrap")
    def _in_order(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        data: dict[str, Any] = handler(self)
        return {key: data[key] for key in _ORDER if key in data}

    def __getitem__(self, key: str) -> JsonValue:
        """Deprecated (0.2.0; removed in 0.3.0): `host.status()["runs"]`, as when it was a dict."""
        deprecated_item("host.status()", key)
        value: JsonValue = self.to_json()[key]
        return value

