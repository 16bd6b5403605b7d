"""`--evaluator gguf:FILE` on the shipped SmolLM2 file: the host starts llama.cpp's server itself.

A run, a batch and `serve` in one process share one server; it is stopped when the last of
them closes, and no llama.cpp process is left behind when the host is stopped with SIGTERM or
killed with SIGKILL. A server that cannot start says why; a wait cut short by a timeout leaves
it loading for the next evaluation; a port range is honoured; calibration works as on the
model routes. Every test starts its own server (the `llama` fixture's is not used).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path

import anyio
import httpx
import pytest

from fabric_jev import HostConfig, JevHost, UpstreamError
from fabric_jev.batch import batch
from fabric_jev.benchmarks.llama_server import MODEL_FILE, locate_model
from fabric_jev.contract.evaluation import validate_request
from fabric_jev.evaluators.gguf import GgufEvaluator
from fabric_jev.evaluators.gguf_server import shared_servers
from fabric_jev.evaluators.select import evaluator_from_spec
from fabric_jev.serve import serve
from tests.conftest import child_pids, live_processes, program, wait_gone

pytestmark = pytest.mark.llm

ROOT = Path(__file__).resolve().parent.parent
QUESTION = {"refund": {"type": "noul", "instructions": "Does the customer ask for money back?"}}
ASK = program("const r = await jev.evaluate({state: input, questions: " + json.dumps(QUESTION) + "});"
              "return r.answers.refund.noul", requires=["jev.evaluate"], inputSchema={"type": "string"})
REQUEST = validate_request({"state": "Please refund my order.", "questions": QUESTION})
#: One thread: the machine is shared; and the same settings everywhere, so that servers are shared.
CONFIG = HostConfig.model_validate({"evaluator": {"gguf": {"threads": 1, "contextSize": 2048}}})


@pytest.fixture(scope="module")
def model() -> Path:
    return locate_model()


def gguf_children(of: int) -> set[int]:
    """The llama.cpp servers (`_gguf_main.py` processes) that process `of` started and that still run."""
    found = set()
    for pid, (parent, _) in live_processes().items():
        if parent != of:
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"_gguf_main.py" in cmdline:
            found.add(pid)
    return found


@pytest.mark.timeout(180)
@pytest.mark.anyio
async def test_a_run_a_batch_and_serve_share_one_server(model: Path) -> None:
    spec = f"gguf:{model}"
    before = child_pids()
    already = gguf_children(os.getpid())  # the `llama` fixture's server, when an earlier test started it
    async with JevHost(CONFIG, evaluator=spec) as host:
        assert shared_servers() == []  # nothing starts before the first evaluation
        envelope = await host.run(ASK, "I was charged twice, please refund me.")
        assert envelope.state == "completed", envelope.error
        assert envelope.evaluator is not None
        assert (envelope.evaluator.route, envelope.evaluator.model) == ("gguf", MODEL_FILE)
        (server,) = shared_servers()
        assert gguf_children(os.getpid()) - already == {server.pid}

        outcomes = [o async for o in batch(ASK, ["refund please", "thanks, all good"], config=CONFIG,
                                           evaluator=spec)]
        assert [o.state for o in outcomes] == ["completed", "completed"]
        assert all(o.evaluator is not None and o.evaluator["route"] == "gguf" for o in outcomes)
        assert shared_servers() == [server]

        served = evaluator_from_spec(spec, CONFIG)
        ports: list[int] = []
        listening = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(serve, served, ready=lambda port: (ports.append(port), listening.set())))
            await listening.wait()
            async with httpx.AsyncClient() as client:
                resp = await client.post(f"http://127.0.0.1:{ports[0]}/v1/systemone", timeout=120, json={
                    "model": "jev-latest", "state": "Refund the second charge, please.", "questions": QUESTION})
            tg.cancel_scope.cancel()
        await served.aclose()
        body = resp.json()
        assert resp.status_code == 200, body
        assert body["x_evaluator"] == "gguf" and body["x_provenance"]["model"] == MODEL_FILE
        assert shared_servers() == [server] and gguf_children(os.getpid()) - already == {server.pid}
    # The last evaluator closed with the host: the server is stopped and reaped.
    assert shared_servers() == []
    await wait_gone([server.pid])
    assert child_pids() == before


HOST_SCRIPT = textwrap.dedent("""
    import sys, anyio
    from fabric_jev import HostConfig
    from fabric_jev.contract.evaluation import validate_request
    from fabric_jev.evaluators.select import evaluator_from_spec

    async def main():
        config = HostConfig.model_validate({"evaluator": {"gguf": {"threads": 1, "contextSize": 2048}}})
        evaluator = evaluator_from_spec(sys.argv[1], config)
        await evaluator.evaluate(validate_request({"state": "hi", "questions": {
            "q": {"type": "noul", "instructions": "Is this a greeting?"}}}), timeout=120)
        print(evaluator.server.pid, flush=True)
        await anyio.sleep_forever()

    anyio.run(main)
""")


@contextmanager
def host_with_a_server(model: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A host process that has evaluated once through `gguf:` (so its server runs): (it, the server's pid)."""
    proc = subprocess.Popen([sys.executable, "-c", HOST_SCRIPT, f"gguf:{model}"], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    pidfd = None
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip().isdigit(), proc.communicate(timeout=60)
        server = int(line)
        pidfd = os.pidfd_open(server)  # the server itself, whatever its pid comes to name later
        assert gguf_children(proc.pid) == {server}
        yield proc, server
    finally:
        proc.kill()
        proc.communicate(timeout=30)
        if pidfd is not None:  # a test that failed leaves no server running either
            with suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)


