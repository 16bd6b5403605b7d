"""`fabric-jev bench typecheck`: what type-checking costs, next to yardsticks measured in the same run.

Whole processes (each sample runs every command in turn, so a machine that
slows down mid-run moves them alike; ratios are taken sample by sample):

* `check` of a ten-line TypeScript program, against a trivial JavaScript `run`
  (`return 1`) — goal ≤ 2×;
* `run` of that TypeScript program, against `run` of the same program written
  in JavaScript — goal ≤ 1.5×.

Each of these runs with an empty verdict cache (a fresh FABRIC_JEV_HOME), so
the compiler runs every time; the same `run`s with the verdict on disk, and a
`run` with checking off, are shown beside them.

Inside one host: a relaunch of the checked TypeScript program (its verdict
remembered) against a relaunch of its JavaScript twin — goal ≤ 1.1×.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GOALS = {"check_vs_trivial_run": 2.0, "ts_run_vs_js_run": 1.5, "relaunch_vs_js_twin": 1.1}
_SCHEMAS = {"inputSchema": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
            "outputSchema": {"type": "object", "required": ["words", "top"],
                             "properties": {"words": {"type": "integer"},
                                            "top": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}}
TS_CODE = """\
interface Row { word: string; count: number }
const counts = new Map<string, number>();
for (const w of input.text.split(/\\s+/)) counts.set(w, (counts.get(w) ?? 0) + 1);
const rows: Row[] = [...counts].map(([word, count]): Row => ({ word, count }));
rows.sort((a: Row, b: Row) => b.count - a.count || a.word.localeCompare(b.word));
await program.emit({ distinct: rows.length } satisfies object);
const top: string | null = rows[0]?.word ?? null;
return { words: rows.length, top };"""
JS_CODE = """\
const counts = new Map();
for (const w of input.text.split(/\\s+/)) counts.set(w, (counts.get(w) ?? 0) + 1);
const rows = [...counts].map(([word, count]) => ({ word, count }));
rows.sort((a, b) => b.count - a.count || a.word.localeCompare(b.word));
await program.emit({ distinct: rows.length });
const top = rows[0]?.word ?? null;
return { words: rows.length, top };"""
TS_PROGRAM = {"name": "bench-ts", "code": TS_CODE, **_SCHEMAS}
JS_PROGRAM = {"name": "bench-js", "code": JS_CODE, **_SCHEMAS}
TRIVIAL = {"name": "trivial", "code": "return 1", "inputSchema": {}, "outputSchema": {"type": "integer"}}
INPUT = {"text": "the cat saw the other cat and the dog"}


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str], home: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one command with FABRIC_JEV_HOME=home; it must succeed."""
    env = {**os.environ, "FABRIC_JEV_HOME": str(home)}
    cpu = _cpu_of_children()
    start = time.perf_counter()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          check=False, env=env)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"benchmark command failed (exit {done.returncode}): {' '.join(argv)}: "
                           f"{done.stderr.decode(errors='replace')[-500:]}")
    return took, _cpu_of_children() - cpu


def bench_processes(samples: int) -> dict[str, object]:
    from .cli import _command

    cli = _command()
    with tempfile.TemporaryDirectory(prefix="fabric-jev-bench-tc-") as tmp:
        folder = Path(tmp)
        paths = {}
        for name, value in (("ts", TS_PROGRAM), ("js", JS_PROGRAM), ("trivial", TRIVIAL), ("input", INPUT),
                            ("off", {"typecheck": {"typescript": "off", "javascript": "off"}})):
            paths[name] = folder / f"{name}.json"
            paths[name].write_text(json.dumps(value), encoding="utf-8")
        given = ["--input", str(paths["input"]), "--evaluator", "local"]
        commands = {
            "trivial_run": [*cli, "run", str(paths["trivial"]), "--evaluator", "local"],
            "check": [*cli, "check", str(paths["ts"])],
            "ts_run": [*cli, "run", str(paths["ts"]), *given],
            "js_run": [*cli, "run", str(paths["js"]), *given],
            "ts_run_cached": [*cli, "run", str(paths["ts"]), *given],
            "js_run_cached": [*cli, "run", str(paths["js"]), *given],
            "js_run_unchecked": [*cli, "run", str(paths["js"]), *given, "--config", str(paths["off"])],
        }
        warm = folder / "warm-home"  # the verdicts stay here: the "_cached" runs find them on disk
        for argv in commands.values():  # the page cache, compiled bytecode, and the warm home's verdicts
            _timed(argv, warm)
        wall: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for n in range(samples):
            for name, argv in commands.items():
                home = warm if name.endswith("_cached") else folder / f"home-{n}-{name}"  # empty: a cold check
                took, used = _timed(argv, home)
                wall[name].append(took)
                cpu[name].append(used)

    def ratio(figures: dict[str, list[float]], top: str, bottom: str) -> float:
        return statistics.median(a / b for a, b in zip(figures[top], figures[bottom], strict=True))

    pairs = {"check_vs_trivial_run": ("check", "trivial_run"), "ts_run_vs_js_run": ("ts_run", "js_run"),
             "cached_ts_run_vs_js_run": ("ts_run_cached", "js_run_cached"),
             "js_run_vs_unchecked": ("js_run", "js_run_unchecked")}
    return {"samples": samples, "command": " ".join(cli),
            "median_s": {k: statistics.median(v) for k, v in wall.items()},
            "median_cpu_s": {k: statistics.median(v) for k, v in cpu.items()},
            "ratios": {k: ratio(wall, *v) for k, v in pairs.items()},
            "cpu_ratios": {k: ratio(cpu, *v) for k, v in pairs.items()}}


