"""Worker confinement: seccomp allowlist, no capabilities, no root.

The refusals are shown from inside a real worker: the real zygote
(``_worker_main.py``) forks it and the real ``confine()`` runs, but the engine
module it imports next is a probe that attempts each forbidden call and
reports what the kernel answered. The guest's JavaScript cannot make syscalls,
so a probe standing in for a subverted engine is the only way to ask.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabric_jev import JevHost, RunState
from fabric_jev._runtime_js import runtime_js_path
from fabric_jev.testing import worker_pid
from tests.conftest import program

_SANDBOX = Path(__file__).resolve().parent.parent / "fabric_jev" / "sandbox"
_X86_64 = os.uname().machine == "x86_64"
_ROOT = os.geteuid() == 0
_NOBODY = 65534

# Stands in for the QuickJS C module. The zygote imports it before forking;
# the worker builds a Context right after confine(), and that is when the
# probes run. Results go out on the one descriptor confinement kept.
_PROBE = r'''
import ctypes, errno, json, os, signal, socket, _thread

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
TMP = "/tmp/fabric-jev-probe-" + os.environ["PROBE_TAG"]


def c_call(fn, *args):
    ctypes.set_errno(0)
    if fn(*args) == -1:
        return errno.errorcode[ctypes.get_errno()]
    return "allowed"


def mapped(prot):
    ctypes.set_errno(0)
    if libc.mmap(None, 4096, prot, 0x22, -1, 0) in (None, 2**64 - 1):  # MAP_PRIVATE|MAP_ANONYMOUS
        return errno.errorcode[ctypes.get_errno()]
    return "allowed"


def mprotect_exec():
    page = libc.mmap(None, 4096, 3, 0x22, -1, 0)
    return c_call(libc.mprotect, page, 4096, 5)


def capset_all():
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)(*([0xFFFFFFFF] * 6))
    return c_call(libc.capset, header, data)


def probes(fd):
    ppid = os.getppid()
    sc = libc.syscall
    return {
        "kill another process": lambda: os.kill(ppid, 0),
        "kill pid 1": lambda: os.kill(1, 0),
        "tgkill another process": lambda: c_call(sc, 234, ppid, ppid, 0),
        "pidfd_open": lambda: c_call(sc, 434, ppid, 0),
        "mkfifo": lambda: os.mkfifo(TMP + "-fifo"),
        "setxattr": lambda: os.setxattr("/tmp", "user.fabric-jev-probe", b"1"),
        "utime": lambda: c_call(sc, 132, b"/tmp", None),
        "utimensat": lambda: os.utime("/tmp"),
        "unshare(CLONE_NEWUSER)": lambda: c_call(libc.unshare, 0x10000000),
        "sendmmsg": lambda: c_call(libc.sendmmsg, fd, None, 0, 0),
        "sendmsg": lambda: c_call(libc.sendmsg, fd, None, 0),
        "socket": lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM),
        "socketpair": lambda: socket.socketpair(),
        "open for write": lambda: open(TMP + "-file", "w"),
        "open for read": lambda: os.open("/", os.O_RDONLY),
        "openat2": lambda: c_call(sc, 437, -100, b"/", None, 0),
        "unlink": lambda: os.unlink(TMP + "-missing"),
        "mkdir": lambda: os.mkdir(TMP + "-dir"),
        "execve": lambda: os.execv("/bin/true", ["/bin/true"]),
        "fork": lambda: os.fork(),
        "clone3": lambda: c_call(sc, 435, None, 0),
        "thread": lambda: _thread.start_new_thread(lambda: None, ()),
        "ptrace": lambda: c_call(libc.ptrace, 16, ppid, None, None),
        "process_vm_readv": lambda: c_call(sc, 310, ppid, None, 0, None, 0, 0),
        "mount": lambda: c_call(libc.mount, b"none", b"/tmp", b"tmpfs", 0, None),
        "chroot": lambda: os.chroot("/tmp"),
        "chmod": lambda: os.chmod("/tmp", 0o1777),
        "chown": lambda: os.chown("/tmp", 0, 0),
        "setuid(0)": lambda: os.setuid(0),
        "setgid(0)": lambda: os.setgid(0),
        "setresuid(0)": lambda: os.setresuid(0, 0, 0),
        "capset (all)": capset_all,
        "prctl": lambda: c_call(libc.prctl, 4, 1, 0, 0, 0),
        "ignore SIGPROF": lambda: signal.signal(signal.SIGPROF, signal.SIG_IGN),
        "block SIGPROF": lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF}),
        "mmap executable": lambda: mapped(5),
        "mprotect executable": mprotect_exec,
        "memfd_create": lambda: c_call(sc, 319, b"x", 0),
        "bpf": lambda: c_call(sc, 321, 0, None, 0),
        "io_uring_setup": lambda: c_call(sc, 425, 1, None),
        "perf_event_open": lambda: c_call(sc, 298, None, 0, -1, -1, 0),
        "keyctl": lambda: c_call(sc, 250, 0),
        "setns": lambda: c_call(sc, 308, 0, 0),
        "x32 getpid": lambda: c_call(sc, 39 | 0x40000000),
        # What the worker does need still works.
        "getpid (control)": lambda: os.getpid(),
        "cpu clock (control)": lambda: __import__("time").process_time(),
        "mmap read-write (control)": lambda: mapped(3),
    }


def outcome(fn):
    try:
        got = fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    except RuntimeError:
        return "RuntimeError"
    return got if isinstance(got, str) else "allowed"


class Context:
    def __init__(self):
        for fd in range(3, 8):  # the one descriptor confinement kept (fstat is refused)
            try:
                os.write(fd, b"")
                break
            except OSError:
                continue
        report = {name: outcome(fn) for name, fn in probes(fd).items()}
        os.write(fd, json.dumps(report).encode() + b"\n")
        os.read(fd, 1)  # stay alive until the test has looked at us
        os._exit(0)
'''


class Zygote:
    """The real zygote, started as the pool starts it, with the probe as its engine."""

    def __init__(self, probe_dir: Path) -> None:
        host_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ, PYTHONPATH=str(probe_dir), PROBE_TAG=str(os.getpid()))
        self.process = subprocess.Popen(
            [sys.executable, "-s", str(_SANDBOX / "_worker_main.py"), str(zygote_end.fileno()),
             str(runtime_js_path("prelude.js"))],
            pass_fds=[zygote_end.fileno()], stdin=subprocess.DEVNULL, env=env,
        )
        zygote_end.close()
        host_end.settimeout(30)  # a bound on a hang, not a speed assertion
        self.ctl = host_end
        assert "ready" in json.loads(self.ctl.recv(4096))

    def fork(self) -> tuple[int, socket.socket]:
        self.ctl.send(json.dumps({"fork": 1}).encode())
        data, fds, _, _ = socket.recv_fds(self.ctl, 4096, 4)
        sock = socket.socket(fileno=fds[0])
        sock.settimeout(30)
        return json.loads(data)["worker"], sock

    def exit_code(self, pid: int) -> int:
        while True:
            msg = json.loads(self.ctl.recv(4096))
            if msg.get("exit") == pid:
                return int(msg["code"])

    def close(self) -> None:
        self.ctl.close()
        self.process.kill()
        self.process.wait()


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[Zygote]:
    (tmp_path / "_quickjs.py").write_text(_PROBE)
    z = Zygote(tmp_path)
    try:
        yield z
    finally:
        z.close()
        for suffix in ("-fifo", "-file", "-dir"):
            path = Path(f"/tmp/fabric-jev-probe-{os.getpid()}{suffix}")
            if path.is_dir():
                path.rmdir()
            elif path.exists() or path.is_symlink():
                path.unlink()


def _report(sock: socket.socket) -> dict[str, str]:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = sock.recv(65536)
        assert chunk, "the probe worker died before it reported"
        buf += chunk
    report: dict[str, str] = json.loads(buf)
    return report


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return {k: v.strip() for k, v in (line.split(":", 1) for line in f if ":" in line)}


FORBIDDEN = [
    "kill another process", "kill pid 1", "tgkill another process", "pidfd_open", "mkfifo",
    "setxattr", "utime", "utimensat", "unshare(CLONE_NEWUSER)", "sendmmsg", "sendmsg", "socket",
    "socketpair", "open for write", "open for read", "openat2", "unlink", "mkdir", "execve",
    "fork", "clone3", "ptrace", "process_vm_readv", "mount", "chroot", "chmod", "chown",
    "setuid(0)", "setgid(0)", "setresuid(0)", "capset (all)", "prctl", "ignore SIGPROF",
    "block SIGPROF", "mmap executable", "mprotect executable", "memfd_create", "bpf",
    "io_uring_setup", "perf_event_open", "keyctl", "setns", "x32 getpid",
]


@pytest.mark.skipif(not _X86_64, reason="the seccomp allowlist is written for x86_64")
def test_a_confined_worker_is_refused_every_forbidden_call(zygote: Zygote) -> None:
    pid, sock = zygote.fork()
    report = _report(sock)
    refused = {name: report[name] for name in FORBIDDEN}
    assert refused == {name: "EPERM" for name in FORBIDDEN}
    # Threads are clone/clone3 underneath: refused, so they cannot start.
    assert report["thread"] == "RuntimeError"
    for control in ("getpid (control)", "cpu clock (control)", "mmap read-write (control)"):
        assert report[control] == "allowed"
    assert not Path(f"/tmp/fabric-jev-probe-{os.getpid()}-fifo").exists()
    sock.close()
    assert zygote.exit_code(pid) == 0


def test_a_confined_worker_has_no_capabilities_and_is_not_root(zygote: Zygote) -> None:
    pid, sock = zygote.fork()
    _report(sock)  # confinement is complete once the probe has run
    status = _status(pid)
    caps = ["CapInh", "CapPrm", "CapEff", "CapAmb"] + (["CapBnd"] if _ROOT else [])
    assert {cap: int(status[cap], 16) for cap in caps} == dict.fromkeys(caps, 0)
    uid = _NOBODY if _ROOT else os.getuid()
    gid = _NOBODY if _ROOT else os.getgid()
    assert status["Uid"].split() == [str(uid)] * 4
    assert status["Gid"].split() == [str(gid)] * 4
    if _ROOT:
        assert status["Groups"] == ""
    assert status["NoNewPrivs"] == "1"
    if _X86_64:
        assert status["Seccomp"] == "2" and status["Seccomp_filters"] == "1"
    # The host still kills it through a pidfd after the uid switch, and the
    # zygote still reaps it and reports how it ended.
    pidfd = os.pidfd_open(pid)
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)
    assert zygote.exit_code(pid) == -signal.SIGKILL
    sock.close()


def test_a_confined_worker_still_dies_with_its_zygote(zygote: Zygote) -> None:
    """The uid switch clears the parent-death signal; confinement re-arms it."""
    pid, sock = zygote.fork()
    _report(sock)
    pidfd = os.pidfd_open(pid)
    try:
        zygote.process.kill()
        zygote.process.wait()
        # A pidfd turns readable when its process has exited. The bound only
        # stops a broken build from hanging the suite.
        readable, _, _ = select.select([pidfd], [], [], 30)
        assert readable == [pidfd], "the worker outlived its zygote"
    finally:
        os.close(pidfd)
        sock.close()


@pytest.mark.anyio
async def test_workers_are_confined_by_the_kernel(host: JevHost) -> None:
    env = await host.spawn(program("await program.emit(1); await program.sleep(5000); return 1"), None)
    await host.progress(env.id, after=0)
    pid = worker_pid(host, env.id)
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)
    with open(f"/proc/{pid}/limits") as f:
        limits = f.read()
    fds = os.listdir(f"/proc/{pid}/fd")
    stdio = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in ("0", "1", "2")]
    await host.stop(env.id)
    assert status["NoNewPrivs"].strip() == "1" and status["Threads"].strip() == "1"
    assert "Max file size             0                    0" in limits
    assert "Max core file size        0                    0" in limits
    assert "Max open files            8                    8" in limits
    assert str(64 * 1024 * 1024 + 256 * 1024 * 1024) in limits  # address space
    assert len(fds) == 4  # stdio on /dev/null and the one socket to the host
    assert stdio == ["/dev/null"] * 3


@pytest.mark.anyio
async def test_real_workers_run_unprivileged_under_the_allowlist(host: JevHost) -> None:
    env = await host.spawn(program("await program.emit(1); await program.sleep(5000); return 1"), None)
    await host.progress(env.id, after=0)
    pid = worker_pid(host, env.id)
    status = _status(pid)
    await host.stop(env.id)
    assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0
    if _ROOT:
        assert status["Uid"].split() == [str(_NOBODY)] * 4 and int(status["CapBnd"], 16) == 0
    if _X86_64:
        assert status["Seccomp"] == "2" and status["Seccomp_filters"] == "1"


@pytest.mark.anyio
async def test_programs_still_do_everything_the_guest_api_offers(host: JevHost) -> None:
    done = await host.run(program(
        "let n = 0; setTimeout(() => n++, 1); const t = setInterval(() => n++, 1);"
        " await program.sleep(5); clearInterval(t); await program.emit({n: n > 0});"
        " console.log('ok', new Date(0).toISOString(), Math.random() < 1);"
        " const a = await jev.evaluate({state: 'x', questions: {q: {type: 'noul', instructions: 'Yes?'}}});"
        " return {n: n > 1, a: a.answers.q};",
        requires=["jev.evaluate"]), None)
    assert done.state is RunState.COMPLETED, done.error
    assert done.result == {"n": True, "a": {"type": "noul", "noul": 0.75}}
    assert done.logs == ("ok 1970-01-01T00:00:00.000Z true",)


@pytest.mark.anyio
async def test_memory_and_cpu_limits_still_end_runs_under_the_allowlist(host: JevHost) -> None:
    bomb = await host.run(program("const a = []; for (;;) a.push(new Uint8Array(1 << 20));"), None)
    assert bomb.state is RunState.FAILED
    assert bomb.error == "Jev program exceeded its memory limit (64 MiB)"
    # indexOf never checks the engine's interrupt flag: only the kernel's
    # profiling timer (SIGPROF, default action) stops it.
    runaway = await host.run(program("const s = 'x'.repeat(1 << 24); for (;;) s.indexOf('y');"), None)
    assert runaway.state is RunState.TIMED_OUT, runaway.error
    assert runaway.error is not None and "await" in runaway.error
