"""`launch: true` (and `fabric-jev run --launch-browser`): a headless Chromium started for the
host at the first browser.connect and ended with it — after the run, also a run that failed or
was interrupted — so the browser-click example runs as its README says, with no wsUrl to edit."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fabric_jev_browser import BrowserConnector

from fabric_jev import JevHost, RunState
from tests.browser_support import Pages, terminate_with_parent
from tests.conftest import live_processes, program

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "browser-click"
CONNECTS = ("await tools.call({ref: 'browser.connect'});"
            " const v = await tools.call({ref: 'browser.cdp', args: {method: 'Browser.getVersion'}});"
            " await program.emit('connected');")


def browsers_under(folder: Path) -> dict[int, int]:
    """pid -> process group of every live process whose command line names `folder` (the
    launched Chromium's profile lives there: its processes, and nobody else's, name it)."""
    found = {}
    live = live_processes()
    for pid, (_, group) in live.items():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read()
        except OSError:
            continue
        if str(folder).encode() in argv:
            found[pid] = group
    return found


def assert_nothing_left(folder: Path) -> None:
    """No process of a browser launched under `folder` is alive, and its profile is deleted. A
    helper killed with its group may take a moment to die: each is waited for on its pidfd."""
    for pid in browsers_under(folder):
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            readable, _, _ = select.select([fd], [], [], 10)
        finally:
            os.close(fd)
        assert readable, f"browser process {pid} outlived the run"
    assert list(folder.iterdir()) == [], "the browser's profile folder was not deleted"


@pytest.fixture
def temp() -> Iterator[Path]:
    """The command's TMPDIR: the launched browser's profile (and so its command line) lands in
    this test's own folder. A short one: a deep TMPDIR would send the profile to /tmp (its
    socket path must fit 107 bytes; tests/test_browser_launcher.py)."""
    folder = Path(tempfile.mkdtemp(prefix="fjl-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def cli(tmp_path: Path, temp: Path, *args: str) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "TMPDIR": str(temp), "FABRIC_JEV_HOME": str(tmp_path / "home")}
    return [sys.executable, "-m", "fabric_jev.cli", "run", *args], env


def test_the_browser_click_example_runs_as_its_readme_says(pages: Pages, tmp_path: Path, temp: Path) -> None:
    # The README's command with the example's own config (launch: true): nothing to edit. Here
    # --allow browser.cdp answers the question a person would answer on a terminal.
    url = pages.add("/terms.html", (EXAMPLE / "terms.html").read_text())
    (tmp_path / "input.json").write_text(json.dumps({**json.loads((EXAMPLE / "input.json").read_text()),
                                                     "url": url}))
    argv, env = cli(tmp_path, temp, str(EXAMPLE / "program.json"), "--input", str(tmp_path / "input.json"),
                    "--config", str(EXAMPLE / "config.json"),
                    "--evaluator", f"fixture:{EXAMPLE / 'fixture.json'}",
                    "--intent", "Accept the terms of service on the page", "--allow", "browser.cdp")
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, preexec_fn=terminate_with_parent)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["result"]
    assert result == {"clicked": "Accept", "before": "Pending", "after": "Accepted", "verified": True,
                      "confidence": 0.92, "reason": None}
    assert_nothing_left(temp)


def write_program(tmp_path: Path, code: str) -> Path:
    path = tmp_path / "program.json"
    path.write_text(json.dumps(program(code, requires=["browser.connect", "browser.cdp"])))
    return path


def config_with(tmp_path: Path, browser: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"approvals": {"execute": "allow"}, "connectors": {"browser": {
        "allowedMethods": ["Browser.getVersion"], **browser}}}))
    return path


def test_launch_browser_replaces_the_configured_ws_url_and_a_failed_run_leaves_nothing(tmp_path: Path,
                                                                                      temp: Path) -> None:
    # The config names a browser that is not there; --launch-browser starts one instead.
    config = config_with(tmp_path, {"wsUrl": "ws://127.0.0.1:9/devtools/browser/none"})
    argv, env = cli(tmp_path, temp, str(write_program(tmp_path, CONNECTS + " throw new Error('boom');")),
                    "--config", str(config), "--launch-browser")
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, preexec_fn=terminate_with_parent)
    assert done.returncode == 1, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["state"] == "failed" and "boom" in envelope["error"]
    assert [e["value"] for e in envelope["events"]] == ["connected"]  # it did reach the launched browser
    assert_nothing_left(temp)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_ends_its_browser(tmp_path: Path, temp: Path, sig: signal.Signals) -> None:
    config = config_with(tmp_path, {"launch": True})
    argv, env = cli(tmp_path, temp, str(write_program(tmp_path, CONNECTS + " await program.sleep(60000); return 1;")),
                    "--config", str(config))
    proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=terminate_with_parent)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # the run's first progress event: connected to its browser
        assert line.startswith("[1]"), line
        assert browsers_under(temp), "no browser was launched"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, err
    assert json.loads(out)["state"] == "cancelled"
    assert_nothing_left(temp)


def test_launch_browser_needs_the_connectors_settings(tmp_path: Path, temp: Path) -> None:
    argv, env = cli(tmp_path, temp, str(write_program(tmp_path, "return 1")), "--launch-browser")
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.strip() == ("fabric-jev: --launch-browser needs the browser connector's settings: a "
                                   "connectors.browser section with its allowedMethods in --config "
                                   "(docs/browser.md)")


@pytest.mark.anyio
async def test_one_launched_browser_serves_the_hosts_runs_and_ends_with_the_host() -> None:
    connector = BrowserConnector({"launch": True, "allowedMethods": ["Browser.getVersion"]})
    code = CONNECTS + " return v.product.startsWith('HeadlessChrome') || v.product.startsWith('Chrome');"
    from fabric_jev import HostConfig

    async with JevHost(HostConfig(approvals={"execute": "allow"})) as host:
        host.add_connector(connector)
        assert connector.launched_pid is None  # nothing starts before a run connects
        first = await host.run(program(code, requires=["browser.connect", "browser.cdp"]))
        pid = connector.launched_pid
        second = await host.run(program(code, requires=["browser.connect", "browser.cdp"]))
        assert connector.launched_pid == pid  # the same browser: one per host, not per run
    assert first.state is RunState.COMPLETED and first.result is True, first.error
    assert second.state is RunState.COMPLETED and second.result is True
    assert pid is not None and connector.launched_pid is None
    assert not any(group == pid for _, group in live_processes().values())
