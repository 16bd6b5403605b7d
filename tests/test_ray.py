"""Batches on a local Ray cluster started here (`ray.init(num_cpus=2)`), one for the module."""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fabric_jev import ConfigError, FixtureEvaluator, HostConfig
from fabric_jev.batch import BatchItem, BatchOutcome, read_inputs, run_batch
from fabric_jev.contract.program import parse_program
from tests.test_batch import FIXTURE, PROGRAM, batch_argv, check_complete, files, records

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")
from fabric_jev.batch.ray_backend import ACTOR_DIED_TWICE, run_ray  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
__all__ = ["files"]  # the fixture, shared with test_batch


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    context = ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield context.address_info["address"]
    finally:
        ray.shutdown()


@pytest.mark.timeout(150)
@pytest.mark.anyio
async def test_ray_batch_writes_what_the_local_batch_writes(cluster: str, files: dict[str, str]) -> None:
    local: list[dict[str, Any]] = []

    async def keep(outcome: BatchOutcome) -> None:
        local.append(outcome.to_json())

    await run_batch(PROGRAM, read_inputs(files["inputs"]), keep, evaluator=f"fixture:{files['fixture']}")
    # The real command, as a second driver on the test's cluster.
    done = subprocess.run(batch_argv(files, "--ray", cluster, "--quiet"), capture_output=True, text=True,
                          timeout=140, cwd=ROOT)
    assert done.returncode == 1, done.stderr
    on_ray = records(files["out"])
    check_complete(on_ray)
    assert sorted(on_ray, key=lambda r: r["line"]) == sorted(local, key=lambda r: r["line"])
    assert "batch summary" in done.stderr and "Traceback" not in done.stderr


async def _one_input_killing(kills: int, fixture: str) -> tuple[list[BatchOutcome], list[Any]]:
    """Run one input on two actors, killing the actor it is handed to, `kills` times."""
    actors: list[Any] = []

    def kill(item: BatchItem, actor: Any) -> None:
        actors.append(actor)
        if len(actors) <= kills:
            ray.kill(actor)

    outcomes: list[BatchOutcome] = []

    async def keep(outcome: BatchOutcome) -> None:
        outcomes.append(outcome)

    await run_ray(parse_program(PROGRAM), [BatchItem(line=1, key=1, value={"n": 1})], keep,
                  config=HostConfig(), evaluator=f"fixture:{fixture}", concurrency=1, address=None,
                  actors=2, on_dispatch=kill)
    return outcomes, actors


@pytest.mark.anyio
async def test_an_input_whose_actor_dies_is_retried_on_another(cluster: str, tmp_path: Path) -> None:
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps(FIXTURE))
    outcomes, actors = await _one_input_killing(1, str(fixture))
    assert len(actors) == 2 and actors[0] != actors[1]
    assert [o.to_json() for o in outcomes] == [{
        "line": 1, "id": 1, "state": "completed", "result": {"n": 1, "ok": 0.75}, "evaluations": 1,
        "toolCalls": 1, "usage": {"input_tokens": 10, "output_tokens": 2},
        "evaluator": {"route": "fixture", "model": "fixture", "readout": "fixture", "calibration": "none"}}]


@pytest.mark.anyio
async def test_an_input_whose_second_actor_dies_too_is_reported_failed(cluster: str, tmp_path: Path) -> None:
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps(FIXTURE))
    outcomes, actors = await _one_input_killing(2, str(fixture))
    assert len(actors) == 2 and actors[0] != actors[1]
    assert [(o.line, o.state, o.error) for o in outcomes] == [(1, "failed", ACTOR_DIED_TWICE)]


@pytest.mark.anyio
async def test_ray_needs_the_evaluator_as_a_spec(cluster: str) -> None:
    async def keep(outcome: BatchOutcome) -> None:
        raise AssertionError("nothing runs")

    with pytest.raises(ConfigError, match="give the evaluator as a spec string"):
        await run_batch(PROGRAM, [{"n": 1}], keep, evaluator=FixtureEvaluator(FIXTURE), ray=True)
