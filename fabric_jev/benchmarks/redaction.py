"""`fabric-jev bench redaction`: what redaction costs, next to a floor measured in the same run.

The floor is one RE2 search through the same text for a string it does not
hold: the least a pass over the text costs through the RE2 binding. Measured,
sample by sample (ratios taken pair by pair, medians reported):

* ordinary text — the paragraphs of Python's language reference as the
  interpreter ships it (`pydoc_data.topics`), with the false positives
  redaction makes on them beside the cost;
* text holding secrets — one line per spelling family (command lines,
  name/value pairs, vendor keys, encodings), bodies drawn from a fixed seed;
* a JSON value such as approval evidence carries (a deployment's env entries
  and headers, 40 of each);
* hostile text — 50 KB and 200 KB of the slowest fillers found, in CPU time;
  the ratio of the two shows the growth (4.0 is linear);
* first use — a fresh process importing the rules and redacting one line
  (the vendor rule files are read and compiled then), against one that
  imports RE2 only.
"""

from __future__ import annotations

import random
import re
import statistics
import string
import subprocess
import sys
import time
from typing import Any

HOSTILE_FILLERS = ("mongo -p ", '"password": ', "net use \\\\a ", "htpasswd -b ", "%3D", "c")


def _paragraphs() -> list[str]:
    import pydoc_data.topics

    return [p for topic in pydoc_data.topics.topics.values() for p in re.split(r"\n\s*\n", topic) if p.strip()]


def _secret_lines(n: int = 200) -> list[str]:
    rng = random.Random(33)

    def body(k: int, alphabet: str = string.ascii_letters + string.digits) -> str:
        return "".join(rng.choice(alphabet) for _ in range(k))

    shapes = [
        lambda: f"mongo -u admin -p {body(12)} --authenticationDatabase admin",
        lambda: f"sqlcmd -S db -U sa -P '{body(10)}' -Q 'SELECT 1'",
        lambda: f"echo '{body(10)}' | sudo -S systemctl restart web",
        lambda: f"htpasswd -nb admin {body(12)}",
        lambda: f'{{"name": "DB_PASSWORD", "value": "{body(14)}"}}',
        lambda: f"<password>{body(12)}</password>",
        lambda: f"postgres://app:{body(6)}/{body(6)}@db.example.com/shop",
        lambda: "dop_v1_" + body(64, "0123456789abcdef"),
        lambda: "hf_" + body(34, string.ascii_letters),
        lambda: f"deploy with ghp_{body(36)} then notify the team",
        lambda: f"password={body(12)} and the rest of a long log line about the deployment",
    ]
    return [shapes[i % len(shapes)]() for i in range(n)]


def _deployment() -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "web", "image": "shop:1.4.2",
                                     "env": [{"name": f"VAR_{i}" if i % 4 else f"SECRET_{i}_TOKEN",
                                              "value": f"value-{i}"} for i in range(40)]}]},
            "headers": [{"key": "Authorization" if i == 0 else f"X-Header-{i}", "value": f"v{i}"}
                        for i in range(40)]}


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _cpu(fn: Any) -> float:
    """CPU seconds of this process (a busy machine moves them far less than wall time)."""
    start = time.process_time()
    fn()
    return time.process_time() - start


