"""`fabric-jev bench cli`: the everyday path against its floors, each measured in the same run.

Three paths, each paired with its floor sample by sample, so a machine whose
load moves mid-run moves both sides of every ratio alike:

* whole commands: `fabric-jev run` of a trivial program (the JSON artifact,
  and the same program as a `.ts` file) and `fabric-jev --help`, each timed
  right after a bare QuickJS process (`python -c "import quickjs;
  quickjs.Context().eval('1')"`, the least any command that runs a program
  can cost); `import fabric_jev` and `import fabric_jev.contract.envelope`
  beside them;
* `fabric-jev serve` (a fixture evaluator) answering one keep-alive
  connection, in alternating blocks with a bare uvicorn app and a bare
  asyncio socket server that answer the very bytes serve answered;
* launch to first tick: `JevHost.spawn` until the guest's first host call,
  alternating with the in-process floor (a QuickJS context in this process,
  loaded and run to its first call).

Every ratio is the median of the per-pair (per-round) ratios; CPU time (the
command and the children it waited for) is printed next to wall time, and the
machine's load average beside each part.
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

GOALS = {"run": 5.0, "run_ts": 5.5, "help": 3.0, "serve": 1.2, "launch": 2.0}
IMPORT_GOALS_S = {"import": 0.15, "import_envelope": 0.25}
FLOOR = "import quickjs; quickjs.Context().eval('1')"
TRIVIAL = {"name": "trivial", "code": "return 1", "inputSchema": {}, "outputSchema": {"type": "integer"}}
TRIVIAL_TS = ('/* @program\n{"name": "trivial", "inputSchema": {}, "outputSchema": {"type": "integer"}}\n*/\n'
              "const one: number = 1;\nreturn one;\n")


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


def _timed(argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (the command and the children it waited for)."""
    cpu = _cpu_of_children()
    start = time.perf_counter()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, check=False, env=env or _environment(), cwd=cwd)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"benchmark command failed (exit {done.returncode}): {' '.join(argv)}")
    return took, _cpu_of_children() - cpu


def _load() -> list[float]:
    return list(os.getloadavg())


# ---------------------------------------------------------------- whole commands


def bench_commands(samples: int = 15) -> dict[str, object]:
    """Each sample: the floor, `run` of the JSON program; the floor, `run` of the `.ts` file; the
    floor, `--help`; the two imports. Ratios per pair; the commands run from an empty folder with a fresh
    FABRIC_JEV_HOME (no settings of the user's; the warm-up leaves the verdict cache filled, as a
    second run of the same program finds it)."""
    cli = _command()
    with tempfile.TemporaryDirectory(prefix="fabric-jev-bench-") as tmp:
        program = Path(tmp, "trivial.json")
        program.write_text(json.dumps(TRIVIAL), encoding="utf-8")
        typescript = Path(tmp, "trivial.ts")
        typescript.write_text(TRIVIAL_TS, encoding="utf-8")
        env = {**_environment(), "FABRIC_JEV_HOME": str(Path(tmp, "home"))}
        floor = [sys.executable, "-c", FLOOR]
        commands = {
            "run": [*cli, "run", str(program), "--evaluator", "local"],
            "run_ts": [*cli, "run", str(typescript), "--evaluator", "local"],
            "help": [*cli, "--help"],
            "import": [sys.executable, "-c", "import fabric_jev"],
            "import_envelope": [sys.executable, "-c", "import fabric_jev.contract.envelope"],
        }
        for argv in (floor, *commands.values()):  # page cache, compiled bytecode, the verdict cache
            _timed(argv, env=env, cwd=tmp)
        wall: dict[str, list[float]] = {name: [] for name in ("floor", *commands)}
        cpu: dict[str, list[float]] = {name: [] for name in wall}
        ratios: dict[str, list[float]] = {"run": [], "run_ts": [], "help": []}
        cpu_ratios: dict[str, list[float]] = {name: [] for name in ratios}
        load = [_load()]
        for _ in range(samples):
            for name, argv in commands.items():
                if name in ratios:
                    floor_wall, floor_cpu = _timed(floor, env=env, cwd=tmp)
                    wall["floor"].append(floor_wall)
                    cpu["floor"].append(floor_cpu)
                took, used = _timed(argv, env=env, cwd=tmp)
                wall[name].append(took)
                cpu[name].append(used)
                if name in ratios:
                    ratios[name].append(took / floor_wall)
                    cpu_ratios[name].append(used / floor_cpu)
        load.append(_load())
    median = statistics.median
    return {"samples": samples, "command": " ".join(cli), "load": load,
            "median_s": {name: median(t) for name, t in wall.items()},
            "median_cpu_s": {name: median(t) for name, t in cpu.items()},
            "ratio": {name: median(r) for name, r in ratios.items()},
            "cpu_ratio": {name: median(r) for name, r in cpu_ratios.items()}}


