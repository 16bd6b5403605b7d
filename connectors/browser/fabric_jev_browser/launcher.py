"""Start Debian's Chromium headless on 127.0.0.1 with a throw-away profile.

The browser runs in its own session (process group) so one killpg ends it
and every helper it started; the profile folder also holds HOME and the XDG
folders, so nothing (dconf, crash databases, NSS files) lands elsewhere.
Closing kills the group, reaps it and deletes the folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio

from fabric_jev.protocol import end_process_group, kill_process_group, read_available, wait_process_exit

from .errors import LaunchError

_LISTENING = re.compile(rb"DevTools listening on (ws://127\.0\.0\.1:\d+/devtools/browser/[\w-]+)\s")
CHROMIUM_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--no-default-browser-check", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
    "--remote-debugging-port=0",
    # Pages opened by automation are background targets: keep their timers
    # and rendering at full speed, or time-based checks see a frozen page.
    "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
)


#: Chromium puts its singleton socket in TMPDIR, which we point into the profile: the path
#: <parent>/fabric-jev-chromium-XXXXXXXX/tmp/.org.chromium.Chromium.XXXXXX/SingletonSocket must
#: fit a Unix socket address (107 bytes), or Chromium aborts at start-up (SIGABRT).
_SOCKET_PATH_MAX = 107
_SOCKET_PATH_TAIL = len("/fabric-jev-chromium-XXXXXXXX/tmp/.org.chromium.Chromium.XXXXXX/SingletonSocket")


def _profile_parent() -> str | None:
    """Where the profile folder goes: the temporary folder, unless its path is too long for
    Chromium's socket (a deep TMPDIR, such as a test's own folder); then /tmp."""
    parent = tempfile.gettempdir()
    if len(os.fsencode(parent)) + _SOCKET_PATH_TAIL <= _SOCKET_PATH_MAX or not os.path.isdir("/tmp"):
        return None  # mkdtemp's own choice
    return "/tmp"


def find_chromium() -> str:
    # The Debian wrapper script's /dev/shm check misbehaves here: run the binary.
    for path in CHROMIUM_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    raise LaunchError("Chromium is not installed (Debian: apt-get install chromium)")


class LaunchedBrowser:
    def __init__(self, proc: subprocess.Popen[bytes], profile: Path, ws_url: str) -> None:
        self.proc = proc
        self.profile = profile
        self.ws_url = ws_url
        self._closed = False
        self._drain_fd: int | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _start_draining(self) -> None:
        # Chromium keeps writing to stderr; a full pipe would stall it. Discard
        # it from the event loop as it comes (no thread).
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        loop = asyncio.get_running_loop()

        def drain() -> None:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(fd)
                self._drain_fd = None

        loop.add_reader(fd, drain)
        self._drain_fd = fd

    async def wait_exit(self) -> int:
        """Wait until the browser exits by itself (a crash, or killed from outside)."""
        await wait_process_exit(self.proc)
        return self.proc.returncode

    async def aclose(self) -> None:
        """Kill the whole process group, reap it, delete the profile. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            if self._drain_fd is not None:  # before end_process_group closes the pipe it reads
                with contextlib.suppress(Exception):
                    asyncio.get_running_loop().remove_reader(self._drain_fd)
            await end_process_group(self.proc)
            # Helpers in the group may outlive the main process for a moment.
            kill_process_group(self.proc)
            shutil.rmtree(self.profile, ignore_errors=True)


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: Chromium gets SIGKILL when the
    thread that started it dies. Chromium runs in its own session (so a Ctrl-C
    meant for us is not delivered to it twice), which also means nothing else
    would end it if we were killed without a chance to clean up."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


async def launch_chromium(*, executable: str | None = None, window: tuple[int, int] = (1280, 800),
                          timeout: float = 30.0, extra_flags: tuple[str, ...] = ()) -> LaunchedBrowser:
    """Start Chromium and return once its DevTools endpoint is listening."""
    binary = executable or find_chromium()
    profile = Path(tempfile.mkdtemp(prefix="fabric-jev-chromium-", dir=_profile_parent()))
    env = {
        **os.environ,
        "HOME": str(profile),
        "XDG_CONFIG_HOME": str(profile / "xdg-config"),
        "XDG_CACHE_HOME": str(profile / "xdg-cache"),
        "XDG_DATA_HOME": str(profile / "xdg-data"),
        # Its shared-memory files (--disable-dev-shm-usage) too: a killed Chromium cannot delete
        # them, and the profile folder goes as a whole.
        "TMPDIR": str(profile / "tmp"),
    }
    (profile / "tmp").mkdir()
    args = [binary, *FLAGS, f"--user-data-dir={profile / 'user-data'}",
            f"--window-size={window[0]},{window[1]}", *extra_flags, "about:blank"]
    try:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=env, start_new_session=True,
                                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    except OSError as exc:
        shutil.rmtree(profile, ignore_errors=True)
        raise LaunchError(f"cannot start Chromium: {exc.strerror}") from None
    browser = LaunchedBrowser(proc, profile, "")
    try:
        with anyio.fail_after(timeout):
            browser.ws_url = await _until_listening(proc)
        # DevToolsActivePort is written by another Chromium thread, possibly a
        # moment after the line we read; when it is already there it must agree.
        port_file = profile / "user-data" / "DevToolsActivePort"
        if port_file.exists():
            lines = port_file.read_text().split()
            if lines and f":{int(lines[0])}/" not in browser.ws_url:
                raise LaunchError("DevToolsActivePort disagrees with Chromium's own report")
        browser._start_draining()
    except BaseException as exc:
        await browser.aclose()
        if isinstance(exc, TimeoutError):
            raise LaunchError(f"Chromium did not open DevTools within {timeout:g} s") from None
        if isinstance(exc, OSError | ValueError | IndexError):
            raise LaunchError("Chromium did not write a usable DevToolsActivePort") from None
        raise
    return browser


async def _until_listening(proc: subprocess.Popen[bytes]) -> str:
    """Read stderr until Chromium says 'DevTools listening on ws://...'; return that URL."""
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    os.set_blocking(fd, False)
    buf = b""
    while True:
        found = _LISTENING.search(buf)
        if found:
            return found.group(1).decode()
        chunk = await read_available(fd)
        if not chunk:
            raise LaunchError(f"Chromium exited during start-up (code {proc.wait()})")
        buf = buf[-4096:] + chunk
