"""One bounded run of tsgo (compiler.py finds it): loaded only when a check misses its cache.

A run is its own process group with a wall-clock cap (the group is killed),
a heap cap (the kernel's data limit, with the Go runtime told to stay under
it), a CPU-time backstop that outlives the host, one thread of Go, and a
bounded amount of output kept. The event loop only waits on pipes and a pidfd.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import resource
import signal
import subprocess
from pathlib import Path
from typing import NamedTuple

import anyio

from .._process import end_process_group, read_available, wait_process_exit
from .compiler import Compiler, CompilerStopped

#: Output kept from one run; the rest is read and dropped (a count of errors is still exact
#: for the ones kept, and the verdict says more were cut).
MAX_OUTPUT_BYTES = 1 << 20
# How the Go runtime says it could not get memory, or a thread (whose stack counts towards the
# same cap): a line of its own, never a diagnostic's.
_GO_OUT_OF_MEMORY = re.compile(r"^(?:fatal error|runtime)\b[^\n]*(?:out of memory|cannot allocate memory|"
                               r"failed to create new OS thread|newosproc)", re.M)
# Any other way the Go runtime gives up.
_GO_FATAL = re.compile(r"^(?:fatal error|panic): [^\n]*", re.M)


class CompilerRun(NamedTuple):
    returncode: int
    output: str
    #: Output went past MAX_OUTPUT_BYTES and the rest was dropped.
    cut: bool


def _cap(pid: int, memory_bytes: int, timeout_s: float) -> None:
    """Limits on the running compiler. Set just after it starts (no code of ours runs in the
    child between fork and exec): the Go runtime allocates little before it reads its input."""
    cpu = math.ceil(timeout_s) + 1  # a backstop for when the host is gone and cannot kill it
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        resource.prlimit(pid, resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
        resource.prlimit(pid, resource.RLIMIT_CPU, (cpu, cpu))
        resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))


async def run_compiler(compiler: Compiler, argv: list[str], cwd: Path, *, timeout_s: float,
                       memory_bytes: int) -> CompilerRun:
    """Run tsgo with `argv` in `cwd`; raise CompilerStopped when a cap stops it."""
    env = {
        "GOMAXPROCS": "1",  # one core of two: workers keep the other
        "GOMEMLIMIT": str(memory_bytes * 3 // 4),  # the collector works harder before the hard cap
        "GOTRACEBACK": "none",  # a fatal error is one line, not every goroutine's stack
        "PATH": os.defpath,
        "LANG": "C.UTF-8",
    }
    try:
        proc = subprocess.Popen([str(compiler.path), *argv], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        raise CompilerStopped(f"the type checker could not be started: {exc.strerror}") from None
    _cap(proc.pid, memory_bytes, timeout_s)
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    kept = bytearray()
    cut = False
    timed_out = False
    try:
        with anyio.move_on_after(timeout_s) as scope:
            while True:
                chunk = await read_available(fd)
                if not chunk:
                    break
                room = MAX_OUTPUT_BYTES - len(kept)
                if len(chunk) > room:
                    cut = True
                kept += chunk[:max(room, 0)]
            await wait_process_exit(proc)
        timed_out = scope.cancelled_caught
    finally:
        await end_process_group(proc)
    if timed_out:
        raise CompilerStopped(f"the type checker took longer than {timeout_s:g} s and was stopped")
    output = kept.decode("utf-8", "replace")
    code = proc.returncode
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        if -code == signal.SIGXCPU or (-code == signal.SIGKILL and "out of memory" not in output):
            raise CompilerStopped(f"the type checker was stopped by {name} (its CPU cap is "
                                  f"{math.ceil(timeout_s) + 1} s)")
        raise CompilerStopped(f"the type checker was killed by {name}")
    if _GO_OUT_OF_MEMORY.search(output):
        raise CompilerStopped(f"the type checker ran out of memory (its cap is "
                              f"{memory_bytes // (1 << 20)} MiB)")
    fatal = _GO_FATAL.search(output)
    if fatal is not None:
        raise CompilerStopped(f"the type checker crashed: {fatal.group()[:300]}")
    return CompilerRun(code, output, cut)