# ---------------------------------------------------------------- serve


async def bench_serve(per_block: int = 30, rounds: int = 20) -> dict[str, object]:
    """`fabric-jev serve` (fixture, no access log) against a bare uvicorn app and a bare socket
    server answering the same bytes, on one kept-alive connection per client and server: a bare
    blocking socket (the least client time, so the servers' own difference shows) and our route
    client (what a user waits for). Alternating blocks; a ratio is the median over the rounds of
    serve's block median over the yardstick's, through the same client."""
    from .evaluators import _block, _OursClient, _RawClient, _serve_fixture, _wire_request

    proc, url, fixture = await _serve_fixture()
    request = _wire_request()
    yardsticks: dict[str, subprocess.Popen[str]] = {}
    clients: dict[tuple[str, str], Any] = {}
    body = Path(tempfile.mkstemp(suffix=".json", prefix="fabric-jev-bench-")[1])
    try:
        probe = _RawClient(url, request)
        await probe.once()
        await probe.aclose()
        body.write_bytes(probe.last)  # the same answer, byte for byte
        servers = {"serve": url}
        for name in ("bare_uvicorn", "bare_socket"):
            started = subprocess.Popen([sys.executable, "-m", f"fabric_jev.benchmarks.{name}", str(body)],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            yardsticks[name] = started
            assert started.stdout is not None
            servers[name] = started.stdout.readline().strip()
        makers: dict[str, Any] = {"socket": lambda u: _RawClient(u, request), "route_client": _OursClient}
        clients = {(c, sv): make(u) for c, make in makers.items() for sv, u in servers.items()}
        for client in clients.values():
            await _block(client, 30)  # warm-up: connections, first-request imports
        walls: dict[tuple[str, str], list[float]] = {key: [] for key in clients}
        per_round: dict[tuple[str, str], list[float]] = {(c, y): [] for c in makers for y in yardsticks}
        load = [_load()]
        for _ in range(rounds):
            block = {}
            for key, client in clients.items():
                times = (await _block(client, per_block))[0]
                walls[key] += times
                block[key] = statistics.median(times)
            for c, y in per_round:
                per_round[(c, y)].append(block[(c, "serve")] / block[(c, y)])
        load.append(_load())
    finally:
        for client in clients.values():
            await client.aclose()
        for started in (proc, *yardsticks.values()):
            started.terminate()
            started.wait(10)
            if started.stdout is not None:
                started.stdout.close()
        Path(fixture).unlink(missing_ok=True)
        body.unlink(missing_ok=True)
    return {"requests": per_block * rounds, "rounds": rounds, "body_bytes": len(probe.last), "load": load,
            "clients": {c: {"median_ms": {sv: statistics.median(walls[(c, sv)]) for sv in servers},
                            "ratio": {y: statistics.median(per_round[(c, y)]) for y in yardsticks}}
                        for c in makers}}


# ---------------------------------------------------------------- launch


async def bench_launch(samples: int = 50) -> dict[str, object]:
    """Launch to first tick through the host (a warm pool of 2), alternating with the in-process
    floor sample by sample."""
    import anyio

    from ..contract.config import HostConfig
    from ..host import CapabilityRegistry, JevHost
    from .host import TICK_CODE, _program
    from .yardsticks import in_process_launch

    ticks: list[float] = []
    registry = CapabilityRegistry()

    async def tick(args: Any, ctx: Any) -> None:
        ticks.append(time.perf_counter())

    registry.register("bench.tick", tick, "read")
    program = _program(TICK_CODE, ["bench.tick"])
    host_ms: list[float] = []
    floor_ms: list[float] = []
    ratios: list[float] = []
    load = [_load()]
    async with JevHost(HostConfig(warm_workers=2), capabilities=registry) as host:
        for _ in range(3):  # warm-up: the pool, the verdict cache, first-launch imports
            await host.wait((await host.spawn(program, None)).id)
            in_process_launch(TICK_CODE)
        for _ in range(samples):
            await anyio.sleep(0.02)  # let the pool refill, as between real launches
            start = time.perf_counter()
            env = await host.spawn(program, None)
            await host.wait(env.id)
            took = (ticks[-1] - start) * 1000
            floor = in_process_launch(TICK_CODE)
            host_ms.append(took)
            floor_ms.append(floor)
            ratios.append(took / floor)
    load.append(_load())
    median = statistics.median
    return {"samples": samples, "load": load, "host_ms": median(host_ms), "floor_ms": median(floor_ms),
            "ratio": median(ratios), "best_host_ms": min(host_ms), "best_floor_ms": min(floor_ms)}


# ---------------------------------------------------------------- the suite


async def bench_cli(samples: int = 15) -> dict[str, object]:
    import anyio.to_thread

    return {"commands": await anyio.to_thread.run_sync(bench_commands, min(samples, 15)),
            "serve": await bench_serve(),
            "launch": await bench_launch(samples)}


def _met(ratio: float, goal: float) -> str:
    return "met" if ratio <= goal else "NOT met"


def _loads(load: list[list[float]]) -> str:
    return f"load {load[0][0]:.1f} -> {load[-1][0]:.1f}"


def print_cli(r: dict[str, Any]) -> None:
    c, s, la = r["commands"], r["serve"], r["launch"]
    m, cm = c["median_s"], c["median_cpu_s"]
    print(f"cli (whole processes, {c['samples']} pairs, each command right after its floor; {_loads(c['load'])})")
    print(f"  {'':34}{'wall':>9}{'ratio':>8}{'cpu':>10}{'ratio':>8}   goal")
    print(f"  {'floor: python, import quickjs, eval':34}{m['floor'] * 1000:7.1f}ms{'':8}{cm['floor'] * 1000:8.1f}ms")
    for key, label in (("run", "run of a trivial program (.json)"), ("run_ts", "run of the same program (.ts)"),
                       ("help", "--help")):
        print(f"  {label:34}{m[key] * 1000:7.1f}ms{c['ratio'][key]:8.2f}{cm[key] * 1000:8.1f}ms"
              f"{c['cpu_ratio'][key]:8.2f}   <= {GOALS[key]} ({_met(c['ratio'][key], GOALS[key])})")
    for key, label in (("import", "import fabric_jev"), ("import_envelope", "import ...contract.envelope")):
        goal = IMPORT_GOALS_S[key]
        print(f"  {label:34}{m[key] * 1000:7.1f}ms{'':8}{cm[key] * 1000:8.1f}ms{'':8}   <= {goal * 1000:.0f} ms "
              f"({_met(m[key], goal)})")
    print(f"  serve, one keep-alive connection per client and server ({s['requests']} requests each in "
          f"{s['rounds']} rounds of alternating blocks; {s['body_bytes']} bytes answered; {_loads(s['load'])})")
    for client, label in (("socket", "bare socket client"), ("route_client", "route client")):
        md, sr = s["clients"][client]["median_ms"], s["clients"][client]["ratio"]
        print(f"    {label:19} serve {md['serve']:6.3f} ms   bare uvicorn {md['bare_uvicorn']:6.3f} ms   ratio "
              f"{sr['bare_uvicorn']:.2f}   <= {GOALS['serve']} ({_met(sr['bare_uvicorn'], GOALS['serve'])})")
        print(f"    {'':36}bare socket server {md['bare_socket']:6.3f} ms   ratio {sr['bare_socket']:.2f}")
    print(f"  launch to first tick {la['host_ms']:7.2f} ms   in-process floor {la['floor_ms']:6.2f} ms   ratio "
          f"{la['ratio']:.2f}   <= {GOALS['launch']} ({_met(la['ratio'], GOALS['launch'])}; {la['samples']} "
          f"alternating pairs, best {la['best_host_ms']:.2f} / {la['best_floor_ms']:.2f} ms; {_loads(la['load'])})")
