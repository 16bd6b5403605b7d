"""What a `gguf:FILE` spec names: the model file, checked before anything starts, the name the
server and the provenance give the model, and the server's settings (the config's
``evaluator.gguf``). Standard library only: `fabric-jev status` reads these without loading
the route."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

MAGIC = b"GGUF"
SETTING_KEYS = {"contextSize", "threads", "ports"}
MIN_CONTEXT, MAX_CONTEXT = 256, 1 << 20
MAX_THREADS = 256
MIN_PORT, MAX_PORT = 1024, 65535
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._+@-]")


def _shown(text: str) -> str:
    return repr(text[:200])


def check_gguf_file(text: str) -> Path:
    """The GGUF file `text` names (``~`` expanded), resolved; ConfigError saying what it is instead."""
    if not text:
        raise ConfigError("the gguf route needs a model file: gguf:PATH (a llama.cpp .gguf file)")
    if "\x00" in text:
        raise ConfigError(f"gguf:{_shown(text)}: a file name cannot hold a NUL byte")
    path = Path(os.path.expanduser(text))
    try:
        # Not blocking on a FIFO, and not following the name twice: the file opened is the one checked.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ConfigError(f"gguf:{_shown(text)}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"gguf:{_shown(text)} is a folder, not a GGUF model file") from None
    except OSError as exc:
        raise ConfigError(f"gguf:{_shown(text)} cannot be opened ({exc.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ConfigError(f"gguf:{_shown(text)} is a folder, not a GGUF model file")
        if not stat.S_ISREG(mode):
            raise ConfigError(f"gguf:{_shown(text)} is not a regular file (a pipe, socket or device); "
                              "the gguf route loads a GGUF model file")
        try:
            head = os.pread(fd, len(MAGIC), 0)
        except OSError as exc:
            raise ConfigError(f"gguf:{_shown(text)} cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    if head != MAGIC:
        raise ConfigError(f"gguf:{_shown(text)} is not a GGUF file (it does not start with the bytes 'GGUF'); "
                          "the gguf route loads llama.cpp's model files")
    return path.resolve()


def model_name(path: Path | str) -> str:
    """The file's name as the server calls the model, and as the provenance names it: characters a
    model name may not hold become '-' (`llm_routes.LLM_MODEL_RULE`)."""
    name = _NAME_UNSAFE.sub("-", Path(path).name).replace("..", ".-")[:128]
    return name if name[:1].isalnum() else ("m" + name)[:128]


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """How a server is started: everything that makes two servers of one file differ."""

    #: The KV cache, in tokens, shared by the slots: the longest prompt a request may have.
    context_size: int = 4096
    #: CPU threads for the model; None: llama.cpp's own choice (the CPU's cores).
    threads: int | None = None
    #: The ports (first, last) to listen on, the first free one taken; None: one the kernel picks.
    ports: tuple[int, int] | None = None
    #: Requests served at once, each with its own prompt cache (llama.cpp's --parallel).
    slots: int = 1
    #: llama.cpp's /metrics endpoint (prompt tokens evaluated and reused).
    metrics: bool = False



def settings_from(section: Mapping[str, object]) -> ServerSettings:
    """The config's ``evaluator.gguf`` object as server settings (ConfigError naming the key)."""
    raw = section.get("gguf", {})
    if not isinstance(raw, Mapping):
        raise ConfigError("evaluator.gguf must be an object: {contextSize?, threads?, ports?}")
    unknown = sorted(set(raw) - SETTING_KEYS)
    if unknown:
        raise ConfigError(f"unknown evaluator.gguf key {unknown[0][:40]!r}; expected contextSize, threads or ports")

    def whole(key: str, low: int, high: int) -> int:
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"evaluator.gguf.{key} must be a whole number from {low} to {high}")
        return value

    context = whole("contextSize", MIN_CONTEXT, MAX_CONTEXT) if "contextSize" in raw else 4096
    threads = whole("threads", 1, MAX_THREADS) if raw.get("threads") is not None else None
    ports: tuple[int, int] | None = None
    if raw.get("ports") is not None:
        value = raw["ports"]
        if (not isinstance(value, list) or len(value) != 2
                or any(isinstance(p, bool) or not isinstance(p, int) or not MIN_PORT <= p <= MAX_PORT for p in value)
                or value[0] > value[1]):
            raise ConfigError(f"evaluator.gguf.ports must be [FIRST, LAST], ports from {MIN_PORT} to {MAX_PORT}, "
                              "FIRST no greater than LAST")
        ports = (value[0], value[1])
    return ServerSettings(context_size=context, threads=threads, ports=ports)


def describe(settings: ServerSettings) -> str:
    """The settings as one phrase, for status."""
    threads = f"{settings.threads} threads" if settings.threads else "llama.cpp's threads"
    ports = f"a port from {settings.ports[0]} to {settings.ports[1]}" if settings.ports else "a port the kernel picks"
    return f"context {settings.context_size} tokens, {threads}, {ports}"



__all__ = ["MAGIC", "ServerSettings", "check_gguf_file", "describe", "model_name", "settings_from"]
