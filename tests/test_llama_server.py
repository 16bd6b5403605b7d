"""The real llama.cpp server the `llm` tests share: what it reports, and that it is always stopped.

These pin what the routes' tests and `bench evaluators` read from llama.cpp's server (the
xllamacpp build ./scripts/setup-llm installs): next-token logprobs for a one-token answer, and how many prompt
tokens a request evaluated against how many it reused from the slot's prompt cache.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import httpx
import pytest

from fabric_jev.benchmarks.llama_server import LlamaServer, LlamaServerFailed, llama_server
from tests.conftest import child_pids

pytestmark = pytest.mark.llm

SYSTEM = "You answer with one word: Yes or No."


def chat(server: LlamaServer, user: str, **extra: object) -> dict[str, object]:
    body = {"model": server.model, "max_tokens": 1, "logprobs": True, "top_logprobs": 20,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}], **extra}
    resp = httpx.post(server.base_url + "/chat/completions", json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    data: dict[str, object] = resp.json()
    return data


def metric(server: LlamaServer, name: str) -> float:
    text = httpx.get(server.url + "/metrics", timeout=10).text
    (value,) = [line.split()[-1] for line in text.splitlines() if line.startswith(f"llamacpp:{name} ")]
    return float(value)


def test_one_token_answer_carries_the_next_token_distribution(llama: LlamaServer) -> None:
    data = chat(llama, "Is the sky blue on a clear day?")
    (choice,) = data["choices"]  # type: ignore[misc]
    top = choice["logprobs"]["content"][0]["top_logprobs"]
    assert len(top) == 20 and all(t["logprob"] <= 0 for t in top)
    mass = sum(math.exp(t["logprob"]) for t in top)
    assert 0.5 < mass <= 1.0 + 1e-6
    assert data["model"] == llama.model
    assert data["usage"]["completion_tokens"] == 1  # type: ignore[index]


def test_a_shared_prefix_is_evaluated_once_and_the_server_says_so(llama: LlamaServer) -> None:
    state = "Ticket: " + " ".join(f"line {i} of the message." for i in range(12))
    first = chat(llama, state + "\nQuestion: is the customer angry?")
    before = metric(llama, "prompt_tokens_total")
    second = chat(llama, state + "\nQuestion: does the customer want a refund?")
    evaluated = metric(llama, "prompt_tokens_total") - before
    timings, usage = second["timings"], second["usage"]
    assert timings["cache_n"] > 80  # type: ignore[index]  # the system text and the state, reused
    assert usage["prompt_tokens_details"]["cached_tokens"] == timings["cache_n"]  # type: ignore[index]
    assert usage["prompt_tokens"] == timings["cache_n"] + timings["prompt_n"]  # type: ignore[index]
    assert evaluated == timings["prompt_n"] < 20  # type: ignore[index]  # only the new question
    assert first["usage"]["prompt_tokens"] > timings["cache_n"]  # type: ignore[index]


def test_the_launcher_stops_the_server_it_started(tmp_path: Path) -> None:
    with llama_server(tmp_path / "log") as server:
        assert httpx.get(server.url + "/health", timeout=10).status_code == 200
        pid = server.pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # exited and reaped
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url + "/health", timeout=1)


def test_a_server_that_cannot_start_fails_with_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"this is not a GGUF file")
    monkeypatch.setenv("FABRIC_JEV_LLAMA_MODEL", str(bad))
    before = child_pids()
    # The server's own error line, then the tail of everything it printed.
    with pytest.raises(LlamaServerFailed, match=r"could not start: [^\n]*failed to load model[^\n]*:\n(.|\n)*gguf"), \
            llama_server(tmp_path / "log"):
        pass
    assert child_pids() == before  # the child that failed was reaped
