"""Host benchmark: launch, guest→host round trip, paced pace — each next to a floor.

The floor for the host figures is a bare in-process QuickJS context driven
through the same prelude and outbox bridge by the same event loop, without
the worker-process boundary.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import anyio.lowlevel

from ..contract.config import HostConfig
from ..host import CapabilityRegistry, JevHost
from ..sandbox.js import runtime_js_path
from .common import median as _median

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

    registry.register("bench.tick", tick, "read")
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
