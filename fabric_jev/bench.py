"""`fabric-jev bench`: medians and ratios, each next to a floor measured in the same run.

The floor for the host figures is a bare in-process QuickJS context driven
through the same prelude and outbox bridge by the same event loop, without
the worker-process boundary. Nothing here is a test: numbers are printed (and
recorded by hand in docs/performance.md), never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from .contract.config import HostConfig
from .host import CapabilityRegistry, JevHost
from .sandbox.js import runtime_js_path

TICK_CODE = "await tools.call({ref: 'bench.tick'}); return null;"
RTT_CODE = "for (let i = 0; i < input; i++) await program.emit(i); return null;"
PACED_CODE = """
let work = 0;
const started = Date.now();
for (let i = 0; i < input.ticks; i++) {
  for (let k = 0; k < input.work; k++) work += JSON.stringify({k, i}).length;
  await program.sleep(input.sleepMs);
}
return (Date.now() - started);
"""


def _program(code: str, requires: list[str] | None = None) -> dict[str, Any]:
    return {"name": "bench", "code": code, "inputSchema": {}, "outputSchema": {},
            "requires": requires or [], "limits": {"timeoutMs": 600_000, "maxToolCalls": 1_000_000}}


# ---------------------------------------------------------------- in-process floor


class _InProcess:
    """One QuickJS context in this process, driven like a worker but without one."""

    def __init__(self, code: str, value: Any) -> None:
        import _quickjs

        self.ctx = _quickjs.Context()
        self.bridge = self.ctx.eval(runtime_js_path("prelude.js").read_text(encoding="utf-8"))
        self.bridge("load", code, json.dumps(value), None)

    def step(self, op: str, a: Any = None, b: Any = None, c: Any = None) -> dict[str, Any]:
        self.ctx.set_time_limit(0.1)
        self.bridge(op, a, b, c)
        while self.ctx.execute_pending_job():
            pass
        self.ctx.set_time_limit(-1)
        out: dict[str, Any] = json.loads(self.bridge("drain", None, None, None))
        return out


async def _floor_launch(samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        start = time.perf_counter()
        guest = _InProcess(TICK_CODE, None)
        got = guest.step("go")
        assert got["c"], "the floor guest made no host call"
        out.append((time.perf_counter() - start) * 1000)
        await anyio.lowlevel.checkpoint()
    return out


async def _floor_rtt(calls: int) -> float:
    guest = _InProcess(RTT_CODE, calls)
    start = time.perf_counter()
    got = guest.step("go")
    while got["d"] is None:
        (call_id, _, _), = got["c"]
        await anyio.lowlevel.checkpoint()  # the host side yields to its loop once per call
        got = guest.step("settle", call_id, True, "null")
    return (time.perf_counter() - start) / calls * 1e6


async def _floor_paced(n: int, spec: dict[str, int]) -> list[float]:
    results: list[float] = []

    async def one() -> None:
        guest = _InProcess(PACED_CODE, spec)
        got = guest.step("go")
        while got["d"] is None:
            (call_id, _, ms), = got["c"]
            await anyio.sleep(ms / 1000)
            got = guest.step("settle", call_id, True, "null")
        results.append(float(got["d"][1]))

    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
    return results


class _InProcessConnection:
    """Speaks the worker frame protocol, but runs the guest in this process."""

    def __init__(self) -> None:
        self._inbox: list[tuple[bytes, bytes]] = []
        self._ready = anyio.Event()
        self._guest: _InProcess | None = None

    def _push(self, tag: bytes, payload: bytes) -> None:
        self._inbox.append((tag, payload))
        self._ready.set()

    def _slice(self, op: str, a: Any = None, b: Any = None, c: Any = None) -> None:
        assert self._guest is not None
        out = self._guest.step(op, a, b, c)
        self._push(b"O", json.dumps(out).encode())

    def send(self, tag: bytes, payload: bytes) -> None:
        if tag == b"L":
            load = json.loads(payload)
            self._guest = _InProcess(load["code"], json.loads(load["input"]))
            self._push(b"R", b"")
        elif tag == b"G":
            self._slice("go")
        elif tag == b"S":
            call_id, ok, text = payload.split(b" ", 2)
            self._slice("settle", int(call_id), ok == b"1", text.decode())

    async def receive(self) -> list[tuple[bytes, bytes]]:
        await self._ready.wait()
        self._ready = anyio.Event()
        frames, self._inbox = self._inbox, []
        return frames

    async def flusher(self) -> None:
        await anyio.sleep_forever()

    def close(self) -> None:
        self._guest = None


class _InProcessWorker:
    pid = 0

    def __init__(self) -> None:
        self.connection = _InProcessConnection()

    def kill(self) -> None:
        pass

    def close(self) -> None:
        self.connection.close()

    async def exit_code(self, timeout: float) -> int | None:
        return 0


class _InProcessHost(JevHost):
    """The same host and bridge with the guest context in-process: the floor."""

    async def _acquire_worker(self) -> Any:
        return _InProcessWorker()


# ---------------------------------------------------------------- through the host


async def _host_launch(samples: int) -> list[float]:
    ticks: list[float] = []
    registry = CapabilityRegistry()

    async def tick(args: Any, ctx: Any) -> None:
        ticks.append(time.perf_counter())

    registry.register("bench.tick", tick)
    out = []
    async with JevHost(HostConfig(warmWorkers=2), capabilities=registry) as host:
        await anyio.sleep(0.3)  # let the pool warm up
        for _ in range(samples):
            start = time.perf_counter()
            env = await host.spawn(_program(TICK_CODE, ["bench.tick"]), None)
            await host.wait(env.id)
            out.append((ticks[-1] - start) * 1000)
            await anyio.sleep(0.02)  # let the pool refill, as between real launches
    return out


async def _host_rtt(calls: int, host_class: type[JevHost] = JevHost) -> float:
    async with host_class() as host:
        start = time.perf_counter()
        env = await host.run(_program(RTT_CODE), calls)
        elapsed = time.perf_counter() - start
        assert env.state.value == "completed", env.error
    return elapsed / calls * 1e6


async def _host_paced(n: int, spec: dict[str, int]) -> list[float]:
    async with JevHost(HostConfig(maxConcurrentRuns=16, warmWorkers=min(n, 16))) as host:
        await anyio.sleep(0.3)
        envs = [await host.spawn(_program(PACED_CODE), spec) for _ in range(n)]
        return [float((await host.wait(e.id)).result) for e in envs]


def _process_echo_rtt(calls: int = 5000, work_us: float = 11.0) -> float:
    """A bare Python socketpair echo whose child works `work_us` (the guest's measured
    share) before answering: the least any process boundary costs on this machine."""
    import os
    import socket

    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        a.close()
        while True:
            data = b.recv(64)
            if not data:
                os._exit(0)
            end = time.perf_counter() + work_us / 1e6
            while time.perf_counter() < end:
                pass
            b.send(data)
    b.close()
    start = time.perf_counter()
    for _ in range(calls):
        a.send(b"x" * 32)
        a.recv(64)
    elapsed = time.perf_counter() - start
    a.close()
    os.waitpid(pid, 0)
    return elapsed / calls * 1e6


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


async def bench_host(samples: int = 50, rtt_calls: int = 2000, concurrent: int = 16) -> dict[str, Any]:
    spec = {"ticks": 40, "sleepMs": 10, "work": 20}
    host_launch = await _host_launch(samples)
    floor_launch = await _floor_launch(samples)
    host_rtt = [await _host_rtt(rtt_calls) for _ in range(5)]
    floor_rtt = [await _host_rtt(rtt_calls, _InProcessHost) for _ in range(5)]
    bare_rtt = [await _floor_rtt(rtt_calls) for _ in range(5)]
    echo_rtt = [_process_echo_rtt() for _ in range(3)]
    solo = _median(await _host_paced(1, spec))
    many = await _host_paced(concurrent, spec)
    floor_solo = _median(await _floor_paced(1, spec))
    floor_many = await _floor_paced(concurrent, spec)
    return {
        "launch_to_first_tick_ms": {"host": _median(host_launch), "floor": _median(floor_launch),
                                    "samples": samples},
        "round_trip_us": {"host": _median(host_rtt), "floor": _median(floor_rtt),
                          "ratio": _median(host_rtt) / _median(floor_rtt),
                          "bare_bridge": _median(bare_rtt),
                          "process_echo": _median(echo_rtt), "calls": rtt_calls},
        "paced_pace": {
            "runs": concurrent,
            "host_solo_ms": solo,
            "host_concurrent_median_ms": _median(many),
            "host_pace_ratio": solo / _median(many),
            "host_worst_pace_ratio": solo / max(many),
            "floor_solo_ms": floor_solo,
            "floor_concurrent_median_ms": _median(floor_many),
            "floor_pace_ratio": floor_solo / _median(floor_many),
        },
    }


def _print_host(r: dict[str, Any]) -> None:
    la, rt, pp = r["launch_to_first_tick_ms"], r["round_trip_us"], r["paced_pace"]
    print("host")
    print(f"  launch to first tick   {la['host']:8.2f} ms   floor {la['floor']:7.2f} ms "
          f"(median of {la['samples']}; goal <= 5 ms)")
    print(f"  guest->host round trip {rt['host']:8.1f} us   floor {rt['floor']:7.1f} us "
          f"ratio {rt['ratio']:.2f} (goal <= 2.0)")
    print(f"    (floor: the same host and bridge, guest in-process; the bridge alone, no host "
          f"driver: {rt['bare_bridge']:.1f} us; a bare two-process socket echo: "
          f"{rt['process_echo']:.1f} us)")
    print(f"  {pp['runs']} paced runs keep    {pp['host_pace_ratio'] * 100:7.1f} % of solo pace "
          f"(worst {pp['host_worst_pace_ratio'] * 100:.1f} %; floor "
          f"{pp['floor_pace_ratio'] * 100:.1f} %; goal >= 80 %)")


# ---------------------------------------------------------------- evaluators

_BENCH_FIXTURE = {"answers": {"refund": {"noul": 0.9},
                              "team": {"choice": "Billing"},
                              "anger": {"score": 1}}}
_BENCH_STATE = ("Hi, I was charged twice for my March invoice and the refund I was promised has not "
                "arrived. Please fix this today.")


def _bench_questions() -> dict[str, Any]:
    return {
        "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"},
        "team": {"type": "choice", "instructions": "Which team should handle this ticket?",
                 "criteria": {"Billing": "Payments, invoices, refunds", "Technical": "Bugs",
                              "Sales": "Pricing"}},
        "anger": {"type": "score", "instructions": "How frustrated is the customer?",
                  "criteria": ["Calm", "Frustrated", "Very angry"]},
    }


async def _serve_fixture() -> tuple[Any, str, Any]:
    import subprocess
    import tempfile

    tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)  # noqa: SIM115
    json.dump(_BENCH_FIXTURE, tmp)
    tmp.close()
    proc = subprocess.Popen([sys.executable, "-m", "fabric_jev.cli", "serve", "--port", "0",
                             "--evaluator", f"fixture:{tmp.name}"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    return proc, url, tmp.name


class _OursClient:
    def __init__(self, url: str) -> None:
        from .contract.evaluation import validate_request
        from .evaluators.credentials import AuthStore, CredentialResolver
        from .evaluators.http import HttpEvaluator
        from .evaluators.routes import TYPESAFE

        environ = {"TYPESAFE_API_KEY": "bench-key"}
        self.ev = HttpEvaluator(TYPESAFE, base_urls={"typesafe": url}, environ=environ,
                                credentials=CredentialResolver(
                                    TYPESAFE, store=AuthStore(Path("/nonexistent/a")), environ=environ))
        self.request = validate_request({"state": _BENCH_STATE, "questions": _bench_questions()})

    async def once(self) -> None:
        await self.ev.evaluate(self.request, timeout=30)

    async def aclose(self) -> None:
        await self.ev.aclose()


class _SdkClient:
    def __init__(self, url: str) -> None:
        from typesafe_sdk import AsyncTypeSafeClient, Choice, Noul, Score

        q = _bench_questions()
        self.questions: dict[str, Any] = {
            "refund": Noul(instructions=q["refund"]["instructions"]),
            "team": Choice(instructions=q["team"]["instructions"], criteria=q["team"]["criteria"]),
            "anger": Score(instructions=q["anger"]["instructions"], criteria=q["anger"]["criteria"]),
        }
        self.client = AsyncTypeSafeClient(api_key="bench-key", base_url=url)

    async def once(self) -> None:
        await self.client.system_one(state=_BENCH_STATE, questions=self.questions, model="jev-latest")

    async def aclose(self) -> None:
        await self.client.aclose()


async def _block(client: Any, n: int) -> tuple[list[float], float]:
    """n requests: per-request wall times (ms) and this process's CPU per request (ms)."""
    walls = []
    cpu = time.process_time()
    for _ in range(n):
        start = time.perf_counter()
        await client.once()
        walls.append((time.perf_counter() - start) * 1000)
    return walls, (time.process_time() - cpu) / n * 1000


