"""Waiting for child processes without helper threads."""

from __future__ import annotations

import os
import subprocess

import anyio


async def wait_process_exit(proc: subprocess.Popen[bytes]) -> int:
    """Wait for `proc` to exit and reap it: its pidfd turns readable on exit (no thread)."""
    if proc.poll() is not None:
        return proc.returncode
    try:
        fd = os.pidfd_open(proc.pid)
    except OSError:  # already reaped elsewhere, or pidfds unavailable
        return proc.wait()
    try:
        await anyio.wait_readable(fd)
    finally:
        os.close(fd)
    return proc.wait()
