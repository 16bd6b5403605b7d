"""`fabric-jev bench cli`: whole-command start-up, next to a floor measured in the same run.

The floor is a bare Python process that imports quickjs and evaluates `1`: the
least any command that runs a program can cost. Each sample runs the floor and
the three measured commands in turn, so a machine that slows down mid-run moves
all four alike; ratios are taken sample by sample and their median reported.
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

GOALS = {"run": 5.0, "help": 3.0}
IMPORT_GOAL_S = 0.15
TRIVIAL_PROGRAM = {"name": "trivial", "code": "return 1", "inputSchema": {},
                   "outputSchema": {"type": "integer"}}


def _command() -> list[str]:
    """The installed `fabric-jev` script when it sits beside this interpreter, else `python -m`."""
    script = Path(sys.executable).with_name("fabric-jev")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "fabric_jev"]


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _environment() -> dict[str, str]:
    """This environment, but free to write compiled bytecode: the warm-up run then leaves every
    module compiled, as an installed package is (pip compiles at install), instead of each sample
    compiling an editable checkout's modules from source again."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _timed(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (the command and the children it waited for)."""
    cpu = _cpu_of_children()
    start = time.perf_counter()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, check=False, env=_environment())
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"benchmark command failed (exit {done.returncode}): {' '.join(argv)}")
    return took, _cpu_of_children() - cpu


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
            _timed(argv)
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(samples):
            for name, argv in commands.items():
                wall, used = _timed(argv)
                times[name].append(wall)
                cpu[name].append(used)

    def ratios(figures: dict[str, list[float]]) -> dict[str, float]:
        return {name: statistics.median(t / f for t, f in zip(figures[name], figures["floor"], strict=True))
                for name in GOALS}

    # CPU time is reported too: on a loaded machine it moves far less than wall time.
    return {"samples": samples, "command": " ".join(cli),
            "median_s": {name: statistics.median(t) for name, t in times.items()},
            "median_cpu_s": {name: statistics.median(t) for name, t in cpu.items()},
            "ratio_to_floor": ratios(times), "cpu_ratio_to_floor": ratios(cpu),
            "goals": {**GOALS, "import_s": IMPORT_GOAL_S}}


def print_cli(r: dict[str, Any]) -> None:
    m, ratio, c, cratio = r["median_s"], r["ratio_to_floor"], r["median_cpu_s"], r["cpu_ratio_to_floor"]
    print(f"cli (whole processes, median of {r['samples']}; floor: python importing quickjs, evaluating 1)")
    print(f"  {'':26}{'wall':>9}{'ratio':>8}{'cpu':>11}{'ratio':>8}   goal")
    rows = (("floor", "floor", ""), ("run of a trivial program", "run", "ratio <= 5"),
            ("--help", "help", "ratio <= 3"), ("import fabric_jev", "import", "<= 150 ms"))
    for label, key, goal in rows:
        r1 = f"{ratio[key]:8.2f}" if key in ratio else " " * 8
        r2 = f"{cratio[key]:8.2f}" if key in cratio else " " * 8
        print(f"  {label:26}{m[key] * 1000:7.1f}ms{r1}{c[key] * 1000:9.1f}ms{r2}   {goal}")
