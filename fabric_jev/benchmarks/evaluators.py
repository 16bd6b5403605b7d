"""Evaluator benchmark: the route client next to typesafe-sdk, and the local evaluator."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import time
from pathlib import Path
from statistics import median as _median
from typing import Any

from ..contract.evaluation import EvaluationRequest
from .encoder_threads import bench_encoder_threads, print_encoder_threads
from .llm import bench_llm, print_llm

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
    # No access log: the yardstick (bare_uvicorn) writes none; serving the same bytes means the
    # same work around them (docs/performance.md gives the log's own cost).
    proc = subprocess.Popen([sys.executable, "-m", "fabric_jev.cli", "serve", "--port", "0",
                             "--evaluator", f"fixture:{tmp.name}", "--no-access-log"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    return proc, url, tmp.name


class _OursClient:
    def __init__(self, url: str) -> None:
        from ..contract.evaluation import validate_request
        from ..evaluators.credentials import AuthStore, CredentialResolver
        from ..evaluators.http import HttpEvaluator
        from ..evaluators.routes import TYPESAFE

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


class _RawClient:
    """One kept-alive connection; each request written whole, the answer read to its Content-Length.

    Blocking on purpose: the server is another process, and a bare socket adds
    the least client time, so the servers' own difference shows.
    """

    def __init__(self, url: str, request: bytes) -> None:
        self.port = int(url.rsplit(":", 1)[1])
        self.request = request
        self.sock = self._connect()
        self.last = b""

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    async def once(self) -> None:
        try:
            self.last = self._exchange()
        except ConnectionError:  # closed while idle (other blocks ran past the keep-alive timeout)
            self.sock.close()
            self.sock = self._connect()
            self.last = self._exchange()

    def _exchange(self) -> bytes:
        self.sock.sendall(self.request)
        data = b""
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed a kept-alive connection")
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), None)
            if sep and length is not None and len(body) >= length:
                return body

    async def aclose(self) -> None:
        self.sock.close()


def _wire_request() -> bytes:
    from ..contract.evaluation import validate_request

    payload = json.dumps(validate_request({"state": _BENCH_STATE, "questions": _bench_questions()})
                         .to_wire("jev-latest")).encode()
    return (b"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)


async def _serve_against_bare_uvicorn(url: str, n: int, rounds: int = 20) -> dict[str, Any]:
    """`fabric-jev serve` (fixture) next to a bare uvicorn app answering the same bytes.

    Each client (a bare socket, our route client, typesafe-sdk if installed)
    talks to both servers in alternating blocks: a client's ratio is serve's
    cost over what uvicorn itself costs, seen through that client.
    """
    import subprocess
    import tempfile

    request = _wire_request()
    probe = _RawClient(url, request)
    await probe.once()
    await probe.aclose()
    with tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False) as f:
        f.write(probe.last)  # the same answer, byte for byte
    bare = subprocess.Popen([sys.executable, "-m", "fabric_jev.benchmarks.bare_uvicorn", f.name],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    clients: dict[tuple[str, str], Any] = {}
    try:
        assert bare.stdout is not None
        servers = {"serve": url, "bare_uvicorn": bare.stdout.readline().strip()}
        makers: dict[str, Any] = {"socket": lambda u: _RawClient(u, request), "fabric_jev": _OursClient}
        with contextlib.suppress(ImportError):  # the peer lives in the `bench` extra
            import typesafe_sdk  # noqa: F401

            makers["typesafe_sdk"] = _SdkClient
        clients = {(c, sv): make(u) for c, make in makers.items() for sv, u in servers.items()}
        walls: dict[tuple[str, str], list[float]] = {k: [] for k in clients}
        # Per client, serve's block median over bare uvicorn's block median in the same round:
        # neighbouring blocks see the same load, where medians over the whole run mix moments.
        round_ratios: dict[str, list[float]] = {c: [] for c in makers}
        for client in clients.values():
            await _block(client, 20)  # warm-up: connections, first-call imports
        for _ in range(rounds):  # alternate blocks so drift hits every pair alike
            block: dict[tuple[str, str], float] = {}
            for key, client in clients.items():
                w = (await _block(client, n))[0]
                walls[key] += w
                block[key] = _median(w)
            for c in makers:
                round_ratios[c].append(block[(c, "serve")] / block[(c, "bare_uvicorn")])
    finally:
        for client in clients.values():
            await client.aclose()
        bare.terminate()
        bare.wait(10)
        if bare.stdout is not None:
            bare.stdout.close()
        Path(f.name).unlink(missing_ok=True)
    out: dict[str, Any] = {"requests": n * rounds, "rounds": rounds, "body_bytes": len(probe.last)}
    for name in makers:
        serve_ms, bare_ms = _median(walls[(name, "serve")]), _median(walls[(name, "bare_uvicorn")])
        out[name] = {"serve_ms": serve_ms, "bare_uvicorn_ms": bare_ms,
                     "ratio": _median(round_ratios[name]), "ratio_of_medians": serve_ms / bare_ms}
    return out


async def _local_latency(questions: int, samples: int) -> list[float]:
    from ..contract.evaluation import validate_request
    from ..evaluators.local import LocalEvaluator

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


def _profile_examples(n: int) -> list[Any]:
    """n labeled tickets for one choice signature: the shipped example's states, varied."""
    from ..calibration.labels import parse_labels

    root = Path(__file__).resolve().parents[2] / "examples" / "learn" / "labels.jsonl"
    base = [e for e in parse_labels(root.read_text(encoding="utf-8"), source=str(root))
            if e.question.type == "choice"]
    lines = []
    for i in range(n):
        e = base[i % len(base)]
        lines.append(json.dumps({"id": f"b{i}", "state": f"{e.state} (ticket {1000 + i * 7})",
                                 "question": {"type": "choice", "instructions": e.question.instructions,
                                              "criteria": e.question.criteria},
                                 "label": e.label}))
    return parse_labels("\n".join(lines), source="bench")


