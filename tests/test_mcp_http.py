"""`fabric-jev mcp --transport streamable-http` as a subprocess, driven by the official SDK's own
streamable HTTP client: tools, runs, several clients, the bearer gate, per-client limits, SIGTERM."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install -e '.[mcp]')")
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import program

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "a-test-token-of-32-characters-xx"
FIXTURE = {"answers": {"q": {"noul": 0.75}}, "usage": {"input_tokens": 10, "output_tokens": 2}}
#: A run that goes on until it is stopped (or the server stops).
FOREVER = program("await program.emit('started'); for (;;) { await program.sleep(1000); }")
QUICK = program("return 'done'")


@contextmanager
def http_server(tmp_path: Path, *args: str, config: dict[str, Any] | None = None,
                token: bool = True) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`fabric-jev mcp --transport streamable-http` on a free loopback port: (process, URL)."""
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps(FIXTURE))
    extra = ["--evaluator", f"fixture:{fixture}"]
    if token:
        token_file = tmp_path / "token"
        token_file.write_text(TOKEN + "\n")
        token_file.chmod(0o600)
        extra += ["--token-file", str(token_file)]
    if config is not None:
        (tmp_path / "config.json").write_text(json.dumps(config))
        extra += ["--config", str(tmp_path / "config.json")]
    with (tmp_path / "server.log").open("w") as errlog:
        proc = subprocess.Popen([sys.executable, "-m", "fabric_jev", "mcp", "--transport", "streamable-http",
                                 *extra, *args], stdout=subprocess.PIPE, stderr=errlog, text=True, cwd=ROOT,
                                env={**os.environ, "FABRIC_JEV_HOME": str(tmp_path / "home")})
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith(("http://127.0.0.1:", "https://127.0.0.1:")) and url.endswith("/mcp"), \
            (tmp_path / "server.log").read_text()
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


@asynccontextmanager
async def client(url: str, token: str | None = TOKEN, verify: Any = True, **kwargs: Any) -> AsyncIterator[ClientSession]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300), verify=verify) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write, **kwargs) as session:
        await session.initialize()
        yield session


def structured(result: Any) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


@pytest.mark.anyio
async def test_lists_tools_and_runs_a_program_over_http(tmp_path: Path) -> None:
    with http_server(tmp_path) as (_, url):
        async with client(url) as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert {"jev_run", "jev_spawn", "jev_wait", "jev_evaluate"} <= names
            code = ("const a = await jev.evaluate({state: input, questions: {q: {type: 'noul', instructions: 'ok?'}}});"
                    " return a.answers.q.noul")
            envelope = structured(await session.call_tool("jev_run", {
                "program": program(code, requires=["jev.evaluate"]), "input": {"n": 1}}))
            assert envelope["state"] == "completed" and envelope["result"] == 0.75


@pytest.mark.anyio
async def test_several_clients_at_once(tmp_path: Path) -> None:
    results: dict[int, Any] = {}

    async def one(i: int, url: str) -> None:
        async with client(url) as session:
            code = "return input.n * 2"
            results[i] = structured(await session.call_tool("jev_run", {"program": program(code), "input": {"n": i}}))

    with http_server(tmp_path) as (_, url):
        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(one, i, url)
    assert {i: r["result"] for i, r in results.items()} == {i: i * 2 for i in range(4)}
    assert len({r["id"] for r in results.values()}) == 4


@pytest.mark.anyio
async def test_a_missing_or_wrong_token_gets_a_bare_401(tmp_path: Path) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    with http_server(tmp_path) as (_, url):
        async with httpx2.AsyncClient() as http:
            answers = [await http.post(url, json=body, headers={**headers, **extra}) for extra in (
                {}, {"Authorization": "Bearer wrong-token-of-enough-length"}, {"Authorization": f"Basic {TOKEN}"},
                {"Authorization": f"Bearer {TOKEN}x"})]
            # Two Authorization headers, the right one first: a request carries one credential.
            answers.append(await http.post(url, json=body, headers=[
                *headers.items(), ("Authorization", f"Bearer {TOKEN}"),
                ("Authorization", "Bearer wrong-token-of-enough-length")]))
            good = await http.post(url, json=body, headers={**headers, "Authorization": f"Bearer {TOKEN}"})
    assert [a.status_code for a in answers] == [401] * 5
    assert {a.content for a in answers} == {b""}  # nothing that tells a wrong token from a missing one
    assert {a.headers.get("www-authenticate") for a in answers} == {"Bearer"}
    assert good.status_code == 200
    assert TOKEN not in (tmp_path / "server.log").read_text()


