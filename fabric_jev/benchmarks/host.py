"""Host benchmark: launch, guest→host round trip, paced pace — each next to a yardstick.

Yardsticks (`fabric_jev.benchmarks.yardsticks`), measured in the same run:

* the in-process floor: the same host, session and bridge with the guest's
  QuickJS context in the host process — no worker boundary;
* the bare echo: a real worker running the same program, answered by a bare
  blocking loop — the process boundary and the guest's work, no host logic.
"""

from __future__ import annotations

import time
from statistics import median as _median
from typing import Any

import anyio
import anyio.lowlevel

from ..contract.config import HostConfig
from ..host import CapabilityRegistry, JevHost
from ..sandbox.inprocess import InProcessWorkers
from .yardsticks import bare_echo_round_trip, in_process_launch

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


async def _floor_launch(samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        out.append(in_process_launch(TICK_CODE))
        await anyio.lowlevel.checkpoint()
    return out


# ---------------------------------------------------------------- through the host


async def _host_launch(samples: int) -> list[float]:
    ticks: list[float] = []
    registry = CapabilityRegistry()

    async def tick(args: Any, ctx: Any) -> None:
        ticks.append(time.perf_counter())

    registry.register("bench.tick", tick, "read")
    out = []
    async with JevHost(HostConfig(warm_workers=2), capabilities=registry) as host:
        await anyio.sleep(0.3)  # let the pool warm up
        for _ in range(samples):
            start = time.perf_counter()
            env = await host.spawn(_program(TICK_CODE, ["bench.tick"]), None)
            await host.wait(env.id)
            out.append((ticks[-1] - start) * 1000)
            await anyio.sleep(0.02)  # let the pool refill, as between real launches
    return out


async def _host_rtt(calls: int, *, floor: bool = False) -> float:
    # The floor: the same host, session and bridge with the guest context in-process.
    async with JevHost(workers=InProcessWorkers() if floor else None) as host:
        start = time.perf_counter()
        env = await host.run(_program(RTT_CODE), calls)
        elapsed = time.perf_counter() - start
        assert env.state.value == "completed", env.error
    return elapsed / calls * 1e6


async def _host_paced(n: int, spec: dict[str, int], *, floor: bool = False) -> list[float]:
    config = HostConfig(max_concurrent_runs=16, warm_workers=min(n, 16))
    async with JevHost(config, workers=InProcessWorkers() if floor else None) as host:
        await anyio.sleep(0.3)
        envs = [await host.spawn(_program(PACED_CODE), spec) for _ in range(n)]
        return [float((await host.wait(e.id)).result) for e in envs]


async def bench_host(samples: int = 50, rtt_calls: int = 2000, concurrent: int = 16) -> dict[str, object]:
    spec = {"ticks": 40, "sleepMs": 10, "work": 20}
    host_launch = await _host_launch(samples)
    floor_launch = await _floor_launch(samples)
    # Interleaved, so a change in the machine's load hits all three alike.
    host_rtt, floor_rtt, echo_rtt = [], [], []
    for _ in range(5):
        host_rtt.append(await _host_rtt(rtt_calls))
        floor_rtt.append(await _host_rtt(rtt_calls, floor=True))
        echo_rtt.append(await bare_echo_round_trip(RTT_CODE, rtt_calls, rtt_calls))
    solo = _median(await _host_paced(1, spec))
    many = await _host_paced(concurrent, spec)
    floor_solo = _median(await _host_paced(1, spec, floor=True))
    floor_many = await _host_paced(concurrent, spec, floor=True)
    rtt = _median(host_rtt)
    return {
        "launch_to_first_tick_ms": {"host": _median(host_launch), "floor": _median(floor_launch),
                                    "ratio": _median(host_launch) / _median(floor_launch),
                                    "samples": samples},
        "round_trip_us": {"host": rtt, "floor": _median(floor_rtt),
                          "ratio": rtt / _median(floor_rtt),
                          "bare_echo": _median(echo_rtt), "echo_ratio": rtt / _median(echo_rtt),
                          "calls": rtt_calls},
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
          f"ratio {la['ratio']:.2f} (median of {la['samples']}; goal <= 2.0)")
    print(f"  guest->host round trip {rt['host']:8.1f} us   floor {rt['floor']:7.1f} us "
          f"ratio {rt['ratio']:.2f} (goal <= 1.5)")
    print(f"                                     bare echo {rt['bare_echo']:7.1f} us "
          f"ratio {rt['echo_ratio']:.2f} (goal <= 1.3)")
    print("    (floor: the same host and bridge, guest in-process; bare echo: a real worker "
          "running the same program, answered by a bare blocking loop)")
    print(f"  {pp['runs']} paced runs keep    {pp['host_pace_ratio'] * 100:7.1f} % of solo pace "
          f"(worst {pp['host_worst_pace_ratio'] * 100:.1f} %; floor "
          f"{pp['floor_pace_ratio'] * 100:.1f} %; goal >= 80 %)")


# ---------------------------------------------------------------- event-loop lag

#: 12 KB of nested brackets: not JavaScript, so the launch goes through the TypeScript parser.
PATHOLOGICAL_CODE = "(" * 6000 + ")" * 6000
_TICK_S = 0.001


def _p99(xs: list[float]) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def bench_loop_lag(launches: int = 10) -> dict[str, object]:
    """How late a 1 ms timer fires on the host's loop: idle, then while pathological code is launched.

    The pathological launches are rejected (the code compiles neither as
    JavaScript nor as TypeScript); the figure says whether rejecting them
    holds up everything else the host is doing.
    """
    from ..errors import CompileError

    async def lags_while(work: Any) -> list[float]:
        lags: list[float] = []
        done = anyio.Event()

        async def ticker() -> None:
            while not done.is_set():
                start = time.perf_counter()
                await anyio.sleep(_TICK_S)
                lags.append((time.perf_counter() - start - _TICK_S) * 1000)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            await work()
            done.set()
        return lags

    async with JevHost(HostConfig(warm_workers=2)) as host:
        await anyio.sleep(0.3)  # let the pool warm up
        started = time.perf_counter()

        async def launch_all() -> None:
            for _ in range(launches):
                try:
                    await host.run(_program(PATHOLOGICAL_CODE), None)
                except CompileError:
                    continue
                raise RuntimeError("the pathological program was not rejected at launch")

        busy = await lags_while(launch_all)
        spent = time.perf_counter() - started
        idle = await lags_while(lambda: anyio.sleep(spent))
    return {"idle_p99_ms": _p99(idle), "pathological_p99_ms": _p99(busy), "launches": launches,
            "launch_ms": spent / launches * 1000, "code_bytes": len(PATHOLOGICAL_CODE)}


def _print_loop_lag(r: dict[str, Any]) -> None:
    print(f"  host loop lag (p99)    idle {r['idle_p99_ms']:7.2f} ms   while a pathological program is "
          f"launched {r['pathological_p99_ms']:7.2f} ms ({r['launches']} launches of {r['code_bytes']} "
          f"bytes, {r['launch_ms']:.0f} ms each)")
