"""`fabric-jev bench pytest`: what the installed pytest plugin costs a suite that does not use it.

The same generated suite (plain tests, none of the plugin's fixtures) is
collected with `pytest --co` as whole processes, with the plugin as installed
(loaded through its `pytest11` entry point) and with it blocked (`-p
no:fabric_jev`, so pytest never imports it). The two alternate sample by
sample, so a machine that slows down mid-run moves both alike; the figure is
the median of the per-sample ratios. CPU time (the process and what it waited
for) is reported beside wall time: on a loaded machine it moves much less.
It is a measurement, never a test.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FILES = 40
TESTS_PER_FILE = 10


def _suite(folder: Path) -> None:
    (folder / "pyproject.toml").write_text('[tool.pytest.ini_options]\nfilterwarnings = ["error"]\n')
    body = "\n\n".join(f"def test_{i}():\n    assert {i} + 1 > {i}" for i in range(TESTS_PER_FILE))
    for n in range(FILES):
        (folder / f"test_plain_{n:02}.py").write_text(body + "\n")


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds of one whole process."""
    cpu = _cpu_of_children()
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0 or f"{FILES * TESTS_PER_FILE} tests collected" not in done.stdout:
        raise RuntimeError(f"benchmark command failed (exit {done.returncode}): {' '.join(argv)}\n"
                           + done.stdout[-800:])
    return took, _cpu_of_children() - cpu


def bench_pytest_plugin(samples: int = 15) -> dict[str, object]:
    base = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"]
    commands = {"with_plugin": base, "without_plugin": [*base, "-p", "no:fabric_jev"]}
    with tempfile.TemporaryDirectory(prefix="fabric-jev-bench-pytest-") as tmp:
        folder = Path(tmp)
        _suite(folder)
        for argv in commands.values():  # warm the page cache and compiled bytecode
            _timed(argv, folder)
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(samples):
            for name, argv in commands.items():
                wall, used = _timed(argv, folder)
                times[name].append(wall)
                cpu[name].append(used)

    def ratio(figures: dict[str, list[float]]) -> float:
        return statistics.median(w / wo for w, wo in zip(figures["with_plugin"], figures["without_plugin"],
                                                         strict=True))

    return {"samples": samples, "tests": FILES * TESTS_PER_FILE,
            "median_s": {name: statistics.median(t) for name, t in times.items()},
            "median_cpu_s": {name: statistics.median(t) for name, t in cpu.items()},
            "ratio_with_to_without": ratio(times), "cpu_ratio_with_to_without": ratio(cpu)}


def print_pytest_plugin(r: dict[str, Any]) -> None:
    m, c = r["median_s"], r["median_cpu_s"]
    print(f"pytest plugin (pytest --co of {r['tests']} plain tests, whole processes, median of {r['samples']})")
    print(f"  {'':30}{'wall':>10}{'cpu':>10}")
    print(f"  {'plugin installed and loaded':30}{m['with_plugin'] * 1000:8.1f}ms{c['with_plugin'] * 1000:8.1f}ms")
    print(f"  {'plugin blocked (-p no:...)':30}{m['without_plugin'] * 1000:8.1f}ms"
          f"{c['without_plugin'] * 1000:8.1f}ms")
    print(f"  {'ratio':30}{r['ratio_with_to_without']:10.3f}{r['cpu_ratio_with_to_without']:10.3f}")