async def _profile_cost(examples: int, samples: int) -> dict[str, Any]:
    """`learn` on `examples` labels, then one-question latency with and without the profile."""
    import anyio.to_thread

    from ..calibration.learn import learn
    from ..evaluators.local import LocalEvaluator

    labeled = _profile_examples(examples)
    ev = LocalEvaluator()
    ev.answer_sync(labeled[0].request())  # load the encoder outside the timing
    start = time.perf_counter()
    result = await anyio.to_thread.run_sync(
        lambda: learn(ev, labeled, name="bench", holdout=0.0, folds=0))
    learn_s = time.perf_counter() - start
    question = labeled[0].question
    plain, adapted = LocalEvaluator(), LocalEvaluator(profile=result.profile)
    times: dict[str, list[float]] = {"plain": [], "profile": []}
    for i in range(samples):
        for name, evaluator in (("plain", plain), ("profile", adapted)):  # alternate: drift hits both
            # A new state each time: its embeddings are never cached, as in real use.
            request = EvaluationRequest(state=f"{_BENCH_STATE} Ticket number {i * 7919} {name}.",
                                        questions=(question,))
            t = time.perf_counter()
            answer = await evaluator.evaluate(request, timeout=60)
            times[name].append((time.perf_counter() - t) * 1000)
            if name == "profile":
                assert "+profile:bench" in answer.model
    plain_ms, profile_ms = _median(times["plain"]), _median(times["profile"])
    return {"examples": examples, "learn_s": learn_s, "plain_ms": plain_ms, "profile_ms": profile_ms,
            "ratio": profile_ms / plain_ms, "samples": samples}