def test_refuses_to_start_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "fabric_jev", "mcp", "--transport", "streamable-http",
                           "--host", "0.0.0.0"], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={**os.environ, "FABRIC_JEV_HOME": str(tmp_path / "home")})
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "--host 0.0.0.0" in line and "--token-file" in line


def test_http_options_are_refused_on_stdio(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "fabric_jev", "mcp", "--port", "8000"], capture_output=True,
                          text=True, cwd=ROOT, timeout=60, stdin=subprocess.DEVNULL,
                          env={**os.environ, "FABRIC_JEV_HOME": str(tmp_path / "home")})
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert "--port is for --transport streamable-http" in line


@pytest.mark.anyio
async def test_one_clients_flood_does_not_starve_another(tmp_path: Path) -> None:
    """Client A floods with runs that never end; with 2 host slots and --client-runs 1, A holds one
    slot and queues the rest behind itself, so client B's run still gets a slot and completes."""
    started = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    async def flood(session: ClientSession) -> None:
        await session.call_tool("jev_run", {"program": FOREVER}, progress_callback=on_progress)

    with http_server(tmp_path, "--client-runs", "1", config={"maxConcurrentRuns": 2}) as (_, url):
        async with client(url) as a, client(url) as b, anyio.create_task_group() as tg:
            tg.start_soon(flood, a)
            await started.wait()  # A's first run holds a host slot
            for _ in range(4):
                tg.start_soon(flood, a)
            # A's spawns are refused at its limit, with the reason; B's are its own.
            refused = await a.call_tool("jev_spawn", {"program": QUICK})
            assert refused.is_error and "--client-runs 1" in refused.content[0].text
            envelope = structured(await b.call_tool("jev_run", {"program": QUICK}))
            assert envelope["state"] == "completed" and envelope["result"] == "done"
            runs = structured(await b.call_tool("jev_status", {}))["runs"]
            # The host holds one run of A (running) and B's (completed): A's others wait in A's queue.
            assert sorted(r["state"] for r in runs) == ["completed", "running"]
            tg.cancel_scope.cancel()


