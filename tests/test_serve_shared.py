"""`fabric-jev serve` as a shared host: bearer tokens beyond loopback, TLS, per-client limits.

Real processes and sockets on 127.0.0.1 (a server bound to 0.0.0.0 is reached through 127.0.0.1).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from fabric_jev.contract.evaluation import EvaluationRequest
from fabric_jev.serve import ServeLimits, serve
from fabric_jev.testing import ScriptedEvaluator

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "tok-shared-host-canary-0123456789"
OTHER = "tok-second-client-canary-98765432"
QUESTION = {"state": {"ticket": "refund please"}, "questions": {"q": {"type": "noul", "instructions": "?"}}}


def token_file(tmp: Path, token: str = TOKEN, name: str = "token") -> Path:
    path = tmp / name
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def fixture(tmp: Path) -> Path:
    path = tmp / "fixture.json"
    path.write_text('{"answers": {"q": {"noul": 0.5}}}')
    return path


@contextmanager
def served(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`fabric-jev serve --port 0 ARGS`; yields the base URL it printed, with 127.0.0.1 for 0.0.0.0."""
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen([sys.executable, "-m", "fabric_jev.cli", "serve", "--port", "0",
                                 "--no-access-log", *args],
                                stdout=subprocess.PIPE, stderr=errors, text=True, cwd=ROOT,
                                env={**os.environ, **(env or {})})
        assert proc.stdout is not None
        try:
            url = proc.stdout.readline().strip()
            if "://" not in url:
                proc.wait(20)
                errors.seek(0)
                raise AssertionError(errors.read())
            yield url.replace("0.0.0.0", "127.0.0.1")
        finally:
            proc.terminate()
            proc.communicate(timeout=20)
        errors.seek(0)
        assert TOKEN not in errors.read()


def test_a_missing_or_wrong_token_gets_the_same_401(tmp_path: Path) -> None:
    with served("--token-file", str(token_file(tmp_path)), "--evaluator", f"fixture:{fixture(tmp_path)}") as url:
        refused = [
            httpx.post(url + "/v1/systemone", json=QUESTION),
            httpx.post(url + "/v1/systemone", json=QUESTION, headers={"Authorization": "Bearer " + TOKEN[:-1] + "x"}),
            httpx.post(url + "/v1/systemone", json=QUESTION, headers={"Authorization": "Basic " + TOKEN}),
            httpx.get(url + "/v1/models", headers={"Authorization": "Bearer"}),
            # Two credentials, one of them right, in either order: the per-client limit and the
            # key check must not read different ones, so the request carries none.
            httpx.post(url + "/v1/systemone", json=QUESTION,
                       headers=[("Authorization", "Bearer wrong-0123456789abcdef"), ("Authorization", "Bearer " + TOKEN)]),
            httpx.post(url + "/v1/systemone", json=QUESTION,
                       headers=[("Authorization", "Bearer " + TOKEN), ("Authorization", "Bearer wrong-0123456789abcdef")]),
        ]
        ok = httpx.post(url + "/v1/systemone", json=QUESTION, headers={"Authorization": "bearer " + TOKEN})
    assert [r.status_code for r in refused] == [401] * 6
    # One body whatever was wrong, in the spec's error shape: nothing tells a guesser what to change.
    assert len({r.content for r in refused}) == 1
    assert refused[0].json()["detail"]["error_type"] == "authentication_error"
    assert TOKEN not in refused[0].text
    assert ok.status_code == 200 and ok.json()["answers"]["q"]["noul"] == pytest.approx(0.5)


@pytest.mark.parametrize("env", [{}, {"FABRIC_JEV_SERVE_KEY": TOKEN}])
def test_beyond_loopback_without_a_token_file_is_refused(env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "fabric_jev.cli", "serve", "--host", "0.0.0.0", "--port", "0"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, env={**os.environ, **env})
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "--token-file" in lines[0] and "0.0.0.0" in lines[0], done.stderr
    assert TOKEN not in done.stderr


