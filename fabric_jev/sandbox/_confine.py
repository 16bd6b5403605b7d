"""Confinement of a guest worker process, applied right after it is forked.

Imported by path from ``_worker_main.py`` (the sandbox directory is the
zygote's ``sys.path[0]``), so it uses the standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
#: Address space beyond the JS heap: the interpreter, QuickJS and the stack.
_AS_HEADROOM = 256 * 1024 * 1024


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL us when our parent exits, then close the race."""
    parent = os.getppid()
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent or parent == 1:
        os._exit(1)


def confine(memory_bytes: int, keep_fd: int) -> None:
    """Defense in depth for a worker about to run untrusted code.

    The guest cannot reach Python at all; these limits matter only if the
    engine itself were subverted: no privilege gain through exec, no file
    writes, no core dumps, no new file descriptors, a bounded address space,
    and stdio pointed at /dev/null.
    """
    import resource

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
    seccomp_blocklist()


# Syscalls a QuickJS guest never needs once its worker is running (x86_64
# numbers): opening files, sockets, fd passing, exec, fork/clone, signalling or
# tracing other processes, filesystem changes, identity, modules, io_uring, bpf.
_BLOCKED_X86_64 = (
    2, 85, 257, 437,                      # open, creat, openat, openat2
    41, 42, 43, 49, 50, 53, 288, 46, 47,  # socket, connect, accept, bind, listen, socketpair, accept4,
                                          # sendmsg, recvmsg (no fd passing)
    59, 322, 56, 57, 58, 435,             # execve, execveat, clone, fork, vfork, clone3
    62, 200, 234, 424, 434,               # kill, tkill, tgkill, pidfd_send_signal, pidfd_open
    101, 310, 311,                        # ptrace, process_vm_readv, process_vm_writev
    76, 77, 82, 83, 84, 86, 87, 88, 90, 91, 92, 93, 94,
    258, 260, 263, 264, 265, 266, 268, 316,  # truncate … renameat2: filesystem changes
    105, 106, 155, 161, 165, 166, 169, 175, 313,  # setuid, setgid, pivot_root, chroot, mount,
                                                  # umount2, reboot, init_module, finit_module
    298, 319, 321, 323, 425,              # perf_event_open, memfd_create, bpf, userfaultfd, io_uring_setup
)
_AUDIT_ARCH_X86_64 = 0xC000003E


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _build_filter() -> _SockFprog | None:
    """The BPF program, built once in the zygote; None off x86_64."""
    import platform

    if platform.machine() != "x86_64":
        return None
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny, kill = 0x7FFF0000, 0x00050000 | 1, 0x80000000  # ALLOW, ERRNO(EPERM), KILL_PROCESS
    n = len(_BLOCKED_X86_64)
    prog = [
        (ld, 0, 0, 4),                             # A = arch
        (jeq, 1, 0, _AUDIT_ARCH_X86_64),           # x86_64: skip the kill
        (ret, 0, 0, kill),
        (ld, 0, 0, 0),                             # A = syscall number
        (jge, n + 1, 0, 0x40000000),               # the x32 ABI: refuse outright
    ]
    for i, nr in enumerate(_BLOCKED_X86_64):
        prog.append((jeq, n - i, 0, nr))           # blocked: jump to deny
    prog += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    fprog._keep = filters  # the array must outlive the struct
    return fprog


_FILTER = _build_filter()
_LIBC = ctypes.CDLL(None, use_errno=True)


def seccomp_blocklist() -> bool:
    """Install the seccomp filter refusing `_BLOCKED_X86_64` with EPERM. Returns False if not x86_64."""
    if _FILTER is None:
        return False
    # PR_SET_SECCOMP = 22, SECCOMP_MODE_FILTER = 2; needs no_new_privs (set by confine).
    if _LIBC.prctl(22, 2, ctypes.byref(_FILTER), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter refused")
    return True
