"""Launch hygiene: the URL first, nothing left behind on exit or crash."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fabric_jev_browser import launch_chromium

from tests.browser_support import terminate_with_parent
from tests.conftest import live_processes

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parent.parent


def group_alive(pgid: int) -> bool:
    return any(group == pgid for _, group in live_processes().values())


def launch_cli(env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "fabric_jev.cli", "browser", "launch"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            preexec_fn=terminate_with_parent, env=env)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_prints_the_url_first_and_cleans_up(sig: signal.Signals) -> None:
    proc, url = launch_cli()
    assert url.startswith("ws://127.0.0.1:") and "/devtools/browser/" in url
    chromium, profile = _chromium_of(proc.pid)
    assert group_alive(chromium) and profile.is_dir()
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert not group_alive(chromium)
    assert not profile.exists()


def test_a_deep_temporary_folder_does_not_stop_chromium(tmp_path: Path) -> None:
    # Chromium's singleton socket lives in the profile's tmp folder; under a TMPDIR this deep its
    # path would pass the 107 bytes of a socket address and Chromium would abort at start-up.
    deep = tmp_path / ("d" * 60)
    deep.mkdir()
    proc, url = launch_cli({**os.environ, "TMPDIR": str(deep)})
    assert url.startswith("ws://127.0.0.1:"), proc.communicate(timeout=30)
    chromium, profile = _chromium_of(proc.pid)
    assert profile.parent == Path("/tmp") and group_alive(chromium)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert not group_alive(chromium) and not profile.exists()


def test_crashed_browser_leaves_nothing_behind() -> None:
    proc, _ = launch_cli()
    chromium, profile = _chromium_of(proc.pid)
    os.kill(chromium, signal.SIGKILL)  # the browser dies on its own
    _, err = proc.communicate(timeout=30)
    assert "Chromium exited" in err
    assert not group_alive(chromium) and not profile.exists()


def test_a_killed_launcher_takes_its_browser_with_it() -> None:
    # SIGKILL gives the launcher no chance to clean up: the kernel must end Chromium.
    proc, _ = launch_cli()
    chromium, _ = _chromium_of(proc.pid)
    pidfd = os.pidfd_open(chromium)
    try:
        proc.kill()
        proc.communicate(timeout=30)
        readable, _, _ = select.select([pidfd], [], [], 30)
        assert readable, f"Chromium {chromium} outlived its killed launcher"
    finally:
        os.close(pidfd)


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


def _chromium_of(launcher: int) -> tuple[int, Path]:
    """The Chromium started by this launcher process and its profile folder (other test runs
    on the machine may be launching browsers at the same time: match by parent, not by count)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid != launcher or not argv or not argv[0].endswith(b"chromium"):
            continue
        for a in argv:
            if a.startswith(b"--user-data-dir="):
                return int(entry), Path(a.decode()[len("--user-data-dir="):]).parent
    raise AssertionError("chromium process not found")
