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


def two_hundred_rules() -> list[dict[str, Any]]:
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
    from ..host.policy import PolicyGate, host_rules

    config = HostConfig(rules=rules, default_rules=defaults, approvals={"execute": "ask", "read": "ask"})
    return PolicyGate(dict(config.approvals), approver=None, evaluator=None, threshold=0.5,
                      approver_timeout_s=1, classifier_timeout_s=1, max_request_bytes=131_072,
                      cwd="/work/project", home="/home/user", **host_rules(config))


def _median_us(fn: Any, rounds: int, per_round: int) -> float:
    for _ in range(per_round):
        fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(per_round):
            fn()
        times.append((time.perf_counter() - start) / per_round * 1e6)
    return statistics.median(times)


def bench_rules(samples: int = 7) -> dict[str, Any]:
    setups = {"floor": _gate([], False), "defaults": _gate([], True),
              "200 rules": _gate(two_hundred_rules(), True)}
    out: dict[str, Any] = {"calls": {}}
    for ref, risk, arguments in CALLS:
        row = {}
        for name, gate in setups.items():
            row[name] = _median_us(lambda g=gate, c=(ref, risk, arguments): g.triage(*c), samples, 2000)
        row["added_by_rules"] = row["200 rules"] - row["defaults"]
        what = arguments.get("method") or arguments.get("cmd") or arguments.get("path") or ""
        out["calls"][f"{ref} {what}".strip()] = row
    from ..approval.shell import parse

    counter = iter(range(10**9))
    out["parse_new_command_us"] = _median_us(
        lambda: parse(f"pytest -q tests/test_{next(counter)}.py && git status"), samples, 200)
    return out


def print_rules(report: dict[str, Any]) -> None:
    print("rules: the policy gate's triage per capability call (median µs; same run)")
    print(f"  {'call':34} {'floor':>8} {'defaults':>9} {'200 rules':>10} {'added':>8}")
    for name, row in report["calls"].items():
        print(f"  {name:34} {row['floor']:8.1f} {row['defaults']:9.1f} {row['200 rules']:10.1f} "
              f"{row['added_by_rules']:8.1f}")
    print(f"  parsing a new shell command (tree-sitter bash): {report['parse_new_command_us']:.1f} µs")
