from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.upstream import mock

ROOT = Path(__file__).resolve().parent.parent
REQUEST = {"state": "I was charged twice, refund me", "questions": {
    "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"}}}


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabric_jev.cli", *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env={**os.environ, **(env or {})})


def test_evaluate_prints_validated_answers_with_the_local_evaluator(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(REQUEST))
    done = cli("evaluate", str(path))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["answers"]["refund"]["type"] == "noul" and "heuristic" in out["model"]


def test_evaluate_through_a_route_to_a_loopback_server(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(REQUEST))
    with mock(key="sk-cli") as upstream:
        done = cli("evaluate", str(path), "--evaluator", "typesafe",
                   env={"FABRIC_JEV_TYPESAFE_BASE_URL": upstream, "TYPESAFE_API_KEY": "sk-cli",
                        "FABRIC_JEV_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["model"] == "jevcompat-mock-0.1"


def test_evaluate_refuses_an_invalid_request(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"state": "x", "questions": {"q": {"type": "text", "instructions": "?"}}}))
    done = cli("evaluate", str(path))
    assert done.returncode == 2 and "choice, score and noul only" in done.stderr


def test_status_reports_presence_only(tmp_path: Path) -> None:
    env = {"FABRIC_JEV_HOME": str(tmp_path), "TYPESAFE_API_KEY": "sk-status-canary"}
    done = cli("status", "--evaluator", "typesafe", "--json", env=env)
    status = json.loads(done.stdout)
    assert status["credentials"] == {"configured": True, "source": "environment", "verified": False}
    assert status["route"] == "typesafe" and "sk-status-canary" not in done.stdout
    local = json.loads(cli("status", "--json").stdout)
    assert local["route"] == "local"
    # The offline evaluator needs no key: none is "missing".
    assert local["credentials"] == {"configured": False, "source": "not needed", "verified": False}
