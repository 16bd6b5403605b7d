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
    assert "fabric_jev/runtime_js/prelude.js" in names and "fabric_jev/runtime_js/jev.d.ts" in names
    rules = "fabric_jev/redaction/secret_rules/"  # the vendor rule sets are data, with their licences
    assert {f"{rules}{n}" for n in ("gitleaks.toml", "kingfisher.toml", "LICENSE.gitleaks", "LICENSE.kingfisher")} <= set(names)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    py, cli = venv / "bin" / "python", venv / "bin" / "fabric-jev"
    _run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)], tmp_path, env)

    # Before the model step: the library says exactly what is missing and how to fix it.
    before = subprocess.run([str(cli), "status", "--json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120)
    assert before.returncode == 1  # the chosen route (local) is not ready
    status = json.loads(before.stdout)
    assert status["ready"] is False and status["problem"].endswith("fabric-jev setup local-model")
    browser = subprocess.run([str(cli), "browser", "launch"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120)
    assert browser.returncode == 2 and "pip install --find-links DIR 'fabric-jev[browser]'" in browser.stderr

    _run([str(cli), "setup", "local-model"], tmp_path, env)
    assert json.loads(_run([str(cli), "status", "--json"], tmp_path, env).stdout)["ready"] is True
    done = _run([str(cli), "run", str(EXAMPLE / "program.json"), "--input", str(EXAMPLE / "input.json")],
                tmp_path, env)
    envelope = json.loads(done.stdout)
    assert envelope["state"] == "completed", envelope
    # The guest API's declarations are read from the installed package.
    declarations = _run([str(cli), "types", str(EXAMPLE / "program.json")], tmp_path, env).stdout
    assert "interface JevProgramCore {" in declarations and "\ntype JevInput = " in declarations
    # The installed rule sets are read: a vendor token (gitleaks' Hugging Face rule) is named by its kind.
    token = "hf_" + "a" * 34
    redacted = _run([str(py), "-c", "import sys; from fabric_jev.redaction import redact_text; "
                     "print(redact_text(sys.argv[1]))", token], tmp_path, env).stdout
    assert token not in redacted and "huggingface access token" in redacted, redacted
    where = _run([str(py), "-c", "import fabric_jev; print(fabric_jev.__file__)"], tmp_path, env).stdout
    assert where.startswith(str(venv)), where  # the installed wheel ran, not the checkout


@pytest.mark.browser
@pytest.mark.timeout(1500)
def test_the_wheelhouse_installs_fabric_jev_with_the_browser_extra(tmp_path: Path) -> None:
    """The documented command builds both distributions; `pip install --find-links DIR
    'fabric-jev[browser]'` then works in a fresh venv, and the connector replays a plan in a
    Chromium it launches itself."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    house = tmp_path / "wheelhouse"
    built = _run([str(ROOT / "scripts" / "wheelhouse"), str(house)], tmp_path, env).stdout.split()
    assert sorted(Path(p).name for p in built) == ["fabric_jev-0.1.0-py3-none-any.whl",
                                                   "fabric_jev_browser-0.1.0-py3-none-any.whl"]
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    py, cli = venv / "bin" / "python", venv / "bin" / "fabric-jev"
    _run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--find-links", str(house),
          "fabric-jev[browser]"], tmp_path, env)
    where = _run([str(py), "-c", "import fabric_jev_browser; print(fabric_jev_browser.__file__)"], tmp_path, env)
    assert where.stdout.startswith(str(venv)), where.stdout
    verify = ROOT / "examples" / "verify"
    done = _run([str(cli), "verify", "run", str(verify / "dictionary.json"), "--plan", str(verify / "plan.json"),
                 "--url", (verify / "page.html").as_uri(), "--launch"], tmp_path, env)
    assert json.loads(done.stdout)["status"] == "passed"


def test_every_extra_is_listed_where_a_library_user_looks() -> None:
    import tomllib

    import fabric_jev

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    extras.discard("test")  # the project's own test tools, not a feature
    readme = (ROOT / "README.md").read_text()
    for name in sorted(extras):
        assert f"| `{name}` |" in readme, f"the README's extras table lacks {name}"
        assert f"``{name}``" in (fabric_jev.__doc__ or ""), f"help(fabric_jev) lacks the {name} extra"
    assert "./scripts/wheelhouse" in readme and "pip install --find-links" in readme
