"""Batches on a local Ray cluster started here (`ray.init(num_cpus=2)`), one for the module."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from fabric_jev import ConfigError, EvalError, FixtureEvaluator, HostConfig
from fabric_jev.batch import BatchItem, BatchOutcome, read_inputs, run_batch
from fabric_jev.contract.program import parse_program
from fabric_jev.evals import run_eval
from tests.test_batch import FIXTURE, PROGRAM, batch_argv, check_complete, files, records
from tests.test_eval_cli import DEADLINE, dataset
from tests.test_eval_cli import FIXTURE as EVAL_FIXTURE
from tests.test_eval_cli import PROGRAM as TRIAGE

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
async def test_at_most_actors_times_concurrency_inputs_are_in_flight(cluster: str, tmp_path: Path) -> None:
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps(FIXTURE))
    handed, done, most = 0, 0, 0

    def dispatched(item: BatchItem, actor: Any) -> None:
        nonlocal handed, most
        handed += 1
        most = max(most, handed - done)

    async def keep(outcome: BatchOutcome) -> None:
        nonlocal done
        done += 1
        assert outcome.judgments and outcome.judgments[0].evaluation.answers == {"q": {"type": "noul", "noul": 0.75}}

    items = [BatchItem(line=n, key=n, value={"n": n}) for n in range(1, 41) if n % 7]
    await run_ray(parse_program(PROGRAM), items, keep, config=HostConfig(), evaluator=f"fixture:{fixture}",
                  concurrency=3, address=None, actors=2, on_dispatch=dispatched, judgments=True)
    assert done == handed == len(items)
    assert 1 <= most <= 2 * 3


@pytest.mark.anyio
async def test_ray_needs_the_evaluator_as_a_spec(cluster: str) -> None:
    async def keep(outcome: BatchOutcome) -> None:
        raise AssertionError("nothing runs")

    with pytest.raises(ConfigError, match="give the evaluator as a spec string"):
        await run_batch(PROGRAM, [{"n": 1}], keep, evaluator=FixtureEvaluator(FIXTURE), ray=True)


# ---------------------------------------------------------------- eval --ray

def _run_lines(folder: Path) -> list[dict[str, Any]]:
    """results.jsonl without what depends on the run: when each line started and how long it took."""
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    for line in lines:
        if "bad" not in line:
            assert line.pop("started") > 0 and line.pop("seconds") > 0
    return lines


def _summary_figures(folder: Path) -> dict[str, Any]:
    """summary.json without the cost's timings (wall time and the latency of a line)."""
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    for cell in summary["cells"]:
        timings = {k for k in cell["cost"] if k == "wallSeconds" or k.startswith("lineSeconds")}
        assert len(timings) == 5
        for key in timings:
            del cell["cost"][key]
    return summary


@pytest.mark.timeout(240)
@pytest.mark.anyio
async def test_eval_on_ray_writes_the_records_and_summary_a_local_eval_writes(cluster: str, tmp_path: Path) -> None:
    data = dataset(tmp_path, 12, '{"input": {"text": "no expected value"}}')
    matrix = ("--evaluator", "local", "--evaluator", EVAL_FIXTURE, "--variant", f"deadline={DEADLINE}")
    local = tmp_path / "local"
    await run_eval(TRIAGE, data, evaluators=["local", EVAL_FIXTURE], variants={"deadline": DEADLINE}, out=local)
    # The real command, as a second driver on the test's cluster: two evaluators, a pool of two actors each.
    on_ray = tmp_path / "ray"
    done = subprocess.run([sys.executable, "-m", "fabric_jev", "eval", TRIAGE, "--dataset", str(data), *matrix,
                           "--out", str(on_ray), "--ray", cluster, "--actors", "2", "--concurrency", "2"],
                          capture_output=True, text=True, timeout=220, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "eval: [48/48] line" in done.stderr  # the progress, one line per outcome off a terminal
    ray_lines, local_lines = _run_lines(on_ray), _run_lines(local)
    assert len(ray_lines) == 1 + 4 * 12 and ray_lines == local_lines  # record for record, in the same order
    assert {tuple(j["provenance"].get("readout") for j in line["judgments"]) for line in ray_lines[1:]} == \
        {("heuristic",), ("fixture",)}
    assert _summary_figures(on_ray) == _summary_figures(local)
    # The same eval, wherever it ran: one may be resumed on the other.
    assert (on_ray / "manifest.json").read_bytes() == (local / "manifest.json").read_bytes()


@pytest.mark.timeout(240)
@pytest.mark.anyio
async def test_an_eval_on_ray_resumes_and_refuses_a_changed_wording(cluster: str, tmp_path: Path) -> None:
    data = dataset(tmp_path, 10)
    folder = tmp_path / "out"
    cells: dict[str, Any] = {"evaluators": [EVAL_FIXTURE], "variants": {"deadline": DEADLINE}}
    seen = 0
    with anyio.CancelScope() as scope:
        def counted(_: Any) -> None:
            nonlocal seen
            seen += 1
            if seen == 6:
                scope.cancel()  # as Ctrl-C does: the lines in flight are not written

        await run_eval(TRIAGE, data, **cells, out=folder, ray=True, actors=2, concurrency=2, on_outcome=counted)
    assert scope.cancelled_caught
    partial = (folder / "results.jsonl.partial").read_text(encoding="utf-8").splitlines()
    assert 6 <= len(partial) < 20 and not (folder / "results.jsonl").exists()
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    reworded = tmp_path / "triage-deadline.js"
    reworded.write_text(Path(DEADLINE).read_text(encoding="utf-8").replace(
        "Does the customer mention a deadline?", "Is there a deadline?"), encoding="utf-8")
    with pytest.raises(EvalError, match=re.escape("variant 'deadline' changed since it was recorded: its code "
                                                  "differs; resume with the program files it was started with")):
        await run_eval(TRIAGE, data, evaluators=[EVAL_FIXTURE], variants={"deadline": str(reworded)}, out=folder,
                       resume=True, ray=True, actors=2)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before

    counts: list[tuple[int, int]] = []
    await run_eval(TRIAGE, data, **cells, out=folder, resume=True, ray=True, actors=2,
                   on_start=lambda total, skipped: counts.append((total, skipped)))
    assert counts == [(20, len(partial))]
    local = tmp_path / "local"
    await run_eval(TRIAGE, data, **cells, out=local)
    assert _run_lines(folder) == _run_lines(local)  # each line once, as a local eval has it
    assert _summary_figures(folder) == _summary_figures(local)