async def _compare_clients(url: str, n: int, rounds: int = 6) -> dict[str, Any]:
    clients: dict[str, Any] = {"fabric_jev": _OursClient(url)}
    with contextlib.suppress(ImportError):  # the peer lives in the `bench` extra
        clients["typesafe_sdk"] = _SdkClient(url)
    walls: dict[str, list[float]] = {k: [] for k in clients}
    cpus: dict[str, list[float]] = {k: [] for k in clients}
    try:
        for client in clients.values():
            await _block(client, 20)  # warm-up: connections, first-call imports
        for _ in range(rounds):  # alternate blocks so drift hits both alike
            for name, client in clients.items():
                w, c = await _block(client, n)
                walls[name] += w
                cpus[name].append(c)
    finally:
        for client in clients.values():
            await client.aclose()
    out: dict[str, Any] = {"requests": n * rounds,
                           "server": "fabric-jev serve (fixture, HTTP/1.1 keep-alive) on 127.0.0.1"}
    for name in clients:
        out[name] = _median(walls[name])
        out[name + "_cpu"] = _median(cpus[name])
    if "typesafe_sdk" in clients:
        out["ratio"] = out["fabric_jev"] / out["typesafe_sdk"]
        out["cpu_ratio"] = out["fabric_jev_cpu"] / out["typesafe_sdk_cpu"]
    return out