def test_a_token_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = token_file(tmp_path)
    path.chmod(0o644)
    done = subprocess.run([sys.executable, "-m", "fabric_jev.cli", "serve", "--host", "0.0.0.0", "--port", "0",
                           "--token-file", str(path)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 2 and "chmod 600" in done.stderr and TOKEN not in done.stderr


def test_bound_to_every_address_with_two_tokens(tmp_path: Path) -> None:
    first, second = token_file(tmp_path), token_file(tmp_path, OTHER, "other")
    with served("--host", "0.0.0.0", "--token-file", str(first), "--token-file", str(second)) as url:
        codes = [httpx.get(url + "/v1/models", headers={"Authorization": f"Bearer {t}"}).status_code
                 for t in (TOKEN, OTHER, "tok-neither-of-them-00000000")]
    assert codes == [200, 200, 401]


def self_signed(tmp: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fabric-jev test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.BestAvailableEncryption(b"pass-canary")))
    return cert_path, key_path


def test_tls_with_a_self_signed_certificate(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    password = tmp_path / "password"
    password.write_text("pass-canary\n")
    trust = ssl.create_default_context(cafile=str(cert))
    with served("--ssl-certfile", str(cert), "--ssl-keyfile", str(key), "--ssl-keyfile-password-file", str(password),
                "--token-file", str(token_file(tmp_path))) as url:
        assert url.startswith("https://127.0.0.1:")
        with httpx.Client(verify=trust) as client:
            ok = client.get(url + "/v1/models", headers={"Authorization": f"Bearer {TOKEN}"})
            refused = client.get(url + "/v1/models")
        with pytest.raises(httpx.ConnectError):  # an untrusting client does not get through
            httpx.get(url + "/v1/models")
    assert ok.status_code == 200 and refused.status_code == 401


def test_a_wrong_key_password_is_one_line(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    password = tmp_path / "password"
    password.write_text("not-the-password\n")
    done = subprocess.run([sys.executable, "-m", "fabric_jev.cli", "serve", "--port", "0", "--ssl-certfile", str(cert),
                           "--ssl-keyfile", str(key), "--ssl-keyfile-password-file", str(password)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "cannot load the TLS certificate" in done.stderr and "not-the-password" not in done.stderr


@pytest.mark.anyio
async def test_two_floods_do_not_starve_a_third(tmp_path: Path) -> None:
    """Clients A and B each fill their share with requests the evaluator holds; their next ones
    are refused 429 at once, while client C's are answered."""
    release = anyio.Event()
    held = 0
    all_held = anyio.Event()

    async def reply(request: EvaluationRequest) -> dict[str, Any]:
        nonlocal held
        if request.state != {"ticket": "C"}:
            held += 1
            if held == 4:
                all_held.set()
            await release.wait()
        return {"q": {"noul": 0.5}}

    port: list[int] = []
    started = anyio.Event()

    def ready(p: int) -> None:
        port.append(p)
        started.set()

    tokens = {name: f"tok-client-{name}-0123456789abcdef" for name in "ABC"}
    limits = ServeLimits(max_evaluations=8)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(ScriptedEvaluator(reply), key=list(tokens.values()), ready=ready,
                                    limits=limits, client_requests=2))
        await started.wait()
        url = f"http://127.0.0.1:{port[0]}/v1/systemone"
        answers: dict[str, list[int]] = {"A": [], "B": [], "C": []}
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=64)) as client:
            async def ask(name: str) -> None:
                resp = await client.post(url, headers={"Authorization": f"Bearer {tokens[name]}"},
                                         json={**QUESTION, "state": {"ticket": name}})
                answers[name].append(resp.status_code)
                if resp.status_code == 429:
                    assert resp.headers["retry-after"] == "1"
                    assert resp.json()["detail"]["error_type"] == "rate_limit_error"

            async with anyio.create_task_group() as floods:
                for name in "ABAB":
                    floods.start_soon(ask, name)
                await all_held.wait()  # both floods fill their share
                for name in "ABABAB":
                    await ask(name)
                for _ in range(5):
                    await ask("C")
                # While A's and B's first requests are still held, theirs are refused and C's answered.
                assert held == 4 and not release.is_set()
                release.set()
        tg.cancel_scope.cancel()
    assert answers["C"] == [200] * 5
    assert sorted(answers["A"]) == sorted(answers["B"]) == [200, 200, 429, 429, 429]


JEVCOMPAT = Path(sys.executable).with_name("jevcompat")


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`, less multiprocessing's resource tracker."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(text.rsplit(")", 1)[1].split()[1]) == pid and b"resource_tracker" not in cmdline:
            found.append(int(stat.parent.name))
    return found


def ended(pids: list[int], timeout: float = 30) -> bool:
    """Whether every process of `pids` ends within `timeout` (pidfds: woken by the exits, no polling)."""
    import select

    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            continue  # already gone
    try:
        waiting = set(fds)
        while waiting:
            readable, _, _ = select.select(list(waiting), [], [], timeout)
            if not readable:
                return False
            waiting -= set(readable)
        return True
    finally:
        for fd in fds:
            os.close(fd)


@contextmanager
def workers(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen([sys.executable, "-m", "fabric_jev.cli", "serve", "--port", "0", "--no-access-log",
                             "--workers", "2", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, cwd=ROOT)
    assert proc.stdout is not None
    try:
        url = proc.stdout.readline().strip().replace("0.0.0.0", "127.0.0.1")
        assert url.startswith("http://127.0.0.1:"), url
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


@pytest.mark.timeout(300)
def test_two_workers_are_conformant(tmp_path: Path) -> None:
    import json

    path = token_file(tmp_path)
    env = {**os.environ, "SHARED_TOKEN": TOKEN}
    with workers("--host", "0.0.0.0", "--token-file", str(path)) as (proc, url):
        assert len(children(proc.pid)) == 2
        report = tmp_path / "report.json"
        done = subprocess.run([str(JEVCOMPAT), "test", url, "--json", str(report), "--key-env", "SHARED_TOKEN"],
                              capture_output=True, text=True, timeout=300, env=env)
    summary = json.loads(report.read_text())["summary"]
    assert done.returncode == 0, done.stdout[-3000:]
    assert summary["verdict"] == "conformant", json.dumps(summary)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGKILL"])
def test_no_worker_is_left_behind(how: str) -> None:
    import signal

    with workers() as (proc, url):
        pids = children(proc.pid)
        assert len(pids) == 2
        assert httpx.get(url + "/v1/models").status_code == 200
        proc.send_signal(getattr(signal, how))
        # SIGTERM and SIGINT: the parent stops its workers and ends 0; SIGKILL: they see it gone.
        assert proc.wait(30) == (-9 if how == "SIGKILL" else 0)
        assert ended(pids), [p for p in pids if Path(f"/proc/{p}").exists()]
