"""`fabric-jev serve` checked by the jevcompat conformance suite and the official SDK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
JEVCOMPAT = Path(sys.executable).with_name("jevcompat")


@contextmanager
def served(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "fabric_jev.cli", "serve", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, **(env or {})})
    assert proc.stdout is not None
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else ""
        yield url
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


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