async def _local_latency(questions: int, samples: int) -> list[float]:
    from .contract.evaluation import validate_request
    from .evaluators.local import LocalEvaluator

    ev = LocalEvaluator()
    all_q = _bench_questions()
    extra = {f"q{i}": {"type": "noul", "instructions": f"Does the customer mention item {i}?"}
             for i in range(5)}
    chosen = dict(list({**all_q, **extra}.items())[:questions])
    await ev.evaluate(validate_request({"state": "warm up", "questions": chosen}), timeout=60)
    out = []
    for i in range(samples):
        # A new state each time: its embeddings are never cached, as in real use.
        request = validate_request({"state": f"{_BENCH_STATE} Ticket number {i * 7919}.",
                                    "questions": chosen})
        start = time.perf_counter()
        await ev.evaluate(request, timeout=60)
        out.append((time.perf_counter() - start) * 1000)
    return out


async def bench_evaluators(requests: int = 100, samples: int = 30) -> dict[str, Any]:
    proc, url, fixture = await _serve_fixture()
    try:
        clients = await _compare_clients(url, requests)
    finally:
        proc.terminate()
        proc.wait(10)
        Path(fixture).unlink(missing_ok=True)
    return {
        "route_client_ms": clients,
        "local_ms": {"one_question": _median(await _local_latency(1, samples)),
                     "five_questions": _median(await _local_latency(5, samples)),
                     "samples": samples},
    }