def _first_use() -> dict[str, float]:
    code = {"floor": "import re2",
            "redaction": "from fabric_jev.redaction import redact_text; "
                         "redact_text('password=x and dop_v1_' + '0' * 64)"}
    times: dict[str, list[float]] = {k: [] for k in code}
    for _ in range(5):
        for name, c in code.items():
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", c], check=True)
            times[name].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def bench_redaction(samples: int = 15) -> dict[str, object]:
    import re2

    from ..redaction.redactor import redact, redact_text

    absent = re2.compile("\x00never here\x00")
    paragraphs, lines, value = _paragraphs(), _secret_lines(), _deployment()
    ordinary_bytes = sum(len(p.encode()) for p in paragraphs)
    for text in paragraphs + lines:  # warm: rule files read, vendor patterns compiled
        redact_text(text)
    changed = sum(1 for p in paragraphs if redact_text(p) != (p, []))

    figures: dict[str, list[float]] = {"ordinary": [], "ordinary_floor": [], "secrets": [], "secrets_floor": [],
                                       "value": []}
    for _ in range(samples):
        figures["ordinary_floor"].append(_timed(lambda: [absent.search(p) for p in paragraphs]))
        figures["ordinary"].append(_timed(lambda: [redact_text(p) for p in paragraphs]))
        figures["secrets_floor"].append(_timed(lambda: [absent.search(t) for t in lines]))
        figures["secrets"].append(_timed(lambda: [redact_text(t) for t in lines]))
        figures["value"].append(_timed(lambda: redact(value)))

    hostile: dict[str, dict[str, float]] = {}
    for filler in HOSTILE_FILLERS:
        small = filler * (50_000 // len(filler))
        large = filler * (200_000 // len(filler))
        t_small = statistics.median(_cpu(lambda s=small: redact_text(s)) for _ in range(5))
        t_large = statistics.median(_cpu(lambda s=large: redact_text(s)) for _ in range(5))
        hostile[filler] = {"ms_50k": t_small * 1000, "ms_200k": t_large * 1000, "growth": t_large / t_small}

    def ratio(name: str) -> float:
        return statistics.median(a / b for a, b in zip(figures[name], figures[f"{name}_floor"], strict=True))

    return {
        "samples": samples,
        "ordinary": {"paragraphs": len(paragraphs), "bytes": ordinary_bytes,
                     "median_ms": statistics.median(figures["ordinary"]) * 1000,
                     "floor_ms": statistics.median(figures["ordinary_floor"]) * 1000,
                     "ratio_to_floor": ratio("ordinary"),
                     "mb_per_s": ordinary_bytes / statistics.median(figures["ordinary"]) / 1e6,
                     "false_positives": changed},
        "secrets": {"lines": len(lines), "median_us_per_line": statistics.median(figures["secrets"]) / len(lines) * 1e6,
                    "ratio_to_floor": ratio("secrets")},
        "value": {"median_us": statistics.median(figures["value"]) * 1e6},
        "hostile": hostile,
        "first_use_s": _first_use(),
    }


def print_redaction(r: dict[str, Any]) -> None:
    o, s = r["ordinary"], r["secrets"]
    print(f"redaction (median of {r['samples']}; floor: one RE2 search of the same text for a string it lacks)")
    print(f"  ordinary text: {o['paragraphs']} paragraphs of Python's language reference ({o['bytes'] / 1e6:.2f} MB)")
    print(f"    {o['median_ms']:8.1f} ms  ({o['mb_per_s']:.1f} MB/s)   floor {o['floor_ms']:.1f} ms   "
          f"ratio {o['ratio_to_floor']:.1f}")
    print(f"    false positives: {o['false_positives']} of {o['paragraphs']} paragraphs "
          f"({o['false_positives'] / o['paragraphs']:.2%})")
    print(f"  text holding secrets: {s['lines']} lines   {s['median_us_per_line']:.0f} µs a line   "
          f"ratio {s['ratio_to_floor']:.1f}")
    print(f"  a deployment's env entries and headers (JSON value): {r['value']['median_us']:.0f} µs")
    print("  hostile text (one filler repeated; CPU) 50 KB     200 KB   growth (4.0 = linear)")
    for filler, h in r["hostile"].items():
        print(f"    {filler!r:34} {h['ms_50k']:7.1f} ms {h['ms_200k']:8.1f} ms   {h['growth']:.1f}")
    f = r["first_use_s"]
    print(f"  first use in a fresh process: {f['redaction'] * 1000:.0f} ms   "
          f"(import re2 only: {f['floor'] * 1000:.0f} ms)")
