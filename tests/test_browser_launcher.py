"""Launch hygiene: the URL first, nothing left behind on exit or crash."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fabric_jev_browser import launch_chromium

from tests.conftest import live_processes

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parent.parent


def group_alive(pgid: int) -> bool:
    return any(group == pgid for _, group in live_processes().values())


def profiles() -> set[str]:
    return {p.name for p in Path("/tmp").glob("fabric-jev-chromium-*")}


def launch_cli() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "fabric_jev.cli", "browser", "launch"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_prints_the_url_first_and_cleans_up(sig: signal.Signals) -> None:
    before = profiles()
    proc, url = launch_cli()
    assert url.startswith("ws://127.0.0.1:") and "/devtools/browser/" in url
    [profile] = profiles() - before
    chromium = _chromium_pid(Path("/tmp") / profile)
    assert group_alive(chromium)
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert not group_alive(chromium)
    assert profiles() == before


def test_crashed_browser_leaves_nothing_behind() -> None:
    before = profiles()
    proc, _ = launch_cli()
    [profile] = profiles() - before
    chromium = _chromium_pid(Path("/tmp") / profile)
    os.kill(chromium, signal.SIGKILL)  # the browser dies on its own
    _, err = proc.communicate(timeout=30)
    assert "Chromium exited" in err
    assert not group_alive(chromium) and profiles() == before


@pytest.mark.anyio
async def test_python_api_keeps_state_inside_the_profile() -> None:
    home_before = set(os.listdir(Path.home()))
    browser = await launch_chromium()
    try:
        assert (browser.profile / "user-data").is_dir()
    finally:
        await browser.aclose()
    assert not browser.profile.exists() and not group_alive(browser.pid)
    assert set(os.listdir(Path.home())) == home_before


def _chromium_pid(profile: Path) -> int:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"chromium") and any(
                a == f"--user-data-dir={profile}/user-data".encode() for a in argv):
            return int(entry)
    raise AssertionError("chromium process not found")