def _descendants(pid: int) -> set[int]:
    children: dict[int, set[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, set()).add(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.add(child)
            todo.append(child)
    return found


@pytest.mark.anyio
async def test_sigterm_stops_the_server_and_leaves_no_worker(tmp_path: Path) -> None:
    with http_server(tmp_path) as (proc, url):
        async with client(url) as session:
            spawned = structured(await session.call_tool("jev_spawn", {"program": FOREVER}))
            assert spawned["state"] in ("queued", "running")
            workers = _descendants(proc.pid)
            assert workers  # the zygote and the run's worker
            pidfds = [os.pidfd_open(pid) for pid in workers]
            proc.send_signal(signal.SIGTERM)
            assert await anyio.to_thread.run_sync(proc.wait, 30) == 0
    try:
        for fd in pidfds:  # a pidfd is readable once its process has ended
            readable, _, _ = select.select([fd], [], [], 30)
            assert readable, "a worker outlived the server"
    finally:
        for fd in pidfds:
            os.close(fd)


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no certificate to test TLS with")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.mark.anyio
async def test_tls_by_uvicorns_options(tmp_path: Path) -> None:
    import ssl

    cert, key = _self_signed(tmp_path)
    with http_server(tmp_path, "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)) as (_, url):
        assert url.startswith("https://")
        async with client(url, verify=ssl.create_default_context(cafile=str(cert))) as session:
            envelope = structured(await session.call_tool("jev_run", {"program": QUICK}))
    assert envelope["result"] == "done"


def test_a_tls_key_without_its_certificate_is_refused(tmp_path: Path) -> None:
    (tmp_path / "key.pem").write_text("not a key")
    done = subprocess.run([sys.executable, "-m", "fabric_jev", "mcp", "--transport", "streamable-http",
                           "--ssl-keyfile", str(tmp_path / "key.pem")], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, env={**os.environ, "FABRIC_JEV_HOME": str(tmp_path / "home")})
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "TLS needs both --ssl-certfile and --ssl-keyfile" in line


@pytest.mark.timeout(300)
def test_the_inspector_lists_and_calls_over_http(tmp_path: Path) -> None:
    from tests.test_mcp_programs import inspector

    with http_server(tmp_path) as (_, url):
        def inspect(*args: str) -> Any:
            done = subprocess.run([*inspector(), "--cli", url, "--transport", "http",
                                   "--header", f"Authorization: Bearer {TOKEN}", *args],
                                  capture_output=True, text=True, timeout=240, cwd=tmp_path,
                                  env={**os.environ, "HOME": str(tmp_path / "home")})
            assert done.returncode == 0, done.stderr[-3000:]
            return json.loads(done.stdout)

        listed = inspect("--method", "tools/list")
        assert "jev_run" in {t["name"] for t in listed["tools"]}
        ran = inspect("--method", "tools/call", "--tool-name", "jev_run",
                      "--tool-arg", f"program={json.dumps(QUICK)}")
    assert ran["structuredContent"]["state"] == "completed" and ran["structuredContent"]["result"] == "done"


ASKS_ONCE = program("const a = await jev.evaluate({state: 's', questions: {q: {type: 'noul', instructions: "
                    "'ok?'}}}); return a.answers.q.noul", name="asker", requires=["jev.evaluate"])


@pytest.mark.anyio
async def test_a_queued_run_asks_its_own_client_not_the_one_that_freed_its_slot(tmp_path: Path) -> None:
    """One host slot: B's spawn waits in the host's queue behind A's run and starts when A's ends,
    in A's task; its question still goes to B's user."""
    import mcp_types as types

    asked: list[str] = []
    a_asking, b_queued = anyio.Event(), anyio.Event()

    def answer(name: str) -> Any:
        async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(name)
            if name == "a":
                a_asking.set()
                await b_queued.wait()
            return types.ElicitResult(action="accept", content={"decision": "allow"})
        return callback

    config = {"approvals": {"read": "ask"}, "maxConcurrentRuns": 1}
    with http_server(tmp_path, config=config) as (_, url):
        async with client(url, elicitation_callback=answer("a")) as a, \
                client(url, elicitation_callback=answer("b")) as b, anyio.create_task_group() as tg:
            finished: dict[str, Any] = {}

            async def run_a() -> None:
                finished["a"] = structured(await a.call_tool("jev_run", {"program": ASKS_ONCE}))

            tg.start_soon(run_a)
            await a_asking.wait()
            spawned = structured(await b.call_tool("jev_spawn", {"program": ASKS_ONCE}))
            assert spawned["state"] == "queued"
            b_queued.set()
            ended = structured(await b.call_tool("jev_wait", {"id": spawned["id"]}))
    assert finished["a"]["result"] == 0.75 and ended["state"] == "completed" and ended["result"] == 0.75
    assert asked == ["a", "b"]


@pytest.mark.anyio
@pytest.mark.parametrize("refusal", ["port", "tls", "programs"])
async def test_an_evaluator_given_is_closed_when_serving_is_refused(tmp_path: Path, refusal: str) -> None:
    import socket

    from fabric_jev import HostConfig
    from fabric_jev.errors import ConfigError, ProgramInvalid
    from fabric_jev.mcp.over_http import serve_http
    from fabric_jev.testing import ScriptedEvaluator

    evaluator = ScriptedEvaluator({})
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1] if refusal == "port" else 0
        with pytest.raises(ProgramInvalid if refusal == "programs" else ConfigError):
            await serve_http(HostConfig(), evaluator, host="127.0.0.1", port=port, token=None, client_runs=1,
                             ssl_keyfile=str(tmp_path / "key.pem") if refusal == "tls" else None,
                             programs=str(tmp_path / "absent") if refusal == "programs" else None)
    assert evaluator.closed  # the host would have closed it; refused before the host, it is closed too


@pytest.mark.anyio
async def test_an_evaluator_given_to_stdio_is_closed_when_serving_is_refused(tmp_path: Path) -> None:
    from fabric_jev import HostConfig
    from fabric_jev.errors import ProgramInvalid
    from fabric_jev.mcp.server import serve_stdio
    from fabric_jev.testing import ScriptedEvaluator

    evaluator = ScriptedEvaluator({})
    with pytest.raises(ProgramInvalid):
        await serve_stdio(HostConfig(), evaluator, programs=str(tmp_path / "absent"))
    assert evaluator.closed
