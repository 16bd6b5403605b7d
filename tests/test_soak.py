"""`fabric-jev bench soak` in miniature: every kind of run ends as it should, and nothing is left behind.

The soak's own goals (flat descriptors, threads and processes, RSS within 10 %
over 1,000 runs) are benchmark figures (docs/performance.md), not asserted here.
"""

from __future__ import annotations

import pytest

from fabric_jev.benchmarks.soak import bench_soak


@pytest.mark.anyio
@pytest.mark.timeout(180)
async def test_a_short_soak_ends_every_kind_as_expected_and_leaves_nothing() -> None:
    report = await bench_soak(runs=26, warmup=13)
    assert report["unexpected_count"] == 0, report["unexpected"]
    assert sum(report["states"].values()) == 26
    assert report["after_close"] == {"children": 0, "zombies": 0, "browser_processes_left": 0}
    assert report["end"]["zombies"] == 0
    # Runs that ended inside an evaluation left no connection, pipe or socket behind.
    assert {"deadline in an evaluation", "stopped in an evaluation"} <= set(report["kinds"])
    assert report["fds_after_close"] == report["fds_before_host"]
