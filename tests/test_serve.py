"""`fabric-jev serve` checked by the jevcompat conformance suite and the official SDK."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import select
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest

from fabric_jev import FixtureEvaluator
from fabric_jev.contract.evaluation import Evaluation, EvaluationRequest
from fabric_jev.evaluators.base import Evaluator
from fabric_jev.evaluators.local import LocalEvaluator
from fabric_jev.serve import ServeLimits, serve
from fabric_jev.testing import ScriptedEvaluator

ROOT = Path(__file__).resolve().parent.parent
JEVCOMPAT = Path(sys.executable).with_name("jevcompat")


@contextmanager
def served(*args: str, env: dict[str, str] | None = None, log: list[str] | None = None) -> Iterator[str]:
    """`fabric-jev serve` on a free port; its log (standard error) goes to a file, appended to `log`
    once the server has stopped: a pipe nobody reads would fill up with access lines and stall it."""
    import tempfile

    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen([sys.executable, "-m", "fabric_jev.cli", "serve", "--port", "0", *args],
                                stdout=subprocess.PIPE, stderr=errors, text=True, cwd=ROOT,
                                env={**os.environ, **(env or {})})
        assert proc.stdout is not None
        try:
            url = proc.stdout.readline().strip()
            if not url.startswith("http://127.0.0.1:"):
                proc.wait(20)
                errors.seek(0)
                raise AssertionError(errors.read())
            yield url
        finally:
            proc.terminate()
            proc.communicate(timeout=20)
            if log is not None:
                errors.seek(0)
                log.extend(errors.read().splitlines())


def conformance(url: str, tmp: Path, *extra: str, env: dict[str, str] | None = None) -> dict[str, object]:
    report = tmp / "report.json"
    done = subprocess.run([str(JEVCOMPAT), "test", url, "--json", str(report), *extra],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})
    data: dict[str, object] = json.loads(report.read_text())
    assert done.returncode == 0, done.stdout[-3000:]
    return data


@pytest.mark.timeout(300)
def test_serve_is_conformant_without_auth(tmp_path: Path) -> None:
    with served() as url:
        report = conformance(url, tmp_path)
    assert report["summary"]["verdict"] == "conformant", json.dumps(report["summary"])
    assert report["summary"]["SHOULD"]["failed"] == 0, json.dumps(report["summary"])


@pytest.mark.timeout(300)
def test_serve_is_conformant_with_a_key(tmp_path: Path) -> None:
    env = {"FABRIC_JEV_SERVE_KEY": "sk-serve-canary"}
    with served(env=env) as url:
        report = conformance(url, tmp_path, "--key-env", "FABRIC_JEV_SERVE_KEY", env=env)
        # Without the key the server says so in the spec's shape.
        resp = httpx.post(url + "/v1/systemone", json={})
    assert report["summary"]["verdict"] == "conformant", json.dumps(report["summary"])
    assert resp.status_code == 401 and resp.json()["detail"]["error_type"] == "authentication_error"


def test_official_sdk_reads_fixture_answers(tmp_path: Path) -> None:
    from typesafe_sdk import Noul, TypeSafeClient

    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps({"answers": {"refund": {"noul": 0.91}}}))
    with (served("--evaluator", f"fixture:{fixture}") as url,
          TypeSafeClient(api_key="unused", base_url=url) as client):
        result = client.system_one(state="refund please", questions={
            "refund": Noul(instructions="Refund?")}, model="jev-latest")
    assert result.answers["refund"].noul == pytest.approx(0.91)


def test_serve_answers_name_who_answered(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps({"answers": {"q": {"noul": 0.5}}, "model": "canned"}))
    with served("--evaluator", f"fixture:{fixture}") as url:
        body = httpx.post(url + "/v1/systemone",
                          json={**STATE_OK, "questions": {"q": {"type": "noul", "instructions": "?"}}}).json()
    # Extensions are prefixed x_, as the wire spec asks: x_provenance is what results elsewhere call evaluator.
    assert body["x_provenance"] == {"route": "fixture", "model": "canned", "readout": "fixture", "calibration": "none"}
    assert body["x_evaluator"] == "fixture" and "evaluator" not in body  # the older, route-only spelling stays


def test_serve_logs_one_access_line_per_request_on_stderr(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps({"answers": {"q": {"noul": 0.5}}}))
    key = "sk-serve-log-canary"
    log: list[str] = []
    with served("--evaluator", f"fixture:{fixture}", env={"FABRIC_JEV_SERVE_KEY": key}, log=log) as url:
        ok = httpx.post(url + "/v1/systemone", headers={"Authorization": f"Bearer {key}"},
                        json={**STATE_OK, "questions": {"q": {"type": "noul", "instructions": "?"}}})
        refused = httpx.get(url + "/v1/models?x=1")
    assert ok.status_code == 200 and refused.status_code == 401
    access = [line for line in log if '"POST /v1/systemone' in line or '"GET /v1/models' in line]
    assert len(access) == 2, log
    assert re.fullmatch(r'INFO: +127\.0\.0\.1:\d+ - "POST /v1/systemone HTTP/1\.1" 200( OK)?', access[0]), access
    assert re.fullmatch(r'INFO: +127\.0\.0\.1:\d+ - "GET /v1/models\?x=1 HTTP/1\.1" 401( Unauthorized)?',
                        access[1]), access
    assert not any(key in line for line in log)


@pytest.mark.parametrize("args", [("--log-level", "warning"), ("--no-access-log",)])
def test_serve_log_level_and_no_access_log_quiet_the_access_lines(args: tuple[str, ...]) -> None:
    log: list[str] = []
    with served(*args, log=log) as url:
        assert httpx.get(url + "/v1/models").status_code == 200
    assert not any("/v1/models" in line for line in log), log
    if args[0] == "--no-access-log":
        assert any("Shutting down" in line for line in log), log  # the rest of the log stays


def test_serve_refuses_an_unknown_log_level() -> None:
    done = subprocess.run([sys.executable, "-m", "fabric_jev.cli", "serve", "--log-level", "loud"],
                          capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert done.returncode == 2 and "invalid choice: 'loud'" in done.stderr


def test_validation_errors_and_unknown_models_have_the_spec_shape() -> None:
    with served() as url:
        bad = httpx.post(url + "/v1/systemone", json={"state": "x", "model": "jev-latest",
                                                       "questions": {"q": {"type": "text"}}})
        unknown = httpx.post(url + "/v1/systemone", json={"state": "x", "model": "nope",
                                                           "questions": {"q": {"type": "noul"}}})
        models = httpx.get(url + "/v1/models")
    assert bad.status_code == 422 and "choice, score and noul only" in bad.json()["detail"][0]["msg"]
    assert unknown.status_code == 400 and unknown.json()["detail"]["error_type"] == "api_usage_error"
    assert "jev-latest" in [m["name"] for m in models.json()["models"]]


# ---------------------------------------------------------------- limits, on a real uvicorn server

STATE_OK = {"state": "refund please", "model": "jev-latest",
            "questions": {"q": {"type": "noul", "instructions": "Refund?"}}}


def fixture() -> FixtureEvaluator:
    return FixtureEvaluator({"answers": {"q": {"noul": 0.5}}})


@contextmanager
def running(evaluator: Evaluator, limits: ServeLimits | None = None,
            key: str | None = None) -> Iterator[tuple[str, int]]:
    """`serve()` on 127.0.0.1:0 in a thread with its own event loop; yields (url, port)."""
    ports: queue.Queue[int] = queue.Queue()
    stop = threading.Event()

    async def main() -> None:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(serve, evaluator, port=0, key=key, limits=limits, ready=ports.put))
                await anyio.to_thread.run_sync(stop.wait)
                tg.cancel_scope.cancel()
        finally:
            await evaluator.aclose()  # on its own loop, as the CLI does

    thread = threading.Thread(target=anyio.run, args=(main,))
    thread.start()
    try:
        port = ports.get(timeout=30)
        yield f"http://127.0.0.1:{port}", port
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()


def raw_exchange(port: int, data: bytes) -> bytes:
    """Send raw bytes, read until the server closes or the response is complete."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        return read_response(s)


