"""Confinement of a guest worker process, applied right after it is forked.

Imported by path from ``_worker_main.py`` (the sandbox directory is the
zygote's ``sys.path[0]``), so it uses the standard library only. Everything
that can be prepared once (the BPF program, the C library handle, the
``resource`` module) is prepared at import, in the zygote; each worker only
applies it.

The guest cannot reach Python at all; all of this matters only if the engine
itself were subverted. Order matters: limits and descriptor hygiene first,
then capabilities and identity (the bounding set can only be dropped while
root still holds CAP_SETPCAP), then the seccomp allowlist last, since it
forbids the calls used before it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import signal

_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_READ = 23
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
#: Address space beyond the JS heap: the interpreter, QuickJS and the stack.
_AS_HEADROOM = 256 * 1024 * 1024
#: The identity a worker started as root switches to: the kernel's overflow
#: id, "nobody"/"nogroup" on Debian-like systems, which owns no files.
UNPRIVILEGED_ID = 65534

_LIBC = ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL us when our parent exits, then close the race."""
    parent = os.getppid()
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent or parent == 1:
        os._exit(1)


def confine(memory_bytes: int, keep_fd: int) -> None:
    """Confine this worker before it takes a program.

    No privilege gain through exec, stdio on /dev/null, every descriptor but
    ``keep_fd`` closed, no file writes or core dumps, at most 8 descriptors,
    a bounded address space, no capabilities, an unprivileged uid/gid when
    started as root, and (x86_64) a seccomp allowlist.
    """
    _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    for entry in os.listdir("/proc/self/fd"):
        n = int(entry)
        if n > 2 and n != keep_fd:
            with contextlib.suppress(OSError):
                os.close(n)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    limit = max(keep_fd + 1, 8)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    address_space = memory_bytes + _AS_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    drop_privileges()
    seccomp_allowlist()


def drop_privileges() -> None:
    """Empty every capability set and, as root, become ``UNPRIVILEGED_ID``.

    Changing uid/gid clears the parent-death signal, so it is re-armed after
    the switch, and the parent is checked again: had the zygote died in
    between, the re-armed signal would never come.
    """
    parent = os.getppid()
    # The bounding set needs CAP_SETPCAP to shrink: drop it while still root.
    # Without that capability (a non-root host) each drop fails with EPERM
    # and the set stays as it is; no_new_privs and the refused execve make it
    # unreachable anyway.
    cap = 0
    while _LIBC.prctl(_PR_CAPBSET_READ, cap, 0, 0, 0) >= 0:
        _LIBC.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
        cap += 1
    _LIBC.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL before Linux 4.3
    if os.geteuid() == 0:
        # Refused in a user namespace whose setgroups is "deny"; nothing to drop there.
        with contextlib.suppress(PermissionError):
            os.setgroups([])
        try:
            os.setresgid(UNPRIVILEGED_ID, UNPRIVILEGED_ID, UNPRIVILEGED_ID)
            os.setresuid(UNPRIVILEGED_ID, UNPRIVILEGED_ID, UNPRIVILEGED_ID)
        except OSError as exc:
            # EINVAL: the id is not mapped in this user namespace. The worker
            # keeps its uid there, with every capability dropped below.
            if exc.errno != errno.EINVAL:
                raise
    # The uid switch emptied permitted and effective but not inheritable;
    # a non-root host may hold capabilities too. Empty all three.
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if _LIBC.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset refused")
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


# The only syscalls a confined worker makes, traced (strace -f) over the
# sandbox, lifecycle and trio suites: memory management, the socket to the
# host (recvfrom/sendto; no sendmsg/recvmsg, so no descriptor passing),
# waiting on it with a timeout, its CPU clock and profiling timer, and exit.
# A few equivalents the C library or interpreter may pick instead are listed
# too (read/write, poll/ppoll, select/pselect6, the time calls); none opens,
# creates, signals, spawns or changes anything outside the process.
# x86_64 numbers.
_ALLOWED_X86_64 = {
    0: "read", 1: "write", 3: "close",
    7: "poll", 23: "select", 270: "pselect6", 271: "ppoll",
    44: "sendto", 45: "recvfrom",
    11: "munmap", 12: "brk", 25: "mremap", 28: "madvise",
    15: "rt_sigreturn", 219: "restart_syscall",
    36: "getitimer", 38: "setitimer",
    96: "gettimeofday", 201: "time", 228: "clock_gettime", 229: "clock_getres",
    24: "sched_yield", 202: "futex",
    39: "getpid", 110: "getppid", 186: "gettid",
    60: "exit", 231: "exit_group",
}
#: Allowed only without PROT_EXEC in their third argument: no new machine code.
_ALLOWED_WITHOUT_EXEC_X86_64 = {9: "mmap", 10: "mprotect"}
_PROT_EXEC = 0x4
_AUDIT_ARCH_X86_64 = 0xC000003E
#: Every other syscall fails with EPERM, which Python reports as
#: PermissionError and QuickJS never makes: a refusal, never a crash.
_REFUSED_ERRNO = errno.EPERM


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _build_filter() -> _SockFprog | None:
    """The BPF program, built once in the zygote; None off x86_64."""
    if os.uname().machine != "x86_64":  # platform.machine(), without importing `platform` (~2 ms)
        return None
    ld_abs, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow = 0x7FFF0000                              # SECCOMP_RET_ALLOW
    deny = 0x00050000 | _REFUSED_ERRNO              # SECCOMP_RET_ERRNO
    kill = 0x80000000                               # SECCOMP_RET_KILL_PROCESS
    # seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8 i (low half first).
    prot_offset = 16 + 8 * 2
    # Layout: header, one jeq per allowed number (true -> ALLOW), one per
    # number needing the PROT_EXEC check (true -> CHECK), DENY, CHECK, ALLOW, DENY.
    plain = sorted(_ALLOWED_X86_64)
    checked = sorted(_ALLOWED_WITHOUT_EXEC_X86_64)
    prog: list[tuple[int, int, int, int]] = [
        (ld_abs, 0, 0, 4),                          # A = arch
        (jeq, 1, 0, _AUDIT_ARCH_X86_64),            # x86_64: skip the kill
        (ret, 0, 0, kill),                          # other ABIs (i386 via int 0x80) die
        (ld_abs, 0, 0, 0),                          # A = syscall number (x32 never matches)
    ]
    tests = len(plain) + len(checked)
    # Positions after the tests: +0 DENY, +1 CHECK (ld prot), +2 jset, +3 ALLOW, +4 DENY.
    for i, nr in enumerate(plain):
        left = tests - i - 1                        # tests after this one
        prog.append((jeq, left + 3, 0, nr))         # -> ALLOW
    for i, nr in enumerate(checked):
        left = len(checked) - i - 1
        prog.append((jeq, left + 1, 0, nr))         # -> CHECK
    prog += [
        (ret, 0, 0, deny),
        (ld_abs, 0, 0, prot_offset),                # A = low half of the prot argument
        (jset, 1, 0, _PROT_EXEC),                   # executable: deny
        (ret, 0, 0, allow),
        (ret, 0, 0, deny),
    ]
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    fprog._keep = filters  # the array must outlive the struct
    return fprog


_FILTER = _build_filter()


def seccomp_allowlist() -> bool:
    """Install the allowlist filter (needs no_new_privs). Returns False off x86_64."""
    if _FILTER is None:
        return False
    if _LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(_FILTER), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter refused")
    return True