def _shipped_example_splits(seeds: int) -> dict[str, Any]:
    """`learn` on the shipped example with `seeds` different held-out shares: how much the figures move."""
    from ..calibration.labels import read_labels
    from ..calibration.learn import learn
    from ..evaluators.local import LocalEvaluator

    examples = read_labels(Path(__file__).resolve().parents[2] / "examples" / "learn" / "labels.jsonl")
    ev = LocalEvaluator()  # one embedding cache: every seed encodes the same states
    runs = []
    for seed in range(seeds):
        r = learn(ev, examples, name="splits", folds=0, seed=seed).report
        runs.append({"seed": seed, "heldOut": r["heldOut"], "gain": r["after"]["accuracy"] - r["before"]["accuracy"],
                     "ece": r["after"]["ece"], "accuracy": r["after"]["accuracy"]})
    eces = sorted(x["ece"] for x in runs)
    return {"seeds": seeds, "examples": len(examples), "heldOut": runs[0]["heldOut"], "runs": runs,
            "ece_median": _median(eces), "ece_max": eces[-1],
            "ece_within_goal": sum(e <= 0.10 for e in eces),
            "gain_min": min(x["gain"] for x in runs), "accuracy_median": _median([x["accuracy"] for x in runs])}


async def bench_evaluators(requests: int = 100, samples: int = 30) -> dict[str, object]:
    proc, url, fixture = await _serve_fixture()
    try:
        # Short blocks, many rounds: on a shared machine the load moves within seconds.
        server = await _serve_against_bare_uvicorn(url, max(1, requests * 6 // 20))
        clients = await _compare_clients(url, requests)
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
        Path(fixture).unlink(missing_ok=True)
    return {
        "serve": server,
        "route_client_ms": clients,
        "local_ms": {"one_question": _median(await _local_latency(1, samples)),
                     "five_questions": _median(await _local_latency(5, samples)),
                     "samples": samples},
        "local_profile": await _profile_cost(1000, samples),
        "shipped_example": _shipped_example_splits(20),
        "encoder_threads": bench_encoder_threads(),
        "llm": await bench_llm(samples=min(samples, 5)),
    }


def _print_evaluators(r: dict[str, Any]) -> None:
    rc, lo, sv = r["route_client_ms"], r["local_ms"], r["serve"]
    print("evaluators")
    print(f"  serve against a bare uvicorn app answering the same {sv['body_bytes']} bytes "
          f"(keep-alive, {sv['requests']} requests each in {sv['rounds']} rounds of alternating blocks; "
          "ratio: median of the rounds' ratios; goal <= 1.2):")
    for name in ("fabric_jev", "typesafe_sdk", "socket"):
        if name in sv:
            c = sv[name]
            label = {"fabric_jev": "route client", "typesafe_sdk": "typesafe-sdk", "socket": "bare socket"}[name]
            print(f"    {label:13} serve {c['serve_ms']:6.2f} ms   bare uvicorn {c['bare_uvicorn_ms']:6.2f} ms"
                  f"   ratio {c['ratio']:.2f}")
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
    pr = r["local_profile"]
    print(f"  local with a profile of {pr['examples']} examples {pr['profile_ms']:7.1f} ms for 1 question, "
          f"without {pr['plain_ms']:.1f} ms   ratio {pr['ratio']:.2f} (goal <= 1.5)")
    print(f"  learn on {pr['examples']} examples      {pr['learn_s']:7.1f} s (heuristic answers, "
          "embeddings and the fit)")
    se = r["shipped_example"]
    print(f"  shipped example, {se['seeds']} held-out shares of {se['heldOut']}: profile ECE median "
          f"{se['ece_median']:.3f}, worst {se['ece_max']:.3f}, {se['ece_within_goal']} of {se['seeds']} "
          f"<= 0.10; accuracy median {se['accuracy_median']:.1%}, gain over the heuristic >= "
          f"{se['gain_min'] * 100:.0f} points")
    print_encoder_threads(r["encoder_threads"])
    print_llm(r["llm"])
