"""The public protocol connectors use to offer capabilities to programs.

A connector is any object with a `name`, a `capabilities()` mapping of exact
refs to `Capability` records, and `run_ended(run_id)` / `aclose()` hooks.
`JevHost.add_connector(connector)` registers every ref; a program reaches one
only by listing its exact ref in `requires` and calling `tools.call`.

Handlers receive the JSON arguments and a `CallContext`, and return a JSON
value. They run on the host's event loop inside the run's task group: when
the run stops, the handler is cancelled (anyio cancellation; always re-raise
it). An exception's message reaches the guest as "<ref> failed: <message>":
never put a secret in one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from ._process import wait_process_exit
from .host.registry import CallContext, CapabilityHandler, CapabilityRegistry
from .sandbox.js import runtime_js_path

Risk = Literal["read", "write", "execute"]


@dataclass(frozen=True, slots=True)
class Capability:
    """One capability a connector offers."""

    handler: CapabilityHandler
    risk: Risk = "execute"
    description: str = ""


@runtime_checkable
class Connector(Protocol):
    name: str

    def capabilities(self) -> Mapping[str, Capability]: ...

    async def run_ended(self, run_id: str) -> None:
        """Release what a run held (connections, handles). Called once per run."""
        ...

    async def aclose(self) -> None: ...


def runtime_js(name: str) -> str:
    """The text of a script shipped in runtime_js/ (for example ``snapshot.js``)."""
    return runtime_js_path(name).read_text(encoding="utf-8")


__all__ = ["CallContext", "Capability", "CapabilityHandler", "CapabilityRegistry", "Connector",
           "Risk", "runtime_js", "wait_process_exit"]