def _print_evaluators(r: dict[str, Any]) -> None:
    rc, lo = r["route_client_ms"], r["local_ms"]
    print("evaluators")
    if "typesafe_sdk" in rc:
        print(f"  route client per request {rc['fabric_jev']:7.2f} ms   typesafe-sdk "
              f"{rc['typesafe_sdk']:6.2f} ms   ratio {rc['ratio']:.2f} (goal <= 1.0)")
        print(f"    client CPU per request {rc['fabric_jev_cpu']:7.2f} ms   typesafe-sdk "
              f"{rc['typesafe_sdk_cpu']:6.2f} ms   ratio {rc['cpu_ratio']:.2f} "
              f"({rc['requests']} requests each, alternating blocks)")
    else:
        print(f"  route client per request {rc['fabric_jev']:7.2f} ms   (typesafe-sdk not installed: "
              "pip install -e '.[bench]')")
    print(f"  local evaluator           {lo['one_question']:7.1f} ms for 1 question, "
          f"{lo['five_questions']:.1f} ms for 5 (median of {lo['samples']}; goal <= 150 ms for 1)")


# ---------------------------------------------------------------- browser


def _big_page(n: int) -> str:
    rows = "".join(
        f"<li><button data-testid='b{i}'>Action {i}</button><a href='#l{i}'>Link {i}</a>"
        f"<input aria-label='Field {i}' value='v{i}'><label><input type=checkbox> Box {i}</label></li>"
        for i in range(n // 4))
    return f"<!doctype html><title>big</title><main><ul>{rows}</ul></main>"


async def _ours_browser(ws_url: str, rounds: int, concurrent_calls: int) -> dict[str, Any]:
    from fabric_jev_browser import CDPConnection, Page

    cdp = await CDPConnection.connect(ws_url)
    page = await Page.open(cdp)
    try:
        for _ in range(50):
            await page.evaluate("1+1")
        rtt = []
        for _ in range(rounds):
            start = time.perf_counter()
            await page.evaluate("1+1")
            rtt.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(16):
                async def worker() -> None:
                    for _ in range(concurrent_calls // 16):
                        await page.evaluate("1+1")
                tg.start_soon(worker)
        throughput = concurrent_calls / (time.perf_counter() - start)
        # Snapshot of a 2,000-element page, occlusion checked for what is in the viewport.
        await page.navigate("data:text/html," + _big_page(2000).replace("#", "%23"))
        snaps = []
        count = 0
        for _ in range(max(5, rounds // 40)):
            start = time.perf_counter()
            snap = await page.snapshot()
            snaps.append((time.perf_counter() - start) * 1000)
            count = snap["element_count"]
    finally:
        await page.close()
        await cdp.aclose()
    return {"rtt_ms": _median(rtt), "throughput_per_s": throughput, "snapshot_ms": _median(snaps),
            "snapshot_elements": count}


async def _playwright_browser(ws_url: str, rounds: int, concurrent_calls: int) -> dict[str, Any] | None:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        return None
    async with async_playwright() as pw:
        browser = await pw.chromium.connect_over_cdp(ws_url)
        context = browser.contexts[0] if browser.contexts else await browser.new_context()
        page = await context.new_page()
        try:
            for _ in range(50):
                await page.evaluate("1+1")
            rtt = []
            for _ in range(rounds):
                start = time.perf_counter()
                await page.evaluate("1+1")
                rtt.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            import asyncio

            async def worker() -> None:
                for _ in range(concurrent_calls // 16):
                    await page.evaluate("1+1")

            await asyncio.gather(*(worker() for _ in range(16)))
            throughput = concurrent_calls / (time.perf_counter() - start)
        finally:
            await page.close()
            await browser.close()
    return {"rtt_ms": _median(rtt), "throughput_per_s": throughput}


async def bench_browser(rounds: int = 400, concurrent_calls: int = 1600) -> dict[str, Any]:
    from fabric_jev_browser import launch_chromium

    browser = await launch_chromium()
    try:
        ours = await _ours_browser(browser.ws_url, rounds, concurrent_calls)
        peer = await _playwright_browser(browser.ws_url, rounds, concurrent_calls)
        ours_again = await _ours_browser(browser.ws_url, rounds, concurrent_calls)
    finally:
        await browser.aclose()
    ours["rtt_ms"] = (ours["rtt_ms"] + ours_again["rtt_ms"]) / 2
    ours["throughput_per_s"] = (ours["throughput_per_s"] + ours_again["throughput_per_s"]) / 2
    report: dict[str, Any] = {"fabric_jev": ours, "rounds": rounds, "concurrent_calls": concurrent_calls}
    if peer is not None:
        report["playwright"] = peer
        report["rtt_ratio"] = ours["rtt_ms"] / peer["rtt_ms"]
        report["throughput_ratio"] = peer["throughput_per_s"] / ours["throughput_per_s"]
    return report


def _print_browser(r: dict[str, Any]) -> None:
    ours = r["fabric_jev"]
    print("browser")
    if "playwright" in r:
        pw = r["playwright"]
        print(f"  Runtime.evaluate('1+1')  {ours['rtt_ms']:6.2f} ms   Playwright {pw['rtt_ms']:6.2f} ms"
              f"   ratio {r['rtt_ratio']:.2f} (goal <= 0.5)")
        print(f"  16 concurrent callers    {ours['throughput_per_s']:6.0f}/s   Playwright "
              f"{pw['throughput_per_s']:6.0f}/s   time ratio {r['throughput_ratio']:.2f} (goal <= 0.5)")
    else:
        print(f"  Runtime.evaluate('1+1')  {ours['rtt_ms']:6.2f} ms   (Playwright not installed: "
              "pip install -e '.[bench]')")
    print(f"  snapshot, {ours['snapshot_elements']} elements  {ours['snapshot_ms']:6.1f} ms "
          "round trip (goal <= 150 ms)")


SUITES = ("host", "evaluators", "browser")


async def _run(args: argparse.Namespace) -> int:
    suites = SUITES if args.suite == "all" else (args.suite,)
    report: dict[str, Any] = {}
    for suite in suites:
        if suite == "host":
            report["host"] = await bench_host(samples=args.samples)
            if not args.json:
                _print_host(report["host"])
        elif suite == "browser":
            report["browser"] = await bench_browser()
            if not args.json:
                _print_browser(report["browser"])
        elif suite == "evaluators":
            report["evaluators"] = await bench_evaluators(samples=min(args.samples, 30))
            if not args.json:
                _print_evaluators(report["evaluators"])
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 0


def add_bench_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser("bench", help="measure speed next to floors and peers")
    bench.add_argument("suite", nargs="?", default="all", choices=(*SUITES, "all"))
    bench.add_argument("--samples", type=int, default=50)
    bench.add_argument("--json", action="store_true", help="print the raw report as JSON")
    bench.set_defaults(handler=_run)
