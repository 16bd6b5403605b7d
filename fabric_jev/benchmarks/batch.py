"""Batch benchmark: inputs per second of a local batch and of a Ray batch, each next to a floor.

Every input runs a small program that asks the fixture evaluator one noul
question, so the figures are the host's own cost, not a model's latency.
Floors, in the same process and run:

- one `run_program()` call per input, one after another (what a plain loop in
  a script does: a host started and closed for each input);
- one `host.run()` per input, one after another, on a single warm host.

The same comparison is made for a program that waits 50 ms per input (a
stand-in for a model's latency), where running several at a time matters.

The Ray figure starts a local cluster (`ray.init(num_cpus=2)`, not timed) and
times whole batches, actor start-up included; it needs the `ray` extra.
"""

from __future__ import annotations

import logging
import time
from statistics import median
from typing import Any

import anyio

from ..contract.config import HostConfig
from ..evaluators.fixture import FixtureEvaluator

PROGRAM: dict[str, Any] = {
    "name": "bench-batch",
    "code": "const a = await jev.evaluate({state: input, questions: {q: {type: 'noul', instructions: 'ok?'}}}); "
            "return {n: input.n, ok: a.answers.q.noul}",
    "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}, "requires": ["jev.evaluate"],
}
#: The same with 50 ms of waiting per input, standing in for a model's latency.
WAITING_PROGRAM: dict[str, Any] = {**PROGRAM, "name": "bench-batch-waiting",
                                   "code": "await program.sleep(50); " + PROGRAM["code"]}
WAITING_INPUTS = 64
FIXTURE: dict[str, Any] = {"answers": {"q": {"noul": 0.75}}, "usage": {"input_tokens": 10, "output_tokens": 2}}


async def _local_batch(inputs: list[Any], concurrency: int | None,
                       program: dict[str, Any] = PROGRAM) -> float:
    from ..batch import BatchOutcome, run_batch

    done = 0

    async def count(outcome: BatchOutcome) -> None:
        nonlocal done
        done += outcome.completed

    started = time.perf_counter()
    await run_batch(program, inputs, count, evaluator=FixtureEvaluator(FIXTURE), concurrency=concurrency)
    elapsed = time.perf_counter() - started
    assert done == len(inputs), "every benchmark input completes"
    return len(inputs) / elapsed


async def _ray_batch(inputs: list[Any], fixture_path: str) -> float:
    from ..batch import BatchOutcome, run_batch

    done = 0

    async def count(outcome: BatchOutcome) -> None:
        nonlocal done
        done += outcome.completed

    started = time.perf_counter()
    await run_batch(PROGRAM, inputs, count, evaluator=f"fixture:{fixture_path}", ray=True)
    elapsed = time.perf_counter() - started
    assert done == len(inputs), "every benchmark input completes"
    return len(inputs) / elapsed


def _run_program_loop(inputs: list[Any]) -> float:
    from .._sync import run_program

    evaluator = FixtureEvaluator(FIXTURE)
    started = time.perf_counter()
    for value in inputs:
        run_program(PROGRAM, value, evaluator=evaluator)
    return len(inputs) / (time.perf_counter() - started)


async def _host_run_loop(inputs: list[Any], program: dict[str, Any] = PROGRAM) -> float:
    from ..host import JevHost

    async with JevHost(HostConfig(), evaluator=FixtureEvaluator(FIXTURE)) as host:
        started = time.perf_counter()
        for value in inputs:
            await host.run(program, value)
        return len(inputs) / (time.perf_counter() - started)


async def bench_batch(*, inputs: int = 200, repeats: int = 3, with_ray: bool = True) -> dict[str, object]:
    values = [{"n": n} for n in range(inputs)]
    loop_values = values[: max(10, inputs // 4)]  # the run_program loop is slow; fewer inputs, same rate
    local, local_16, sequential, run_program_rates = [], [], [], []
    for _ in range(repeats):
        local.append(await _local_batch(values, None))
        local_16.append(await _local_batch(values, 16))
        sequential.append(await _host_run_loop(values))
        run_program_rates.append(await anyio.to_thread.run_sync(_run_program_loop, loop_values))
    waiting = values[:WAITING_INPUTS]
    waiting_rates = {"batch_4": median([await _local_batch(waiting, None, WAITING_PROGRAM)
                                         for _ in range(repeats)]),
                     "batch_16": median([await _local_batch(waiting, 16, WAITING_PROGRAM)
                                          for _ in range(repeats)]),
                     "host_run_loop": median([await _host_run_loop(waiting, WAITING_PROGRAM)
                                               for _ in range(repeats)])}
    report: dict[str, Any] = {
        "waiting_50ms_per_s": waiting_rates,
        "inputs": inputs, "repeats": repeats,
        "local_batch_per_s": median(local),
        "local_batch_16_per_s": median(local_16),
        "host_run_loop_per_s": median(sequential),
        "run_program_loop_per_s": median(run_program_rates),
        "run_program_loop_inputs": len(loop_values),
    }
    report["ratio_vs_run_program"] = report["local_batch_per_s"] / report["run_program_loop_per_s"]
    report["ratio_vs_host_run_loop"] = report["local_batch_per_s"] / report["host_run_loop_per_s"]
    report["ray"] = await _bench_ray(values, repeats, report["local_batch_per_s"]) if with_ray else None
    return report


async def _bench_ray(values: list[Any], repeats: int, local_rate: float) -> dict[str, Any] | None:
    try:
        import ray
    except ImportError:
        return None
    import json
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        fixture = Path(folder) / "fixture.json"
        fixture.write_text(json.dumps(FIXTURE))
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
        try:
            rates = [await _ray_batch(values, str(fixture)) for _ in range(repeats)]
        finally:
            ray.shutdown()
    rate = median(rates)
    return {"actors": 2, "batch_per_s": rate, "ratio_vs_local": rate / local_rate}


def _print_batch(r: dict[str, Any]) -> None:
    print(f"batch ({r['inputs']} inputs, one fixture evaluation each; median of {r['repeats']})")
    print(f"  local batch (4 at a time)      {r['local_batch_per_s']:8.1f} inputs/s")
    print(f"  local batch (16 at a time)     {r['local_batch_16_per_s']:8.1f} inputs/s")
    print(f"  floor: host.run one at a time  {r['host_run_loop_per_s']:8.1f} inputs/s   "
          f"batch is {r['ratio_vs_host_run_loop']:.2f}x")
    print(f"  floor: run_program per input   {r['run_program_loop_per_s']:8.1f} inputs/s   "
          f"batch is {r['ratio_vs_run_program']:.2f}x ({r['run_program_loop_inputs']} inputs)")
    w = r["waiting_50ms_per_s"]
    print(f"  with 50 ms of waiting per input ({WAITING_INPUTS} inputs): batch (4) {w['batch_4']:.1f}/s, "
          f"batch (16) {w['batch_16']:.1f}/s, host.run one at a time {w['host_run_loop']:.1f}/s")
    ray = r["ray"]
    if ray is None:
        print("  ray: not measured (the ray extra is not installed)")
    else:
        print(f"  ray, {ray['actors']} actors on this machine   {ray['batch_per_s']:8.1f} inputs/s   "
              f"{ray['ratio_vs_local']:.2f}x the local batch (actor start-up included)")