@pytest.mark.timeout(120)
@pytest.mark.anyio
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
async def test_no_server_outlives_its_host(model: Path, sig: signal.Signals) -> None:
    with host_with_a_server(model) as (host, server):
        host.send_signal(sig)
        host.wait(30)
        await wait_gone([server], timeout=30)
    assert server not in live_processes()


@pytest.mark.timeout(120)
def test_serve_stops_its_server_on_sigterm(model: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "fabric_jev.cli", "serve", "--port", "0", "--evaluator",
                             f"gguf:{model}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        assert gguf_children(proc.pid) == set()  # not before the first request
        resp = httpx.post(url + "/v1/systemone", timeout=120, json={
            "model": "jev-latest", "state": "Refund me.", "questions": QUESTION})
        assert resp.status_code == 200 and resp.json()["x_evaluator"] == "gguf"
        (server,) = gguf_children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert server not in live_processes()  # stopped and reaped by serve itself
    finally:
        proc.kill()
        proc.communicate(timeout=30)


@pytest.mark.timeout(120)
@pytest.mark.anyio
async def test_a_model_that_cannot_load_says_why_and_leaves_no_process(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\xff" * 60)  # the magic bytes, then a header llama.cpp cannot read
    before = child_pids()
    evaluator = evaluator_from_spec(f"gguf:{broken}", CONFIG)
    try:
        for _ in range(2):  # the next evaluation tries again, with a fresh server
            with pytest.raises(UpstreamError, match=r"the llama\.cpp server for broken\.gguf could not start: "
                                                    r".*failed to (read|load)"):
                await evaluator.evaluate(REQUEST, timeout=60)
            assert shared_servers() == [] and child_pids() == before
    finally:
        await evaluator.aclose()


@pytest.mark.timeout(120)
@pytest.mark.anyio
async def test_a_wait_cut_short_leaves_the_model_loading_for_the_next_evaluation(model: Path) -> None:
    evaluator = evaluator_from_spec(f"gguf:{model}", CONFIG)
    try:
        with pytest.raises(UpstreamError, match=r"was still loading the model after 0\.001 s; it goes on loading"):
            await evaluator.evaluate(REQUEST, timeout=0.001)
        (loading,) = shared_servers()
        assert loading.url is None and loading.alive
        evaluation = await evaluator.evaluate(REQUEST, timeout=120)
        assert shared_servers() == [loading] and loading.url is not None  # the same server, not a second
        assert evaluation.provenance is not None and evaluation.provenance.route == "gguf"
    finally:
        await evaluator.aclose()
    assert shared_servers() == []


@pytest.mark.timeout(120)
@pytest.mark.anyio
async def test_the_server_listens_on_the_first_free_port_of_the_range(model: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        first = taken.getsockname()[1]
        last = min(first + 20, 65535)
        only = HostConfig.model_validate({"evaluator": {"gguf": {"threads": 1, "ports": [first, first]}}})
        evaluator = evaluator_from_spec(f"gguf:{model}", only)
        try:
            with pytest.raises(UpstreamError, match=rf"could not start: no free port from {first} to {first} "
                                                    r"on 127\.0\.0\.1"):
                await evaluator.evaluate(REQUEST, timeout=60)
        finally:
            await evaluator.aclose()
        ranged = HostConfig.model_validate({"evaluator": {"gguf": {"threads": 1, "ports": [first, last]}}})
        evaluator = evaluator_from_spec(f"gguf:{model}", ranged)
        try:
            await evaluator.evaluate(REQUEST, timeout=120)
            assert isinstance(evaluator, GgufEvaluator) and evaluator.server is not None
            assert evaluator.server.url is not None
            assert first < int(evaluator.server.url.rsplit(":", 1)[1]) <= last
        finally:
            await evaluator.aclose()


@pytest.mark.timeout(300)
@pytest.mark.anyio
async def test_learn_fits_temperatures_for_the_file_that_the_route_then_applies(model: Path, tmp_path: Path) -> None:
    from fabric_jev.calibration.labels import read_labels
    from fabric_jev.evaluators.llm_profile import LlmProfile

    shipped = (ROOT / "examples" / "llm-calibration" / "labels.jsonl").read_text().splitlines()
    picked = [line for line in shipped if '"id": "review-00' in line][:6]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(picked) + "\n")
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"evaluator": {"gguf": {"threads": 1, "contextSize": 2048}}}))
    out = tmp_path / "smol.profile.json"
    done = subprocess.run([sys.executable, "-m", "fabric_jev.cli", "learn", str(labels), "--evaluator",
                           f"gguf:{model}", "--config", str(config), "--out", str(out), "--holdout", "0.34",
                           "--concurrency", "1"], capture_output=True, text=True, timeout=280, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    profile = LlmProfile.load(out)
    assert (profile.route, profile.model) == ("gguf", MODEL_FILE) and "noul" in profile.temperatures
    with_profile = HostConfig.model_validate({"evaluator": {**CONFIG.evaluator, "profile": str(out)}})
    evaluator = evaluator_from_spec(f"gguf:{model}", with_profile)
    try:
        evaluation = await evaluator.evaluate(read_labels(labels)[0].request(), timeout=120)
    finally:
        await evaluator.aclose()
    assert evaluation.provenance is not None
    assert (evaluation.provenance.calibration, evaluation.provenance.profile) == ("temperature", profile.name)
