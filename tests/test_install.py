"""A library install that works: the wheel, in a fresh venv outside the checkout, plus the one
documented model step, runs an example to `completed` with the local evaluator.

Only the package index is reached (pip's cache makes re-runs quick); nothing of the
checkout is on the new venv's path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "ticket-triage"


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(argv)}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.mark.timeout(1500)
def test_wheel_in_a_fresh_venv_runs_an_example_with_the_local_model(tmp_path: Path) -> None:
    # The child sees none of this process's paths (PYTHONPATH points into the checkout).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(ROOT)], tmp_path, env)
    [wheel] = dist.glob("fabric_jev-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE") for n in names)
    assert "fabric_jev/runtime_js/prelude.js" in names

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    py, cli = venv / "bin" / "python", venv / "bin" / "fabric-jev"
    _run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)], tmp_path, env)

    # Before the model step: the library says exactly what is missing and how to fix it.
    status = json.loads(_run([str(cli), "status", "--json"], tmp_path, env).stdout)
    assert status["ready"] is False and status["problem"].endswith("fabric-jev setup local-model")
    browser = subprocess.run([str(cli), "browser", "launch"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120)
    assert browser.returncode == 2 and "pip install 'fabric-jev[browser]'" in browser.stderr

    _run([str(cli), "setup", "local-model"], tmp_path, env)
    assert json.loads(_run([str(cli), "status", "--json"], tmp_path, env).stdout)["ready"] is True
    done = _run([str(cli), "run", str(EXAMPLE / "program.json"), "--input", str(EXAMPLE / "input.json")],
                tmp_path, env)
    envelope = json.loads(done.stdout)
    assert envelope["state"] == "completed", envelope
    where = _run([str(py), "-c", "import fabric_jev; print(fabric_jev.__file__)"], tmp_path, env).stdout
    assert where.startswith(str(venv)), where  # the installed wheel ran, not the checkout
