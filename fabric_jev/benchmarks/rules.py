"""`fabric-jev bench rules`: what permission rules add to one capability call's decision.

The policy gate's `triage` (rules, the floor, the default rules; no classifier, no person)
for four kinds of call, in three set-ups measured in the same run:

- ``floor``: no rules, default rules off (the floor alone, always on);
- ``defaults``: the default rules too (how fabric-jev ships);
- ``200 rules``: 200 rules of the config besides (allow, ask and deny, exact refs, ref
  patterns, commands, paths, browser methods).

The goal (issue 32): the 200 rules add ≤ 50 µs per call (``200 rules`` − ``defaults``).
A shell command is parsed once per distinct text (cached); the cost of parsing a new one
is measured on its own line.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("browser.cdp", "execute", {"method": "Runtime.evaluate", "sessionId": "S",
                                "params": {"expression": "document.title", "returnByValue": True}}),
    ("shell.exec", "execute", {"cmd": "pytest -q tests/"}),
    ("fs.read", "read", {"path": "src/app.py"}),
    ("kv.get", "read", {"key": "a"}),
]


def two_hundred_rules() -> list[dict[str, object]]:
    rules: list[dict[str, Any]] = []
    for i in range(200):
        kind = i % 8
        if kind == 0:
            rules.append({"allow": f'shell.exec(cmd: "tool{i} *")'})
        elif kind == 1:
            rules.append({"deny": f'shell.exec(cmd: "danger{i} *")'})
        elif kind == 2:
            rules.append({"deny": f'fs.write(path: "./generated{i}/**")'})
        elif kind == 3:
            rules.append({"allow": f'browser.cdp(method: "Domain{i}.method")'})
        elif kind == 4:
            rules.append({"ask": f'kv{i}.put(key: "k{i}*")'})
        elif kind == 5:
            rules.append({"allow": f'fs.read(path: "./data{i}/**")'})
        elif kind == 6:
            rules.append({"allow": f'svc{i}.*'})
        else:
            rules.append({"allow": f'browser.cdp(method: "Page.navigate", params.url: "https://site{i}.example/*")'})
    return rules


def _gate(rules: list[dict[str, Any]], defaults: bool) -> Any:
    from ..contract.config import HostConfig
    from ..host.gate import PolicyGate, host_rules

    config = HostConfig(rules=rules, default_rules=defaults, approvals={"execute": "ask", "read": "ask"})
    return PolicyGate(dict(config.approvals), approver=None, evaluator=None, threshold=0.5,
                      approver_timeout_s=1, classifier_timeout_s=1, max_request_bytes=131_072,
                      cwd="/work/project", home="/home/user", **host_rules(config))


def _interleaved_us(fns: dict[str, Any], rounds: int, per_round: int) -> dict[str, float]:
    """Median µs per call of each function, measured in interleaved rounds (a busy machine slows
    them alike, not one set-up more than another)."""
    for fn in fns.values():
        for _ in range(per_round):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(per_round):
                fn()
            times[name].append((time.perf_counter() - start) / per_round * 1e6)
    return {name: statistics.median(values) for name, values in times.items()}


def _python_calls(fn: Any, n: int = 100) -> float:
    import cProfile
    import pstats

    fn()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(n):
        fn()
    profile.disable()
    return float(pstats.Stats(profile).total_calls) / n  # type: ignore[attr-defined]


def bench_rules(samples: int = 15) -> dict[str, object]:
    setups = {"floor": _gate([], False), "defaults": _gate([], True),
              "200 rules": _gate(two_hundred_rules(), True)}
    out: dict[str, Any] = {"rules": 200, "calls": {}}
    for ref, risk, arguments in CALLS:
        row: dict[str, float] = _interleaved_us(
            {name: (lambda g=gate, c=(ref, risk, arguments): g.triage(*c)) for name, gate in setups.items()},
            samples, 500)
        row["added_by_rules"] = row["200 rules"] - row["defaults"]
        # Python function calls per decision: the same on a busy machine as on an idle one.
        for name in ("defaults", "200 rules"):
            row[f"calls {name}"] = _python_calls(lambda g=setups[name], c=(ref, risk, arguments): g.triage(*c))
        what = arguments.get("method") or arguments.get("cmd") or arguments.get("path") or ""
        out["calls"][f"{ref} {what}".strip()] = row
    from ..approval.shell import parse

    counter = iter(range(10**9))
    out["parse_new_command_us"] = _interleaved_us(
        {"parse": lambda: parse(f"pytest -q tests/test_{next(counter)}.py && git status")}, samples, 50)["parse"]
    return out


def print_rules(report: dict[str, Any]) -> None:
    print("rules: the policy gate's triage per capability call (median µs; same run)")
    print(f"  {'call':34} {'floor':>8} {'defaults':>9} {'200 rules':>10} {'added':>8}   python calls")
    for name, row in report["calls"].items():
        print(f"  {name:34} {row['floor']:8.1f} {row['defaults']:9.1f} {row['200 rules']:10.1f} "
              f"{row['added_by_rules']:8.1f}   {row['calls defaults']:.0f} → {row['calls 200 rules']:.0f}")
    print(f"  parsing a new shell command (tree-sitter bash): {report['parse_new_command_us']:.1f} µs")
