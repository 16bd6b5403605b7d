"""llama.cpp's server for one GGUF file, in a process of its own (the `gguf:` route's child).

`gguf_server.py` starts this file by path with the host's own interpreter
(``python -P _gguf_main.py --report-fd N ...``: ``-P`` keeps this folder, whose
``http.py`` would hide the standard library's, off ``sys.path``). It imports the
standard library and xllamacpp only, never fabric_jev. It loads the model into
an ``xllamacpp.Server`` listening on 127.0.0.1, then writes one JSON line on
the report descriptor, ``{"url": "http://127.0.0.1:PORT"}`` once the model is
loaded and the server listens, or ``{"error": "..."}`` (empty when llama.cpp
failed: its log says why), and writes nothing more.

It dies with the host: PR_SET_PDEATHSIG (the host starts it from a thread that
lives as long as the host process), then a check that the parent is still the
one that started it, which closes the race with a parent that died before the
signal was armed. SIGTERM stops it cleanly (the server finishes, exit 0).

What llama.cpp prints goes to the descriptor ``--log-fd`` (the host's: a file
in memory, or the test fixture's log file): while the model loads, so that
the host can show llama.cpp's own error lines when it fails; after that only
with ``--keep-log``, else to /dev/null, so that a long-running server writes
nothing that grows.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import socket
import sys
import threading
from typing import Any

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the host died before the signal was armed
        os._exit(1)


def _port_free(port: int) -> bool:
    """Whether 127.0.0.1:`port` can be bound now (as the server binds it: address reuse on)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _params(args: argparse.Namespace, port: int) -> Any:
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = args.model
    p.model_alias = {args.alias}
    p.n_ctx = args.context
    p.n_parallel = args.slots
    if args.threads > 0:  # else llama.cpp's own choice (the CPU's cores)
        p.cpuparams.n_threads = args.threads
        p.cpuparams_batch.n_threads = args.threads
    p.hostnames = ["127.0.0.1"]
    p.port = port
    p.n_threads_http = 2
    p.ui = False
    p.offline = True  # never a download: the model is the file given
    p.endpoint_metrics = args.metrics
    return p


def start(args: argparse.Namespace) -> Any:
    """The running server: on a port the kernel picks, or on the first free one of the range."""
    import xllamacpp

    if args.port_low == 0:
        return xllamacpp.Server(_params(args, 0))
    for port in range(args.port_low, args.port_high + 1):
        if not _port_free(port):
            continue
        try:
            return xllamacpp.Server(_params(args, port))
        except RuntimeError:
            if _port_free(port):
                raise  # the port was free: the model is what failed
            # taken between the probe and the server's bind: try the next one
    raise PortsTaken(f"no free port from {args.port_low} to {args.port_high} on 127.0.0.1")


class PortsTaken(Exception):
    pass


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="_gguf_main.py")
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--report-fd", type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--context", type=int, required=True)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--port-low", type=int, default=0)
    parser.add_argument("--port-high", type=int, default=0)
    parser.add_argument("--metrics", action="store_true")
    parser.add_argument("--log-fd", type=int, required=True)
    parser.add_argument("--keep-log", action="store_true")
    args = parser.parse_args(argv)
    die_with_parent(args.parent)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    os.dup2(args.log_fd, 1)
    os.dup2(args.log_fd, 2)
    os.close(args.log_fd)
    report = os.fdopen(args.report_fd, "w", encoding="utf-8")

    def say(message: dict[str, str]) -> None:
        report.write(json.dumps(message) + "\n")
        report.flush()

    try:
        server = start(args)
    except Exception as exc:  # reported, never raised
        # Why: ours, or llama.cpp's own error lines, which the host reads from the log once this
        # process has exited (llama.cpp writes its log from a thread of its own, flushed at exit).
        with contextlib.suppress(OSError):
            say({"error": str(exc) if isinstance(exc, PortsTaken | ImportError) else ""})
        return 1
    if not args.keep_log:  # ready: what it prints from now on is not kept
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.close(devnull)
    with contextlib.suppress(OSError):
        say({"url": server.listening_address})
    with contextlib.suppress(OSError):
        report.close()
    while not stop.wait(3600):
        pass
    del server  # waits for the server's loop to end
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
