"""Soak benchmark: 1,000 mixed runs through one host, and what the process holds before and after.

The runs cycle through every way a run ends: completed (plain, with an
evaluation, with a capability call, and with the browser connector when it is
installed), failed (a guest exception, an evaluation budget), timed out (the
deadline, the deadline during an evaluation that gets no answer, and a
synchronous loop the worker is killed for) and cancelled by `stop` (asleep,
during an evaluation that gets no answer, inside a capability call, holding a
browser connection).
Four run at a time, as the host allows by default. Evaluations go through the
TypeSafe route client to `fabric-jev serve` (a fixture) over a kept-alive
connection, so the client's connections are part of what is measured; the
ones that get no answer go through a second route client to a server that
reads requests and never answers, so a request abandoned in flight is too.

Measured once warm (after a first round of the same mix, so imports, caches
and pools are in place) and again after the 1,000 runs, both when the worker
pool has settled: open file descriptors, OS threads, child processes (our
workers and anything else but the browser), zombies and RSS. Then the host is
closed and the browser stopped: no worker, zombie or browser process may be
left, and the process holds the descriptors it held before the host opened.
The goal is flat figures, RSS within 10 %.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio

from ..contract.config import HostConfig
from ..contract.evaluation import Evaluation, EvaluationRequest
from ..evaluators.base import Evaluator, EvaluatorStatus
from ..host import CapabilityRegistry, JevHost
from .evaluators import _serve_fixture

_QUESTION = "{state: input, questions: {refund: {type: 'noul', instructions: 'Is a refund asked for?'}}}"
#: The state of an evaluation that goes to the server that never answers.
_UNANSWERED = "hold: never answered"
_NO_ANSWER = f"{{state: {_UNANSWERED!r}, questions: {{q: {{type: 'noul', instructions: 'Ever?'}}}}}}"
#: A server that reads every request and never answers (a child process, its own descriptors apart).
_SILENT_SERVER = """
import selectors, socket
sel = selectors.DefaultSelector()
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(256)
sel.register(srv, selectors.EVENT_READ)
print(f"http://127.0.0.1:{srv.getsockname()[1]}", flush=True)
while True:
    for key, _ in sel.select():
        if key.fileobj is srv:
            conn, _ = srv.accept()
            sel.register(conn, selectors.EVENT_READ)
            continue
        try:
            data = key.fileobj.recv(65536)
        except OSError:
            data = b""
        if not data:
            sel.unregister(key.fileobj)
            key.fileobj.close()
