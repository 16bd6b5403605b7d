"""`fabric-jev bench pytest`, second part: what explaining a cassette miss costs.

A cassette holds 5 recordings whose states are 12,000 short rows each (the
shape that made difflib's line matching quadratic: 72 s for one miss before
the nearest-request search was bounded). A request that differs from one of
them in one row is asked under record mode `none`, so it misses and the
message carries the nearest recording and its diff. The floor, measured in
the same run, is a replayed hit of a request of the same size: digesting
(redacting) the request, the lookup and the answer's validation. The figure
is the median of the per-sample ratios. A measurement, never a test.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROWS = 12_000
RECORDINGS = 5
QUESTION = {"type": "noul", "instructions": "Is it safe to run?"}


async def bench_cassette_miss(samples: int = 5) -> dict[str, object]:
    from ..contract.evaluation import validate_request
    from ..errors import CassetteMiss
    from ..evaluators.recording import RecordingEvaluator
    from ..testing.evaluators import ScriptedEvaluator

    def ask(state: Any) -> Any:
        return validate_request({"state": state, "questions": {"q": QUESTION}}, max_bytes=1 << 22)

    base = [f"row {i % 7}" for i in range(ROWS)]
    states = [[*base[:k * 100], f"edit {k}", *base[k * 100 + 1:]] for k in range(RECORDINGS)]
    asked = list(states[3])
    asked[ROWS * 3 // 4] = "a new row"
    with tempfile.TemporaryDirectory(prefix="fabric-jev-bench-cassette-") as tmp:
        path = Path(tmp) / "tape.jsonl"
        recorder = RecordingEvaluator(path, "new", record_from=ScriptedEvaluator({"q": {"noul": 0.5}}))
        for state in states:
            await recorder.evaluate(ask(state), timeout=60)
        await recorder.aclose()
        player = RecordingEvaluator(path, "none")
        hit, miss = ask(states[3]), ask(asked)
        hits: list[float] = []
        misses: list[float] = []
        for _ in range(samples):
            start = time.perf_counter()
            await player.evaluate(hit, timeout=60)
            hits.append(time.perf_counter() - start)
            start = time.perf_counter()
            try:
                await player.evaluate(miss, timeout=60)
            except CassetteMiss:
                pass
            else:
                raise RuntimeError("the benchmark's miss was answered")
            misses.append(time.perf_counter() - start)
            await anyio.lowlevel.checkpoint()
    return {"samples": samples, "recordings": RECORDINGS, "rows": ROWS,
            "median_s": {"hit": statistics.median(hits), "miss": statistics.median(misses)},
            "ratio_miss_to_hit": statistics.median(m / h for m, h in zip(misses, hits, strict=True))}


def print_cassette_miss(r: dict[str, Any]) -> None:
    m = r["median_s"]
    print(f"cassette miss ({r['recordings']} recordings of {r['rows']:,} short rows, median of {r['samples']})")
    print(f"  {'replayed hit (the floor)':30}{m['hit'] * 1000:8.1f}ms")
    print(f"  {'miss with the nearest diff':30}{m['miss'] * 1000:8.1f}ms")
    print(f"  {'ratio':30}{r['ratio_miss_to_hit']:10.2f}")
