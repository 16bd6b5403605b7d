"""The labelled floor rows of one family, run through a real host under `--policy allow` (shared by
the round-five floor test modules)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fabric_jev import CapabilityRegistry, HostConfig, JevHost
from tests.conftest import program
from tests.test_floor import ROWS

_CALLS = ("const out = []; for (const a of input.calls) { try { await tools.call({ref: a.ref, args: a.arguments}); "
          "out.push('ran'); } catch (e) { out.push('refused'); } } return out;")


def assert_families_have_both_labels(families: Iterable[str]) -> None:
    """Each family is in the labelled set with destructive rows and routine look-alikes."""
    present = {row["family"] for row in ROWS}
    for family in families:
        assert family in present, family
        assert {row["label"] for row in ROWS if row["family"] == family} == {"destructive", "routine"}, family


async def run_family_under_allow(family: str) -> list[dict[str, Any]]:
    """Under `--policy allow` with no one to ask, every destructive row of the family is refused and
    its capability never runs; every routine row runs. Returns the family's rows."""
    rows = [row for row in ROWS if row["family"] == family]
    ran: list[Any] = []
    registry = CapabilityRegistry()

    async def run_it(args: Any, ctx: Any) -> Any:
        ran.append(args)
        return "ran"

    for ref, risk in {(r["action"]["ref"], r["action"]["risk"]) for r in rows}:
        registry.register(ref, run_it, risk)
    prog = program(_CALLS, name="family", requires=sorted({r["action"]["ref"] for r in rows}), outputSchema={})
    config = HostConfig(approvals={"execute": "allow", "write": "allow", "read": "allow"})
    async with JevHost(config, capabilities=registry) as host:
        envelope = await host.run(prog, {"calls": [r["action"] for r in rows]})
    expected = ["refused" if r["label"] == "destructive" else "ran" for r in rows]
    assert envelope.result == expected, envelope.error
    assert ran == [r["action"]["arguments"] for r in rows if r["label"] == "routine"]
    return rows
