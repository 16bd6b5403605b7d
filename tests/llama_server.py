"""The real llama.cpp server for the tests marked `llm`: one per session, killed at its end.

llama.cpp's own llama-server with SmolLM2-135M-Instruct (./scripts/setup-llm installs both;
fabric_jev/benchmarks/llama_server.py starts it). A test that uses the `llama` fixture is
marked `llm` by conftest, so `pytest -m "not llm"` leaves them all out, server included.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fabric_jev.benchmarks.llama_server import (
    LlamaServer,
    LlamaServerMissing,
    llama_server,
    locate_model,
    locate_server,
)


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-server on 127.0.0.1 with one slot (its prompt cache is the one a request reuses)."""
    try:
        locate_server()
        locate_model()
    except LlamaServerMissing as exc:
        pytest.fail(f"{exc} (or leave these tests out: -m 'not llm')", pytrace=False)
    log = tmp_path_factory.mktemp("llama") / "llama-server.log"
    with llama_server(log, slots=1, context=4096) as server:
        yield server