def read_response(s: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk
        head, sep, body = out.partition(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        if sep and length and len(body) >= int(length.group(1)):
            return out


def status_and_json(response: bytes) -> tuple[int, Any]:
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def closed_by_server(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_slow_loris_is_dropped_while_others_are_served() -> None:
    request = (b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"X-Padding: " + b"a" * 200 + b"\r\n\r\n")
    with running(fixture(), ServeLimits(header_timeout_s=0.3)) as (url, port):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        sent = 0
        with s:
            # One byte per readiness check: select() paces the trickle and notices the close.
            while sent < len(request):
                s.send(request[sent:sent + 1])
                sent += 1
                readable, _, _ = select.select([s], [], [], 0.05)
                if readable:
                    break
            assert sent < len(request), "the trickling client was never dropped"
            assert closed_by_server(s)
        assert httpx.post(url + "/v1/systemone", json=STATE_OK, timeout=30).status_code == 200


def test_a_connection_that_sends_nothing_is_dropped() -> None:
    with running(fixture(), ServeLimits(header_timeout_s=0.2)) as (_, port), \
            socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        assert closed_by_server(s)


def test_a_kept_alive_connection_is_closed_when_idle() -> None:
    body = json.dumps(STATE_OK).encode()
    with running(fixture(), ServeLimits(idle_timeout_s=0.2)) as (_, port), \
            socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
        assert status_and_json(read_response(s))[0] == 200
        assert closed_by_server(s)


def test_a_body_that_never_arrives_gets_408() -> None:
    with running(fixture(), ServeLimits(body_timeout_s=0.2)) as (_, port), \
            socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"state\"")
        status, payload = status_and_json(read_response(s))
        assert status == 408 and payload["detail"]["error_type"] == "request_timeout"
        assert closed_by_server(s)


def test_oversize_bodies_are_refused_with_413() -> None:
    limits = ServeLimits(max_body_bytes=1000)
    with running(fixture(), limits) as (url, port):
        # Declared too large: refused before a byte of the body is read.
        declared = raw_exchange(port, b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n")
        # Streamed without a length: refused once it passes the limit.
        chunk = b"x" * 600
        streamed = raw_exchange(port, b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                                + (b"258\r\n" + chunk + b"\r\n") * 3)
        ok = httpx.post(url + "/v1/systemone", json=STATE_OK, timeout=30)
    for response in (declared, streamed):
        status, payload = status_and_json(response)
        assert status == 413 and payload["detail"]["error_type"] == "request_too_large"
    assert ok.status_code == 200


def test_deep_json_bodies_are_422_and_the_server_keeps_serving() -> None:
    deep = b'{"state": ' + b"[" * 100_000 + b"]" * 100_000 + b', "questions": {}}'
    with running(fixture()) as (url, _):
        bad = httpx.post(url + "/v1/systemone", content=deep, timeout=30)
        bad_unicode = httpx.post(url + "/v1/systemone", content=b'{"state": "\xff"}', timeout=30)
        ok = httpx.post(url + "/v1/systemone", json=STATE_OK, timeout=30)
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["type"] == "json_invalid" and "nests deeper than" in bad.json()["detail"][0]["msg"]
    assert bad_unicode.status_code == 422 and "not UTF-8" in bad_unicode.json()["detail"][0]["msg"]
    assert ok.status_code == 200


def test_an_exception_inside_a_request_is_a_json_500_and_serving_goes_on() -> None:
    # A dependency with a bug: the server, not the evaluator, is under test.
    with running(ScriptedEvaluator(RuntimeError("bug holding sk-do-not-echo-0001"))) as (url, _):
        first = httpx.post(url + "/v1/systemone", json=STATE_OK, timeout=30)
        second = httpx.post(url + "/v1/systemone", json=STATE_OK, timeout=30)
        models = httpx.get(url + "/v1/models", timeout=30)
    for resp in (first, second):
        assert resp.status_code == 500 and resp.json()["detail"]["error_type"] == "internal_error"
        assert "sk-do-not-echo" not in resp.text
    assert models.status_code == 200


def receiving_request(port: int, auth: bytes = b"") -> socket.socket:
    """A connection whose headers were accepted and whose body never comes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n" + auth
              + b"Expect: 100-continue\r\n\r\n")
    # The server says "go on" when the app asks for the body: the headers were accepted.
    assert s.recv(100).startswith(b"HTTP/1.1 100 ")
    return s


class Held(ScriptedEvaluator):
    """Answers only once the test lets it: its requests stay being served until then."""

    def __init__(self) -> None:
        self.began = threading.Semaphore(0)
        self.release = threading.Event()

        async def hold(request: EvaluationRequest) -> dict[str, Any]:
            self.began.release()
            await anyio.to_thread.run_sync(self.release.wait)
            return {"q": {"noul": 0.5}}

        super().__init__(hold)


def test_a_newcomer_gets_a_json_503_only_when_every_connection_is_serving() -> None:
    evaluator = Held()
    body = json.dumps(STATE_OK).encode()
    request = (b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: "
               + str(len(body)).encode() + b"\r\n\r\n" + body)
    with running(evaluator, ServeLimits(max_connections=2)) as (url, port):
        held = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(2)]
        try:
            for s in held:
                s.sendall(request)
            for _ in held:
                assert evaluator.began.acquire(timeout=30)  # both requests are being judged
            # Nothing to shed: the third connection is refused.
            with socket.create_connection(("127.0.0.1", port), timeout=30) as third:
                status, payload = status_and_json(read_response(third))
            evaluator.release.set()
            answered = [status_and_json(read_response(s))[0] for s in held]
        finally:
            evaluator.release.set()
            for s in held:
                s.close()
        assert status == 503 and payload["detail"]["error_type"] == "overloaded"
        assert answered == [200, 200]
        assert httpx.get(url + "/v1/models", timeout=30).status_code == 200


def test_bodies_that_never_end_are_shed_for_a_real_client() -> None:
    with running(fixture(), ServeLimits(max_connections=2)) as (url, port):
        held = [receiving_request(port) for _ in range(2)]
        try:
            # Headers accepted, bodies never coming: they hold no place against a whole request.
            # The newcomer closes the oldest of them, which learns why.
            ok = httpx.post(url + "/v1/systemone", json=STATE_OK, timeout=30)
            status, payload = status_and_json(read_response(held[0]))
            assert closed_by_server(held[0])
        finally:
            for s in held:
                s.close()
    assert ok.status_code == 200
    assert status == 503 and payload["detail"]["error_type"] == "overloaded"


def test_a_request_without_the_key_is_refused_before_its_body_is_read() -> None:
    key = b"serve-key-0123456789"
    with running(fixture(), ServeLimits(max_connections=2), key=key.decode()) as (url, port):
        # Headers that promise a body which never comes: without the key, refused at once.
        refused = []
        for auth in (b"", b"Authorization: Bearer wrong\r\n"):
            with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                s.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n" + auth + b"\r\n")
                refused.append(status_and_json(read_response(s)))
                assert closed_by_server(s)
        with receiving_request(port, b"Authorization: Bearer " + key + b"\r\n"):  # the key: accepted
            ok = httpx.post(url + "/v1/systemone", json=STATE_OK, timeout=30,
                            headers={"Authorization": "Bearer " + key.decode()})
    assert [(status, p["detail"]["error_type"]) for status, p in refused] == [(401, "authentication_error")] * 2
    assert ok.status_code == 200


def test_idle_sockets_are_shed_for_a_real_client() -> None:
    with running(fixture(), ServeLimits(max_connections=4)) as (url, port):
        idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(4)]
        try:
            with httpx.Client(timeout=30) as a, httpx.Client(timeout=30) as b:
                # At the cap, each newcomer closes the oldest connection that has sent nothing,
                # before a kept-alive one (a's, between its requests).
                first = a.post(url + "/v1/systemone", json=STATE_OK)
                second = b.post(url + "/v1/systemone", json=STATE_OK)
            shed = [status_and_json(read_response(s)) for s in idle[:2]]
            assert all(closed_by_server(s) for s in idle[:2])
        finally:
            for s in idle:
                s.close()
    assert first.status_code == second.status_code == 200
    assert [(status, payload["detail"]["error_type"]) for status, payload in shed] == [(503, "overloaded")] * 2


def test_a_few_hundred_clients_at_once_are_all_served_by_default() -> None:
    body = json.dumps(STATE_OK).encode()
    request = (b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: "
               + str(len(body)).encode() + b"\r\n\r\n" + body)
    with served() as url:
        port = int(url.rsplit(":", 1)[1])
        # All 300 open at once before any request is sent: the cap counts them together.
        clients = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(300)]
        try:
            for s in clients:
                s.sendall(request)
            statuses = [status_and_json(read_response(s))[0] for s in clients]
        finally:
            for s in clients:
                s.close()
    assert statuses == [200] * 300


def server_end(client: socket.socket) -> socket.socket:
    """The server's socket of `client`'s connection (the server runs in this process)."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            s = socket.socket(fileno=os.dup(int(fd)))
        except OSError:
            continue
        try:
            if s.getpeername() == client.getsockname():
                return s
        except OSError:
            pass
        s.close()
    raise AssertionError("the server's end of the connection was not found")


def test_answers_leave_without_waiting_for_a_delayed_ack() -> None:
    body = json.dumps(STATE_OK).encode()
    with running(fixture()) as (_, port), socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
        assert status_and_json(read_response(s))[0] == 200
        with server_end(s) as end:
            # Head and body are two writes: with Nagle's algorithm on, the body waits ~40 ms for an ACK.
            assert end.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_a_body_in_300000_one_byte_chunks_is_served_while_others_are() -> None:
    body = json.dumps({**STATE_OK, "state": "x" * 299_900}).encode()
    chunked = b"".join(b"1\r\n" + body[i:i + 1] + b"\r\n" for i in range(len(body)))
    others_done = threading.Event()
    outcome: list[str] = []
    with served() as url:
        port = int(url.rsplit(":", 1)[1])

        def dribble() -> None:
            with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
                s.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                          + chunked)
                # The last chunk is held back until the others are answered, so the order is certain.
                assert others_done.wait(60)
                s.sendall(b"0\r\n\r\n")
                outcome.append(f"slow {status_and_json(read_response(s))[0]}")

        slow = threading.Thread(target=dribble)
        slow.start()
        try:
            with httpx.Client(timeout=60) as client:
                statuses = {client.post(url + "/v1/systemone", json=STATE_OK).status_code for _ in range(10)}
        finally:
            others_done.set()
            slow.join(60)
    assert statuses == {200}
    assert outcome == ["slow 200"]


def test_a_large_read_reaches_the_http_protocol_in_slices_one_per_loop_turn() -> None:
    """What keeps a 300,000-chunk body from holding other clients up, without timing anything:
    a read of 300 KB reaches the protocol behind the guard 4 KiB at a time, and the event loop
    runs other callbacks between two slices."""
    from fabric_jev.serve.guard import Connections, guarded

    turns = 0
    pieces: list[tuple[int, int]] = []  # (size, loop turns counted when it arrived)
    got_all = asyncio.Event()
    sent = 300_000

    class Recording(asyncio.Protocol):
        def __init__(self, **_: object) -> None:
            self.received = 0

        def data_received(self, data: bytes) -> None:
            pieces.append((len(data), turns))
            self.received += len(data)
            if self.received == sent:
                got_all.set()

    async def main() -> None:
        nonlocal turns
        loop = asyncio.get_running_loop()
        server = await loop.create_server(guarded(Recording, Connections(ServeLimits())), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"x" * sent)
        await writer.drain()
        while not got_all.is_set():
            turns += 1
            await asyncio.sleep(0)
        writer.close()
        server.close()
        await server.wait_closed()

    asyncio.run(asyncio.wait_for(main(), 60))
    assert sum(size for size, _ in pieces) == sent
    assert max(size for size, _ in pieces) <= 4096  # docs/evaluators.md: 4 KiB per loop turn
    seen = [turn for _, turn in pieces]
    assert seen == sorted(set(seen)), "two slices were handed on in the same loop turn"


def test_a_header_block_over_64_kib_is_400_even_in_one_piece() -> None:
    def request(padding: int) -> bytes:
        body = json.dumps(STATE_OK).encode()
        return (b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * padding
                + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    with running(fixture()) as (_, port):
        big = raw_exchange(port, request(70_000))
        fits = raw_exchange(port, request(60_000))
    assert int(big.split()[1]) == 400
    assert status_and_json(fits)[0] == 200


@pytest.mark.timeout(120)
def test_lone_surrogates_in_a_body_are_422_not_500() -> None:
    bodies = [b'{"state": "\\ud800", "questions": {"q": {"type": "noul", "instructions": "x"}}}',
              b'{"state": {"k": ["\\udfff"]}, "questions": {"q": {"type": "noul"}}}',
              b'{"state": "a", "questions": {"q": {"type": "choice", "instructions": "x", '
              b'"criteria": {"\\ud800": null, "b": "\\udc00"}}}}']
    paired = b'{"state": "\\ud83d\\ude00 and \\\\ud800 as text", "questions": {"q": {"type": "noul"}}}'
    with running(LocalEvaluator()) as (url, _):
        refused = [httpx.post(url + "/v1/systemone", content=b, timeout=100) for b in bodies]
        fine = httpx.post(url + "/v1/systemone", content=paired, timeout=100)
    for resp in refused:
        assert resp.status_code == 422, resp.text
        assert resp.json()["detail"][0]["type"] == "json_invalid"
        assert resp.json()["detail"][0]["msg"] == ("request body contains a lone surrogate (an unpaired "
                                                   "\\uD800-\\uDFFF escape), which is not Unicode text")
    assert fine.status_code == 200, fine.text


def test_model_is_optional() -> None:
    with running(fixture()) as (url, _):
        resp = httpx.post(url + "/v1/systemone", json={k: v for k, v in STATE_OK.items() if k != "model"},
                          timeout=30)
    assert resp.status_code == 200 and resp.json()["answers"]["q"]["noul"] == 0.5


class Announcing(LocalEvaluator):
    """The real local evaluator, telling the test when an evaluation has begun."""

    def __init__(self) -> None:
        super().__init__()
        self.began = threading.Event()

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        self.began.set()
        return await super().evaluate(request, timeout=timeout)


@pytest.mark.timeout(180)
def test_a_small_request_is_answered_while_a_large_one_is_judged() -> None:
    evaluator = Announcing()
    large_state = ("The customer was charged twice and wants the money back. " * 60_000)[:3_000_000]
    finished: list[str] = []

    def post(name: str, state: str, url: str) -> None:
        resp = httpx.post(url + "/v1/systemone", timeout=170,
                          json={**STATE_OK, "state": state})
        assert resp.status_code == 200, resp.text
        finished.append(name)

    with running(evaluator) as (url, _):
        large = threading.Thread(target=post, args=("large", large_state, url))
        large.start()
        assert evaluator.began.wait(120)
        post("small", "refund please", url)
        large.join(170)
    assert finished == ["small", "large"]


@pytest.mark.timeout(120)
def test_running_out_of_file_descriptors_on_accept_is_survived() -> None:
    script = (
        "import resource, os, anyio\n"
        "from fabric_jev import FixtureEvaluator\n"
        "from fabric_jev.serve import serve, announce\n"
        "def ready(port):\n"
        "    used = len(os.listdir('/proc/self/fd'))\n"
        "    resource.setrlimit(resource.RLIMIT_NOFILE, (used + 4, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
        "    announce(port)\n"
        "ev = FixtureEvaluator({'answers': {'q': {'noul': 0.5}}})\n"
        "anyio.run(lambda: serve(ev, ready=ready))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read()
        port = int(url.rsplit(":", 1)[1])
        lines: queue.Queue[str] = queue.Queue()
        stderr = proc.stderr
        drain = threading.Thread(target=lambda: [lines.put(line) for line in stderr], daemon=True)
        drain.start()
        held = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(16)]
        line = lines.get(timeout=60)  # the server says it ran out, in one line
        assert "out of system resource" in line and "Traceback" not in line
        for s in held:
            s.close()
        resp = httpx.post(url + "/v1/systemone", json=STATE_OK, timeout=60)
        assert resp.status_code == 200
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def test_serve_on_a_busy_or_impossible_port_says_so_in_one_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        runs = [subprocess.run([sys.executable, "-m", "fabric_jev.cli", "serve", "--port", str(port)],
                               capture_output=True, text=True, cwd=ROOT, timeout=60)
                for port in (taken, 99999)]
    for done, needle in zip(runs, ("already in use", "port must be 0-65535"), strict=True):
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and needle in done.stderr, done.stderr


def test_a_deep_upstream_answer_is_a_502_and_serving_goes_on() -> None:
    from fabric_jev.evaluators import TYPESAFE, CredentialResolver, HttpEvaluator
    from tests.upstream import Front, Recorded, front

    def deep(rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "application/json"}, b'{"answers": ' + b"[" * 300_000 + b"]" * 300_000 + b"}"

    environ = {TYPESAFE.env_keys[0]: "sk-serve-upstream-0001"}
    with front(Front(answer=deep)) as f:
        route = HttpEvaluator(TYPESAFE, base_urls={TYPESAFE.name: f.url}, environ=environ,
                              credentials=CredentialResolver(TYPESAFE, environ=environ))
        with running(route) as (url, _):
            first = httpx.post(url + "/v1/systemone", json=STATE_OK, timeout=30)
            models = httpx.get(url + "/v1/models", timeout=30)
    assert first.status_code == 502 and "nests deeper than" in first.json()["detail"]["message"]
    assert models.status_code == 200


@pytest.mark.parametrize("codings", [("gzip",), ("gzip", "gzip")])
def test_a_gzip_bomb_from_the_upstream_is_a_502_in_a_few_mib_and_serving_goes_on(codings: tuple[str, ...]) -> None:
    """Issue 39: serve's upstream answers 199 KiB of gzip that inflate to 200 MiB (or that gzipped
    again). The route refuses it within a step of its 1 MiB cap: the process's traced peak, the
    uvicorn thread's and the route's together, grows by a few MiB, not the 130 it did."""
    import tracemalloc

    from fabric_jev.evaluators import TYPESAFE, CredentialResolver, HttpEvaluator
    from tests.body_bombs import MiB, double_gzip_bomb, gzip_bomb
    from tests.upstream import Front, Recorded, front

    data = gzip_bomb() if codings == ("gzip",) else double_gzip_bomb()

    def bomb(rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "application/json", "Content-Encoding": ", ".join(codings)}, data

    environ = {TYPESAFE.env_keys[0]: "sk-serve-upstream-0002"}
    with front(Front(answer=bomb)) as f:
        route = HttpEvaluator(TYPESAFE, base_urls={TYPESAFE.name: f.url}, environ=environ,
                              credentials=CredentialResolver(TYPESAFE, environ=environ))
        with running(route) as (url, _), httpx.Client(timeout=30) as client:
            client.get(url + "/v1/models")  # the connection and the server's first request, before measuring
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                first = client.post(url + "/v1/systemone", json=STATE_OK)
                growth = tracemalloc.get_traced_memory()[1] - before
            finally:
                tracemalloc.stop()
            models = client.get(url + "/v1/models")
    assert growth < 4 * MiB, f"{growth / MiB:.1f} MiB"
    assert first.status_code == 502
    assert first.json()["detail"] == {"error_type": "evaluator_error",
                                      "message": "evaluator response exceeds 1 MiB once decompressed"}
    assert models.status_code == 200


def test_a_long_served_fixture_keeps_only_its_latest_requests() -> None:
    from fabric_jev.evaluators.fixture import KEPT_REQUESTS

    evaluator = fixture()
    body = json.dumps(STATE_OK).encode()
    request = (b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: "
               + str(len(body)).encode() + b"\r\n\r\n" + body)
    total = KEPT_REQUESTS + 50
    with running(evaluator) as (_, port), socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        # Pipelined on one connection: every request is answered, and the evaluator's memory of
        # them stops growing at its bound (a server with a fixture runs for days).
        s.sendall(request * total)
        answered = 0
        data = b""
        while answered < total:
            chunk = s.recv(1 << 20)
            assert chunk, "the server closed the connection"
            data += chunk
            answered = data.count(b"HTTP/1.1 200 ")
    assert evaluator.calls == total
    assert len(evaluator.requests) == KEPT_REQUESTS
    assert evaluator.requests[-1].state == STATE_OK["state"]


def test_what_is_not_readable_http_gets_the_parsers_plain_400() -> None:
    # As docs/evaluators.md says: the one answer that is not JSON, from uvicorn's HTTP parser.
    with running(fixture()) as (url, port):
        answers = [raw_exchange(port, b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Length: " + length
                                + b"\r\n\r\n") for length in (b"-1", b"+5", b"5, 6")]
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nX-Padding: ")
            for _ in range(70):  # 70 KiB of one header, a read at a time
                try:
                    s.sendall(b"a" * 1024)
                except (BrokenPipeError, ConnectionResetError):
                    break  # refused and closed: the answer is already in
                readable, _, _ = select.select([s], [], [], 0)
                if readable:
                    break
            pieces = read_response(s)
        ok = httpx.post(url + "/v1/systemone", json=STATE_OK, timeout=30)
    for answer in (*answers, pieces):
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 ") and b"text/plain" in head and b"close" in head.lower()
        assert b"Invalid HTTP request received." in body
    assert ok.status_code == 200


# ---------------------------------------------------------------- churn and the reserve (issue 33)


def keyed_request(key: bytes, scheme: bytes = b"Bearer") -> bytes:
    body = json.dumps(STATE_OK).encode()
    return (b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nAuthorization: " + scheme + b" " + key
            + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


@pytest.mark.anyio
async def test_a_request_head_waiting_unread_is_not_shed_for_a_burst_of_newcomers() -> None:
    """Under churn, connections are accepted in bursts and read later: a real client's
    connection is "fresh" with its whole request waiting in the socket while hundreds of
    one-byte connections arrive. It is kept in reserve; the one-byte ones are shed.

    The clients connect while the server's loop cannot run (this test runs on that loop and
    blocks it), so every accept of the burst happens before any read, every time."""
    key = b"churn-key-0123456789"
    ports: list[int] = []
    ready = anyio.Event()

    def on_ready(port: int) -> None:
        ports.append(port)
        ready.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(serve, fixture(), key=key.decode(), limits=ServeLimits(max_connections=4),
                              ready=on_ready))
        await ready.wait()
        port = ports[0]

        def one_byte() -> socket.socket:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(b"P")
            return s

        # Blocking calls on the loop's own thread: nothing of the server runs until the await below.
        before = [one_byte() for _ in range(3)]
        client = socket.create_connection(("127.0.0.1", port), timeout=30)
        client.sendall(keyed_request(key))
        after = [one_byte() for _ in range(12)]
        try:
            status, payload = await anyio.to_thread.run_sync(lambda: status_and_json(read_response(client)))
            # Shedding happened as the burst was admitted, before the request was served: by now
            # each shed connection has its 503 and its close waiting to be read.
            readable, _, _ = select.select(before + after, [], [], 0)
            answers = [status_and_json(read_response(s)) for s in readable]
        finally:
            for s in [client, *before, *after]:
                s.close()
        tg.cancel_scope.cancel()
    assert status == 200 and payload["answers"]["q"]["noul"] == 0.5
    # 16 connections for 4 places: the client's and three one-byte ones stay.
    assert len(answers) == 12
    assert {(code, p["detail"]["error_type"]) for code, p in answers} == {(503, "overloaded")}


def test_the_bearer_scheme_is_case_insensitive() -> None:
    key = b"case-key-0123456789"
    with running(fixture(), key=key.decode()) as (_, port):
        answers = [status_and_json(raw_exchange(port, keyed_request(key, scheme)))[0]
                   for scheme in (b"Bearer", b"bearer", b"BEARER", b"bEaReR")]
        wrong = status_and_json(raw_exchange(port, keyed_request(key, b"Basic")))
    assert answers == [200] * 4
    assert wrong[0] == 401