"""


def _program(name: str, code: str, requires: tuple[str, ...] = (), **limits: int) -> dict[str, Any]:
    program: dict[str, Any] = {"name": name, "code": code, "inputSchema": {}, "outputSchema": {},
                               "requires": list(requires)}
    if limits:
        program["limits"] = limits
    return program


#: (kind, program, input, how it is ended, the state it must end in)
_KINDS: list[tuple[str, dict[str, Any], Any, str, str]] = [
    ("plain", _program("plain", "let s = 0; for (let i = 0; i < 2000; i++) s += i; "
                                "await program.emit(s); return s"), None, "wait", "completed"),
    ("evaluation", _program("evaluation", f"const a = await jev.evaluate({_QUESTION}); return a.answers.refund.noul",
                            ("jev.evaluate",)), "the invoice was charged twice", "wait", "completed"),
    ("capability", _program("capability", "return await tools.call({ref: 'soak.echo', args: {n: input}})",
                            ("soak.echo",)), 7, "wait", "completed"),
    ("exception", _program("exception", "throw new Error('soak: a failing program')"), None, "wait", "failed"),
    ("budget", _program("budget", f"await jev.evaluate({_QUESTION}); await jev.evaluate({_QUESTION}); return 1",
                        ("jev.evaluate",), maxEvaluations=1), "x", "wait", "failed"),
    ("deadline", _program("deadline", "for (;;) await program.sleep(20)", timeoutMs=100), None, "wait",
     "timed_out"),
    ("deadline in an evaluation", _program("unanswered", f"await jev.evaluate({_NO_ANSWER}); return 1",
                                           ("jev.evaluate",), timeoutMs=150), None, "wait", "timed_out"),
    ("killed", _program("killed", "for (;;) {}"), None, "wait", "timed_out"),
    ("stopped asleep", _program("asleep", "await program.emit('ready'); await program.sleep(60000); return 1"),
     None, "stop", "cancelled"),
    ("stopped in an evaluation", _program("in-an-evaluation", "await program.emit('ready'); "
                                                              f"await jev.evaluate({_NO_ANSWER}); return 1",
                                          ("jev.evaluate",)), None, "stop", "cancelled"),
    ("stopped in a call", _program("in-a-call", "await program.emit('ready'); "
                                                "return await tools.call({ref: 'soak.hang'})", ("soak.hang",)),
     None, "stop", "cancelled"),
]
_BROWSER_KINDS: list[tuple[str, dict[str, Any], Any, str, str]] = [
    ("browser", _program("browser", "await tools.call({ref: 'browser.connect'}); const v = await tools.call("
                                    "{ref: 'browser.cdp', args: {method: 'Browser.getVersion'}}); "
                                    "return v.product.length > 0", ("browser.connect", "browser.cdp")),
     None, "wait", "completed"),
    ("stopped with a browser", _program("browser-held", "await tools.call({ref: 'browser.connect'}); "
                                                        "await program.emit('ready'); await program.sleep(60000)",
                                        ("browser.connect",)), None, "stop", "cancelled"),
]


# ---------------------------------------------------------------- what the process holds


def _processes() -> dict[int, tuple[int, str]]:
    """pid → (parent pid, state letter) for every process we can see."""
    table: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(entry)] = (int(fields[1]), fields[0])
    return table


def _descendants(root: int, table: dict[int, tuple[int, str]]) -> set[int]:
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, (ppid, _) in table.items() if ppid in frontier} - found
        found |= frontier
    return found


def _status_field(name: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return 0


def _tree(roots: set[int], table: dict[int, tuple[int, str]]) -> set[int]:
    found = set(roots)
    for root in roots:
        found |= _descendants(root, table)
    return found


def _snapshot(browser_pid: int | None, apart: set[int]) -> dict[str, int]:
    """Our own resources. `children` are the host's processes (its workers): not the browser, and not
    the processes in `apart` or theirs (serve, and whatever this process ran before the soak)."""
    table = _processes()
    browser = _tree({browser_pid}, table) if browser_pid else set()
    others = _tree(apart, table)
    ours = _descendants(os.getpid(), table) - browser - others
    return {"fds": len(os.listdir("/proc/self/fd")), "threads": _status_field("Threads"),
            "children": sum(1 for pid in ours if table[pid][1] != "Z"),
            "zombies": sum(1 for pid in ours | browser if pid in table and table[pid][1] == "Z"),
            "browser_processes": len(browser), "rss_kib": _status_field("VmRSS")}


async def _settled(browser_pid: int | None, apart: set[int], timeout: float = 10.0) -> dict[str, int]:
    """A snapshot once the child processes stop changing (the pool refills at its own pace)."""
    deadline = time.monotonic() + timeout
    last = _snapshot(browser_pid, apart)
    steady = 0
    while steady < 5 and time.monotonic() < deadline:
        await anyio.sleep(0.1)  # a benchmark helper: polling the process table is fine here
        now = _snapshot(browser_pid, apart)
        steady = steady + 1 if now["children"] == last["children"] else 0
        last = now
    return last


async def _left_of(tree: set[int], timeout: float = 10.0) -> int:
    """How many of `tree` still exist once given `timeout` to go (killed helpers are reaped by init)."""
    deadline = time.monotonic() + timeout
    while True:
        table = _processes()
        left = sum(1 for pid in tree if pid in table)
        if not left or time.monotonic() >= deadline:
            return left
        await anyio.sleep(0.1)


# ---------------------------------------------------------------- the runs


async def _one(host: JevHost, kind: tuple[str, dict[str, Any], Any, str, str]) -> tuple[str, str]:
    name, program, value, end, _ = kind
    envelope = await host.spawn(program, value)
    if end == "stop":
        await host.progress(envelope.id, 0)  # its 'ready' event: the run is inside the wait
        envelope = await host.stop(envelope.id)
    else:
        envelope = await host.wait(envelope.id)
    return name, envelope.state.value


async def _mix(host: JevHost, kinds: list[tuple[str, dict[str, Any], Any, str, str]], runs: int,
               at_once: int) -> tuple[Counter[str], list[str]]:
    states: Counter[str] = Counter()
    unexpected: list[str] = []
    expected = {k[0]: k[4] for k in kinds}
    slots = anyio.Semaphore(at_once)

    async def one(i: int) -> None:
        try:
            name, state = await _one(host, kinds[i % len(kinds)])
        finally:
            slots.release()
        states[state] += 1
        if state != expected[name]:
            unexpected.append(f"{name} ended {state}")

    async with anyio.create_task_group() as tg:
        for i in range(runs):
            await slots.acquire()  # launch as slots free up: never over the host's run limit
            tg.start_soon(one, i)
    return states, unexpected


def _start_browser() -> tuple[subprocess.Popen[str], str] | None:
    """`fabric-jev browser launch` (the browser connector), or None when it is not installed."""
    from ..plugins import declared_connectors

    if "browser" not in declared_connectors():
        return None
    proc = subprocess.Popen([sys.executable, "-m", "fabric_jev.cli", "browser", "launch"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("ws://"):
        proc.kill()
        proc.wait(10)
        return None
    return proc, url


def _route_to(url: str) -> Evaluator:
    """The TypeSafe route client pointed at `url`: evaluations cross a real keep-alive connection."""
    from ..evaluators.credentials import AuthStore, CredentialResolver
    from ..evaluators.http import HttpEvaluator
    from ..evaluators.routes import TYPESAFE

    environ = {"TYPESAFE_API_KEY": "soak-key"}
    return HttpEvaluator(TYPESAFE, base_urls={"typesafe": url}, environ=environ,
                         credentials=CredentialResolver(TYPESAFE, store=AuthStore(Path("/nonexistent/a")),
                                                        environ=environ))


class _Routed:
    """Two real route clients as one evaluator: requests whose state is _UNANSWERED go to the
    server that never answers, the rest to serve (the harness's switch, not an evaluator to test)."""

    def __init__(self, answered: Evaluator, unanswered: Evaluator) -> None:
        self.answered, self.unanswered = answered, unanswered

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        target = self.unanswered if request.state == _UNANSWERED else self.answered
        return await target.evaluate(request, timeout=timeout)

    def status(self) -> EvaluatorStatus:
        return self.answered.status()

    async def aclose(self) -> None:
        await self.answered.aclose()
        await self.unanswered.aclose()


def _start_silent() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", _SILENT_SERVER], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


async def bench_soak(runs: int = 1000, warmup: int = 100) -> dict[str, object]:
    registry = CapabilityRegistry()

    async def echo(args: Any, ctx: Any) -> Any:
        return args

    async def hang(args: Any, ctx: Any) -> Any:
        await anyio.sleep_forever()

    registry.register("soak.echo", echo, "read")
    registry.register("soak.hang", hang, "read")
    before = _descendants(os.getpid(), _processes())  # a test session's own processes, for one
    serve, serve_url, fixture = await _serve_fixture()
    silent, silent_url = _start_silent()
    evaluator = _Routed(_route_to(serve_url), _route_to(silent_url))
    browser = _start_browser()
    kinds = list(_KINDS)
    settings: dict[str, Any] = {"approvals": {"read": "allow", "execute": "allow"}}
    if browser is not None:
        kinds += _BROWSER_KINDS
        settings["connectors"] = {"browser": {"wsUrl": browser[1],
                                              "allowedMethods": ["Browser.getVersion"]}}
    browser_pid = browser[0].pid if browser is not None else None
    apart = before | {serve.pid, silent.pid}
    config = HostConfig.model_validate(settings)
    fds_before = len(os.listdir("/proc/self/fd"))
    fds_after = -1
    try:
        async with JevHost(config, evaluator=evaluator, capabilities=registry) as host:
            await _mix(host, kinds, warmup, config.max_concurrent_runs)
            start = await _settled(browser_pid, apart)
            began = time.perf_counter()
            states, unexpected = await _mix(host, kinds, runs, config.max_concurrent_runs)
            wall = time.perf_counter() - began
            end = await _settled(browser_pid, apart)
        closed = await _settled(browser_pid, apart)
        await evaluator.aclose()
        fds_after = len(os.listdir("/proc/self/fd"))
    finally:
        await evaluator.aclose()  # twice after a success: closing is idempotent
        _stop(serve)
        _stop(silent)
        Path(fixture).unlink(missing_ok=True)
        browser_left = 0
        if browser is not None:
            tree = _descendants(browser[0].pid, _processes()) | {browser[0].pid}
            browser[0].terminate()
            browser[0].wait(30)
            if browser[0].stdout is not None:
                browser[0].stdout.close()
            browser_left = await _left_of(tree)
    return {"runs": runs, "warmup": warmup, "kinds": [k[0] for k in kinds], "wall_s": wall,
            "states": dict(states), "unexpected": unexpected[:10], "unexpected_count": len(unexpected),
            "browser": browser is not None, "start": start, "end": end,
            "rss_growth": end["rss_kib"] / start["rss_kib"] - 1,
            "after_close": {"children": closed["children"], "zombies": closed["zombies"],
                            "browser_processes_left": browser_left},
            # Descriptors with the host and its evaluator closed, against before the host opened.
            "fds_before_host": fds_before, "fds_after_close": fds_after}


def print_soak(r: dict[str, Any]) -> None:
    s, e, c = r["start"], r["end"], r["after_close"]
    print("soak")
    print(f"  {r['runs']} runs in {r['wall_s']:.1f} s after {r['warmup']} to warm up, 4 at a time; kinds: "
          f"{', '.join(r['kinds'])}")
    print(f"  states {', '.join(f'{k} {v}' for k, v in sorted(r['states'].items()))}; "
          f"{r['unexpected_count']} not as expected{': ' + '; '.join(r['unexpected']) if r['unexpected'] else ''}")
    for key, label in (("fds", "open fds"), ("threads", "threads"), ("children", "child processes"),
                       ("zombies", "zombies"), ("browser_processes", "browser processes")):
        flat = "flat" if e[key] == s[key] else f"{e[key] - s[key]:+d}"
        print(f"  {label:18} {s[key]:6d} -> {e[key]:6d}   {flat} (goal flat)")
    print(f"  {'RSS':18} {s['rss_kib'] / 1024:6.1f} -> {e['rss_kib'] / 1024:6.1f} MiB   "
          f"{r['rss_growth']:+.1%} (goal within 10 %)")
    print(f"  after close: {c['children']} child processes, {c['zombies']} zombies, "
          f"{c['browser_processes_left']} browser processes left (goal 0 each); open fds "
          f"{r['fds_before_host']} before the host -> {r['fds_after_close']} after (goal equal)"
          + ("" if r["browser"] else "; browser connector not installed, browser runs skipped"))
