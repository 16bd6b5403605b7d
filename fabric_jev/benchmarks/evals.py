"""`fabric-jev bench eval`: what an eval costs over a batch, and how fast its report opens.

1. Overhead. The same program on the same inputs, with the same fixture
   evaluator and concurrency, as a batch (`run_batch`, writing its output
   file) and as an eval (`run_eval` with `--out`: every line compared, its
   judgments kept and written, then the summary). Each sample runs both, in
   turn first, so a machine that slows down mid-run moves both alike; the
   figure is the median of the per-sample ratios. Goal: ≤ 1.10.
2. Ray. The same 200 lines with the embedded local evaluator, as a local
   eval and as `run_eval(..., ray=True)` on a local cluster of 2 CPUs
   (`ray.init` not timed; the actors' start-up timed), each sample running
   both, in turn first; the records of both are checked equal but for their
   timings. Needs the ray extra.
3. The report. Reports of 100 and of 10,000 lines (two cells each, synthetic
   results) are opened in headless Chromium (the browser connector); the time
   is from navigation to the page's script having drawn it (`reportReadyAt`,
   the page's own clock). Goal: under 2 s for 10,000 lines; the ratio to the
   100-line report shows how it grows.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ..contract.program import Program, parse_program
from ..contract.values import JsonValue
from ..evals.compare import EvalSettings
from ..evals.dataset import Dataset, DatasetFormat, EvalCase
from ..evals.records import EvalRecord, RecordedJudgment
from ..evals.summary import EvalSummary, summarize

OVERHEAD_GOAL = 1.10
REPORT_GOAL_S = 2.0
OUTPUT = {"type": "object", "additionalProperties": False,
          "properties": {"route": {"enum": ["billing", "technical", "review"]}, "refund": {"type": "boolean"},
                         "urgent": {"type": "boolean"}, "urgency": {"type": "number"}}}
PROGRAM: dict[str, Any] = {
    "name": "bench-eval",
    "inputSchema": {"type": "object"}, "outputSchema": OUTPUT, "requires": ["jev.evaluate"],
    "code": "const {answers} = await jev.evaluate({state: input.text, questions: {"
            "route: {type: 'choice', instructions: 'team?', criteria: {billing: null, technical: null, other: null}},"
            "urgent: {type: 'noul', instructions: 'urgent?'}}});"
            "return {route: answers.route.choice === 'other' ? 'review' : answers.route.choice, refund: false,"
            " urgent: answers.urgent.noul >= 0.5, urgency: answers.urgent.noul * 2};",
}
FIXTURE: dict[str, Any] = {
    "usage": {"input_tokens": 40, "output_tokens": 2},
    "answers": {"route": {"choice": "technical", "probabilities": {"billing": 0.2, "technical": 0.7, "other": 0.1},
                          "confidence": 0.7}, "urgent": {"noul": 0.2}},
    "rules": [{"question": "route", "stateContains": "charged",
               "answer": {"choice": "billing", "probabilities": {"billing": 0.9, "technical": 0.05, "other": 0.05},
                          "confidence": 0.9}},
              {"question": "urgent", "stateContains": "down", "answer": {"noul": 0.9}}],
}
TEXTS = ("I was charged twice", "the site is down", "the export crashes", "charged for nothing, the app is down")


def bench_cases(lines: int) -> list[EvalCase]:
    out = []
    for i in range(lines):
        text = f"{TEXTS[i % len(TEXTS)]} (ticket {i})"
        route = "billing" if "charged" in text else "technical"
        out.append(EvalCase(i + 1, i + 1, {"text": text}, {"route": route, "urgent": "down" in text}))
    return out


def synthetic_summary(lines: int, *, seed: int = 7) -> tuple[EvalSummary, list[EvalRecord]]:
    """An eval of `lines` lines in two cells, made up without running anything (reports at any size)."""
    rng = random.Random(seed)
    settings = EvalSettings(tolerance={"urgency": 0.5})
    records: list[EvalRecord] = []
    cases = []
    for i in range(lines):
        route = rng.choice(["billing", "technical", "review"])
        urgent = rng.random() < 0.3
        labels: dict[str, JsonValue] = {"route": route, "refund": rng.random() < 0.2, "urgent": urgent,
                                        "urgency": 2 if urgent else 0}
        cases.append(EvalCase(i + 1, f"s{i + 1}", {"text": f"ticket {i + 1}: " + " ".join(
            rng.choice(["charged", "refund", "down", "slow", "invoice", "crash", "asap"]) for _ in range(12))},
            labels))
    for variant, skill in (("base", 0.85), ("sharp", 0.9)):
        for case in cases:
            expected = case.expected
            assert isinstance(expected, dict)
            right = rng.random() < skill
            confidence = round(rng.uniform(0.5, 1.0), 3)
            picked = expected["route"] if right or rng.random() < 0.5 else "technical"
            noul = round(rng.random(), 3)
            result: dict[str, JsonValue] = {
                "route": picked, "refund": expected["refund"],
                "urgent": expected["urgent"] if right else noul >= 0.5, "urgency": 2 * noul}
            choice = picked if picked != "review" else "other"
            rest = round((1 - confidence) / 2, 4)
            answers: dict[str, dict[str, Any]] = {
                "route": {"type": "choice", "choice": choice, "confidence": confidence,
                          "probabilities": {k: confidence if k == choice else rest
                                            for k in ("billing", "technical", "other")}},
                "urgent": {"type": "noul", "noul": noul}}
            judgment = RecordedJudgment(answers=answers, usage={"input_tokens": 40, "output_tokens": 2},
                                        provenance={"route": "fixture", "model": "synthetic", "readout": None,
                                                    "profile": None, "calibration": None})
            state = "completed" if rng.random() > 0.01 else "failed"
            records.append(EvalRecord.judged(
                ("fixture", variant), case, state=state, result=result if state == "completed" else None,
                error=None if state == "completed" else "Error: synthetic failure", settings=settings,
                evaluations=1, tool_calls=1, usage={"input_tokens": 40, "output_tokens": 2},
                started=1_700_000_000 + case.line * 0.01, seconds=rng.uniform(0.002, 0.02), judgments=(judgment,)))
    dataset = Dataset(f"synthetic-{lines}.jsonl", DatasetFormat.JSONL, tuple(cases))
    summary = summarize(records, program="synthetic-triage", dataset=dataset, settings=settings,
                        output_schema=OUTPUT)
    return summary, records


async def _batch_once(program: Program, cases: list[EvalCase], folder: Path) -> float:
    from ..batch import BatchOutcome, OutputLog, run_batch
    from ..evaluators.fixture import FixtureEvaluator

    log = OutputLog(folder / "batch.jsonl")
    log.open(resume=False)

    async def record(outcome: BatchOutcome) -> None:
        log.append(outcome)

    started = time.perf_counter()
    try:
        await run_batch(program, [c.input for c in cases], record, evaluator=FixtureEvaluator(FIXTURE),
                        concurrency=4)
    finally:
        log.close()
    return time.perf_counter() - started


async def _eval_once(program: Program, cases: list[EvalCase], folder: Path) -> float:
    from ..evals.engine import run_eval
    from ..evaluators.fixture import FixtureEvaluator

    dataset = Dataset("bench.jsonl", DatasetFormat.JSONL, tuple(cases))
    started = time.perf_counter()
    await run_eval(program, dataset, evaluators={"fixture": FixtureEvaluator(FIXTURE)}, out=folder / "eval",
                   concurrency=4)
    return time.perf_counter() - started


async def bench_overhead(samples: int, lines: int = 200) -> dict[str, object]:
    program = parse_program(PROGRAM)
    cases = bench_cases(lines)
    batch: list[float] = []
    evals: list[float] = []
    with tempfile.TemporaryDirectory(prefix="fabric-jev-bench-eval-") as tmp:
        for n in range(samples + 1):  # the first pair warms the pool, the type check and the caches
            folder = Path(tmp) / str(n)
            folder.mkdir()
            if n % 2:  # each goes first half the time: no order effect (warm caches, a pool refill)
                b = await _batch_once(program, cases, folder)
                e = await _eval_once(program, cases, folder)
            else:
                e = await _eval_once(program, cases, folder)
                b = await _batch_once(program, cases, folder)
            if n:
                batch.append(b)
                evals.append(e)
    ratios = [e / b for e, b in zip(evals, batch, strict=True)]
    return {"lines": lines, "samples": samples, "batch_median_s": statistics.median(batch),
            "eval_median_s": statistics.median(evals), "ratio": statistics.median(ratios), "goal": OVERHEAD_GOAL}


async def bench_report(samples: int) -> dict[str, object]:
    """Open times of a 100-line and a 10,000-line report (None without the browser connector)."""
    from ..errors import ConfigError
    from ..evals.report import write_report
    from ..plugins import page_opener

    try:
        open_page = page_opener()
    except ConfigError as exc:
        return {"skipped": str(exc)}
    sizes = (100, 10_000)
    opened: dict[int, list[float]] = {size: [] for size in sizes}
    bytes_: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="fabric-jev-bench-report-") as tmp:
        pages = {}
        for size in sizes:
            summary, records = synthetic_summary(size)
            written = write_report(summary, Path(tmp) / str(size), records, charts=False)
            pages[size] = written.page.as_uri()
            bytes_[size] = written.page.stat().st_size
        async with open_page() as page:
            for n in range(samples + 1):
                for size in sizes:
                    await page.navigate(pages[size])
                    ready = await page.evaluate("window.reportReadyAt")
                    if n and isinstance(ready, int | float):
                        opened[size].append(float(ready) / 1000)
    medians = {size: statistics.median(times) for size, times in opened.items()}
    return {"samples": samples, "open_median_s": {str(k): v for k, v in medians.items()},
            "page_bytes": {str(k): v for k, v in bytes_.items()}, "ratio": medians[10_000] / medians[100],
            "goal_s": REPORT_GOAL_S}


async def _local_or_ray(program: Program, dataset: Dataset, folder: Path, ray: bool) -> tuple[float, list[Any]]:
    import json

    from ..evals.engine import run_eval

    started = time.perf_counter()
    await run_eval(program, dataset, evaluators=["local"], out=folder, concurrency=4, ray=ray or None)
    elapsed = time.perf_counter() - started
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    for line in lines:
        del line["started"], line["seconds"]
    return elapsed, lines


async def bench_ray(samples: int, lines: int = 200) -> dict[str, object] | None:
    """A local eval against the same eval on a local Ray cluster of 2 CPUs (None without ray)."""
    try:
        import ray
    except ImportError:
        return None
    import logging

    program = parse_program(PROGRAM)
    dataset = Dataset("bench.jsonl", DatasetFormat.JSONL, tuple(bench_cases(lines)))
    local: list[float] = []
    on_ray: list[float] = []
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        with tempfile.TemporaryDirectory(prefix="fabric-jev-bench-eval-ray-") as tmp:
            for n in range(samples):
                order = (False, True) if n % 2 == 0 else (True, False)
                results = {}
                for remote in order:
                    elapsed, results[remote] = await _local_or_ray(program, dataset, Path(tmp) / f"{n}-{remote}",
                                                                   remote)
                    (on_ray if remote else local).append(elapsed)
                assert results[True] == results[False], "eval --ray writes the records a local eval writes"
    finally:
        ray.shutdown()
    return {"lines": lines, "samples": samples, "actors": 2, "local_median_s": statistics.median(local),
            "ray_median_s": statistics.median(on_ray), "local_s": local, "ray_s": on_ray,
            "ratio": statistics.median(r / loc for r, loc in zip(on_ray, local, strict=True))}


async def bench_eval(samples: int) -> dict[str, object]:
    return {"overhead": await bench_overhead(min(samples, 9)), "ray": await bench_ray(min(samples, 3)),
            "report": await bench_report(min(samples, 7))}


def print_eval(r: dict[str, Any]) -> None:
    o = r["overhead"]
    print(f"eval (median of {o['samples']}; {o['lines']} lines, fixture evaluator, 4 at a time)")
    print(f"  batch {o['batch_median_s'] * 1000:8.1f} ms   eval {o['eval_median_s'] * 1000:8.1f} ms   "
          f"eval / batch {o['ratio']:.3f}   goal <= {o['goal']:.2f}")
    ray = r.get("ray")
    if ray is None:
        print("  ray: skipped (the ray extra is not installed)")
    else:
        print(f"  {ray['lines']} lines, local evaluator (median of {ray['samples']}): local eval "
              f"{ray['local_median_s']:.2f} s   eval --ray ({ray['actors']} actors) {ray['ray_median_s']:.2f} s   "
              f"ray / local {ray['ratio']:.2f}")
    rep = r["report"]
    if "skipped" in rep:
        print(f"  report: skipped ({rep['skipped']})")
        return
    opened, size = rep["open_median_s"], rep["page_bytes"]
    print(f"  report opened in Chromium (median of {rep['samples']}): 100 lines {opened['100'] * 1000:.0f} ms "
          f"({size['100'] // 1024} KiB), 10,000 lines {opened['10000'] * 1000:.0f} ms ({size['10000'] // 1024} KiB), "
          f"ratio {rep['ratio']:.2f}; goal 10,000 lines < {rep['goal_s']:.0f} s")