async def bench_relaunch(samples: int) -> dict[str, object]:
    """One host: alternate relaunches of the checked TypeScript program and its JavaScript twin."""
    import anyio

    from ..contract.config import HostConfig
    from ..host import JevHost

    ts_times: list[float] = []
    js_times: list[float] = []
    async with JevHost(HostConfig(warm_workers=2)) as host:
        for program in (TS_PROGRAM, JS_PROGRAM):  # the first launch of each is checked and remembered
            envelope = await host.run(program, INPUT)
            if envelope.state.value != "completed" or envelope.typecheck is None:
                raise RuntimeError(f"benchmark program did not run: {envelope.error}")
        await anyio.sleep(0.3)  # let the pool warm up
        for _ in range(samples):
            for program, times in ((TS_PROGRAM, ts_times), (JS_PROGRAM, js_times)):
                start = time.perf_counter()
                envelope = await host.run(program, INPUT)
                times.append((time.perf_counter() - start) * 1000)
                if envelope.typecheck is None or not envelope.typecheck.cached:
                    raise RuntimeError("a relaunch was checked again")
                await anyio.sleep(0.02)  # let the pool refill, as between real launches
    return {"samples": samples, "ts_ms": statistics.median(ts_times), "js_ms": statistics.median(js_times),
            "ratio": statistics.median(t / j for t, j in zip(ts_times, js_times, strict=True))}


async def bench_compiler(samples: int) -> dict[str, object]:
    """The compile alone, in this process: memory and disk caches bypassed."""
    from ..contract.config import TypecheckConfig
    from ..contract.program import parse_program
    from ..typecheck import cache, checker

    config = TypecheckConfig(disk_cache=False)
    out: dict[str, Any] = {"samples": samples}
    for name, raw in (("ts", TS_PROGRAM), ("js", JS_PROGRAM)):
        program = parse_program(raw)
        times = []
        for _ in range(samples):
            cache.forget_all()
            start = time.perf_counter()
            verdict = await checker.check(program, config=config)
            times.append((time.perf_counter() - start) * 1000)
            if not verdict.clean:
                raise RuntimeError(f"benchmark program has type errors: {verdict.refusal()}")
        out[f"{name}_ms"] = statistics.median(times)
    return out


async def bench_typecheck(samples: int) -> dict[str, object]:
    import anyio.to_thread

    processes = await anyio.to_thread.run_sync(bench_processes, min(samples, 10))
    return {"processes": processes, "relaunch": await bench_relaunch(max(samples, 20)),
            "compile": await bench_compiler(min(samples, 20)), "goals": GOALS, "python": sys.version.split()[0]}


def print_typecheck(r: dict[str, Any]) -> None:
    p, rl, c = r["processes"], r["relaunch"], r["compile"]
    m, cpu, ratio, cratio = p["median_s"], p["median_cpu_s"], p["ratios"], p["cpu_ratios"]
    print(f"typecheck (whole processes, median of {p['samples']}; cold = an empty verdict cache)")
    rows = (("run of `return 1` (JavaScript, cold)", "trivial_run"), ("check of a 10-line TypeScript program", "check"),
            ("run of it (cold)", "ts_run"), ("run of its JavaScript twin (cold)", "js_run"),
            ("run of it, verdict on disk", "ts_run_cached"), ("run of the twin, verdict on disk", "js_run_cached"),
            ("run of the twin, checking off", "js_run_unchecked"))
    for label, key in rows:
        print(f"  {label:40}{m[key] * 1000:8.1f} ms wall {cpu[key] * 1000:8.1f} ms cpu")
    goals = (("check / trivial run", "check_vs_trivial_run", "<= 2.0"),
             ("TypeScript run / JavaScript run (cold)", "ts_run_vs_js_run", "<= 1.5"),
             ("the same, verdicts on disk", "cached_ts_run_vs_js_run", ""),
             ("JavaScript run, checked / unchecked", "js_run_vs_unchecked", ""))
    for label, key, goal in goals:
        print(f"  {label:40}{ratio[key]:8.2f}x wall {cratio[key]:8.2f}x cpu   {goal}")
    print(f"  inside one host, relaunch: TypeScript {rl['ts_ms']:.2f} ms, JavaScript twin {rl['js_ms']:.2f} ms, "
          f"ratio {rl['ratio']:.2f} (median of {rl['samples']}; goal <= 1.1)")
    print(f"  the compile alone (tsgo, in-process driver): TypeScript {c['ts_ms']:.0f} ms, "
          f"JavaScript {c['js_ms']:.0f} ms (median of {c['samples']})")
