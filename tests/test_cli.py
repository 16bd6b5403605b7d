from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import program

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, stdin: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabric_jev.cli", *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def write(tmp: Path, name: str, value: Any) -> str:
    path = tmp / name
    path.write_text(json.dumps(value))
    return str(path)


def test_run_prints_the_envelope_and_exits_0(tmp_path: Path) -> None:
    prog = write(tmp_path, "p.json", program(
        "await program.emit({step: 1}); return input.n * 2", inputSchema={"type": "object"}))
    done = cli("run", prog, "--input", write(tmp_path, "i.json", {"n": 21}))
    assert done.returncode == 0, done.stderr
    env = json.loads(done.stdout)
    assert env["state"] == "completed" and env["result"] == 42
    assert '[1] {"step": 1}' in done.stderr


def test_input_from_stdin(tmp_path: Path) -> None:
    done = cli("run", write(tmp_path, "p.json", program("return input")), "--input", "-",
               stdin='"hello"')
    assert json.loads(done.stdout)["result"] == "hello"


def test_failed_run_exits_1(tmp_path: Path) -> None:
    done = cli("run", write(tmp_path, "p.json", program("throw new Error('nope')")))
    assert done.returncode == 1
    assert json.loads(done.stdout)["error"] == "Error: nope (line 1, column 11)"


def test_rejected_launch_exits_2_with_the_reason(tmp_path: Path) -> None:
    done = cli("run", write(tmp_path, "p.json", program("return 1 +")))
    assert done.returncode == 2 and done.stdout == ""
    assert "launch rejected: Jev program does not compile" in done.stderr
    done = cli("run", str(tmp_path / "missing.json"))
    assert done.returncode == 2 and "cannot read program" in done.stderr


def test_config_file_is_applied(tmp_path: Path) -> None:
    config = write(tmp_path, "c.json", {"ceilings": {"timeoutMs": 200}})
    prog = write(tmp_path, "p.json", program("for (;;) await program.sleep(50);"))
    done = cli("run", prog, "--config", config)
    assert done.returncode == 1
    assert json.loads(done.stdout)["state"] == "timed_out"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_prints_the_cancelled_envelope(tmp_path: Path, sig: signal.Signals) -> None:
    prog = write(tmp_path, "p.json", program(
        "await program.emit('started'); for (;;) await program.sleep(20);"))
    proc = subprocess.Popen([sys.executable, "-m", "fabric_jev.cli", "run", prog],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stderr is not None
    line = proc.stderr.readline()  # the first progress event proves the run is going
    assert "started" in line
    os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1, err
    assert json.loads(out)["state"] == "cancelled"


@pytest.mark.parametrize(("given", "expected"), [(None, "1"), ("2", "2")])
def test_commands_use_one_blas_thread_unless_the_user_chose(monkeypatch: pytest.MonkeyPatch,
                                                             given: str | None, expected: str) -> None:
    """numpy reads OPENBLAS_NUM_THREADS when it loads; a command sets it before anything loads numpy."""
    from fabric_jev.cli import main

    if given is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", given)
    with pytest.raises(SystemExit):
        main(["--help"])
    assert os.environ["OPENBLAS_NUM_THREADS"] == expected
