"""`fabric-jev bench cli`: whole-command start-up, next to a floor measured in the same run.

The floor is a bare Python process that imports quickjs and evaluates `1`: the
least any command that runs a program can cost. Each sample runs the floor and
the three measured commands in turn, so a machine that slows down mid-run moves
all four alike; ratios are taken sample by sample and their median reported.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GOALS = {"run": 4.0, "help": 3.0}
IMPORT_GOAL_S = 0.15
TRIVIAL_PROGRAM = {"name": "trivial", "code": "return 1", "inputSchema": {},
                   "outputSchema": {"type": "integer"}}


def _command() -> list[str]:
    """The installed `fabric-jev` script when it sits beside this interpreter, else `python -m`."""
    script = Path(sys.executable).with_name("fabric-jev")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "fabric_jev"]


def _wall(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"benchmark command failed (exit {done.returncode}): {' '.join(argv)}")
    return took


def bench_cli(samples: int = 15) -> dict[str, Any]:
    cli = _command()
    with tempfile.TemporaryDirectory(prefix="fabric-jev-bench-") as tmp:
        program = os.path.join(tmp, "trivial.json")
        Path(program).write_text(json.dumps(TRIVIAL_PROGRAM), encoding="utf-8")
        commands = {
            "floor": [sys.executable, "-c", "import quickjs; quickjs.Context().eval('1')"],
            "run": [*cli, "run", program, "--evaluator", "local"],
            "help": [*cli, "--help"],
            "import": [sys.executable, "-c", "import fabric_jev"],
        }
        for argv in commands.values():  # warm the page cache and compiled bytecode
            _wall(argv)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(samples):
            for name, argv in commands.items():
                times[name].append(_wall(argv))
    ratios = {name: statistics.median(t / f for t, f in zip(times[name], times["floor"], strict=True))
              for name in GOALS}
    return {"samples": samples, "command": " ".join(cli),
            "median_s": {name: statistics.median(t) for name, t in times.items()},
            "ratio_to_floor": ratios, "goals": {**GOALS, "import_s": IMPORT_GOAL_S}}


def print_cli(r: dict[str, Any]) -> None:
    m, ratio = r["median_s"], r["ratio_to_floor"]
    print(f"cli (whole processes, median of {r['samples']}; floor: python importing quickjs, evaluating 1)")
    print(f"  floor                  {m['floor'] * 1000:8.1f} ms")
    print(f"  run of a trivial program {m['run'] * 1000:6.1f} ms   ratio {ratio['run']:5.2f} (goal <= 4)")
    print(f"  --help                 {m['help'] * 1000:8.1f} ms   ratio {ratio['help']:5.2f} (goal <= 3)")
    print(f"  import fabric_jev      {m['import'] * 1000:8.1f} ms   (goal <= 150 ms)")
