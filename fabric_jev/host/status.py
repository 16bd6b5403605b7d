"""The host's status (contract §6): its evaluator's route, model and credentials, and its runs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..contract.envelope import RunState
from ..contract.values import JsonObject, JsonValue
from ..contract.wire_model import wire_time
from ..evaluators.base import CredentialStatus, Mode, deprecated_item


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run as the host's status lists it; its envelope has the rest."""

    id: str
    name: str
    state: RunState
    background: bool
    started_at: datetime
    approvals_allowed: int
    approvals_denied: int

    def to_json(self) -> JsonObject:
        return {"id": self.id, "name": self.name, "state": self.state.value,
                "background": self.background, "startedAt": wire_time(self.started_at),
                "approvals": {"allowed": self.approvals_allowed, "denied": self.approvals_denied}}


@dataclass(frozen=True, slots=True)
class HostStatus:
    """What `JevHost.status()` answers. Reading it never runs a command or the network."""

    credentials: CredentialStatus
    model: str
    route: str
    runs: tuple[RunSummary, ...]
    #: The evaluator's mode, and why it cannot answer (no key for its route, missing weights).
    mode: Mode = "offline"
    problem: str | None = None
    #: The type checker: the modes, and the compiler or why there is none (fabric_jev.typecheck).
    typecheck: JsonObject | None = None

    @property
    def ready(self) -> bool:
        return self.problem is None

    def to_json(self) -> JsonObject:
        out: JsonObject = {"credentials": self.credentials.to_json(), "model": self.model, "route": self.route,
                           "mode": self.mode, "ready": self.ready, "runs": [run.to_json() for run in self.runs]}
        if self.problem is not None:
            out["problem"] = self.problem
        if self.typecheck is not None:
            out["typecheck"] = self.typecheck
        return out

    def __getitem__(self, key: str) -> JsonValue:
        """Deprecated (0.2.0; removed in 0.3.0): `host.status()["runs"]`, as when it was a dict."""
        deprecated_item("host.status()", key)
        return self.to_json()[key]
