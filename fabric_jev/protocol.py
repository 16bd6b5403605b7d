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

Every capability declares a `Risk` (`read`, `write`, `execute`, `network`,
`agent`; default `execute`): each call passes the host's approvals policy for
that risk before the handler runs (docs/programs.md, "Risks and policies").
The browser connector's `browser.connect` and `browser.cdp` are `execute`.

Besides the protocol, what a connector package needs of the core and may not
import from its private modules: `Waiter` (the one waiting funnel: a deadline,
a backoff schedule and an attempt log, as `Check.eventually` waits), the process
helpers its launchers use, `runtime_js` for the scripts shipped with the core, and
`one_line` (the terminal-safe rendering of outside text its commands print).
"""

from __future__ import annotations

from ._process import end_process_group, kill_process_group, read_available, wait_process_exit
from ._runtime_js import runtime_js_path
from ._waiting import Waiter
from .capabilities import CallContext, Capability, CapabilityHandler, Connector
from .contract.policy import Risk
from .host.registry import CapabilityRegistry
from .terminal import one_line


def runtime_js(name: str) -> str:
    """The text of a script shipped in runtime_js/ (for example ``snapshot.js``)."""
    return runtime_js_path(name).read_text(encoding="utf-8")


__all__ = ["CallContext", "Capability", "CapabilityHandler", "CapabilityRegistry", "Connector",
           "Risk", "Waiter", "end_process_group", "kill_process_group", "one_line", "read_available",
           "runtime_js", "wait_process_exit"]
