"""The local evaluator's answer time with one BLAS thread and with one per core, idle and under load.

Each measurement is a fresh process (OpenBLAS reads OPENBLAS_NUM_THREADS when
numpy loads), answering one question about a new state each time; the two
settings alternate so that drift hits both. First on the machine as it is
(idle or not), then with one process per core added that multiplies numpy
matrices in a loop with OpenBLAS's default threads: other numeric work on the
machine (another evaluator, a test suite, a model), where OpenBLAS's spinning
threads oversubscribe the cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from statistics import median
from typing import Any

_PROBE = """
import json, statistics, sys, time
from fabric_jev.contract.evaluation import validate_request
from fabric_jev.evaluators.local import LocalEvaluator
ev = LocalEvaluator()
q = {"type": "choice", "instructions": "Which queue owns this ticket?",
     "criteria": {"billing": "invoices and payments", "hardware": "devices in vehicles",
                  "software": "the app and the API"}}
text = ("The tracker in truck 12 stopped reporting after the firmware update, and the March invoice "
        "also lists a device the customer returned. They want both fixed today. ")
ev.answer_sync(validate_request({"state": "warm up", "questions": {"q": q}}))
times = []
for i in range(int(sys.argv[1])):
    request = validate_request({"state": text * 2 + f"Ticket {i * 7919}.", "questions": {"q": q}})
    start = time.perf_counter()
    ev.answer_sync(request)
    times.append((time.perf_counter() - start) * 1000)
print(json.dumps(statistics.median(times)))
"""


_NUMERIC_WORK = "import numpy as np\na = np.random.rand(300, 300)\nwhile True:\n    a @ a\n"


def _probe(threads: int, answers: int) -> float:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads)}
    done = subprocess.run([sys.executable, "-c", _PROBE, str(answers)], env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"encoder probe failed: {done.stderr.strip()[-300:]}")
    return float(json.loads(done.stdout))


def _pairs(cores: int, rounds: int, answers: int) -> dict[str, float]:
    one: list[float] = []
    many: list[float] = []
    for _ in range(rounds):
        one.append(_probe(1, answers))
        many.append(_probe(cores, answers))
    return {"one_thread_ms": median(one), "all_cores_ms": median(many)}


def bench_encoder_threads(rounds: int = 3, answers: int = 15) -> dict[str, object]:
    cores = os.cpu_count() or 1
    idle = _pairs(cores, rounds, answers)
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    hogs = [subprocess.Popen([sys.executable, "-c", _NUMERIC_WORK], env=env) for _ in range(cores)]
    try:
        loaded = _pairs(cores, rounds, answers)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    return {"cores": cores, "rounds": rounds, "answers": answers, "idle": idle, "loaded": loaded}


def print_encoder_threads(r: dict[str, Any]) -> None:
    for name in ("idle", "loaded"):
        m = r[name]
        what = "the machine as it is" if name == "idle" else f"{r['cores']} numpy processes added"
        print(f"  local, BLAS threads 1 vs {r['cores']} ({what}) {m['one_thread_ms']:7.1f} ms vs "
              f"{m['all_cores_ms']:.1f} ms   ratio {m['one_thread_ms'] / m['all_cores_ms']:.2f} "
              f"(median of {r['rounds']} processes x {r['answers']} answers)")
