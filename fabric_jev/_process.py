"""Child processes driven from the event loop without helper threads: reading
their pipes, waiting for them, and ending the process group they lead."""

from __future__ import annotations

import contextlib
import os
import signal
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


async def read_available(fd: int) -> bytes:
    """The next bytes (up to 64 KiB) on the non-blocking pipe `fd`, waited for on the event
    loop; b"" once the writer has closed it."""
    while True:
        await anyio.wait_readable(fd)
        try:
            return os.read(fd, 65536)
        except BlockingIOError:  # readable was announced, but the bytes are not there (yet)
            continue


def kill_process_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL every process in the group `proc` leads (started with `start_new_session`), so
    whatever it started goes too. A group already gone, or one we may not signal, is left alone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def end_process_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the group `proc` leads, close our ends of its pipes, then reap it. The reaping is
    shielded: a cancelled caller still leaves no zombie behind."""
    kill_process_group(proc)
    # Closed before reaping: a process that survived the kill and writes gets EPIPE
    # rather than blocking on a full pipe nobody reads.
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    with anyio.CancelScope(shield=True):
        await wait_process_exit(proc)
