"""`gguf:PATH`: a GGUF model file, served by llama.cpp that the host starts itself.

For a user with a model file and no server of their own (no Ollama, no
llama-server). Needs the `gguf` extra (``pip install 'fabric-jev[gguf]'``:
xllamacpp, a prebuilt llama.cpp server). The file is checked when the
evaluator is built (it exists, is a regular file and starts with the GGUF
magic bytes), before anything is started. The server starts at the first
evaluation, on 127.0.0.1, is shared by every evaluator of this process that
names the same file with the same settings, and stops when the last of them is
closed (`gguf_server`). Requests go through the `openai:` route's own code
(`LlmEvaluator`) pointed at it, so the prompt, the readout, the provenance and
temperature profiles are the model routes' own; the provenance's route is
``gguf`` and its model the file's name.

Settings, in the config's ``evaluator.gguf`` (docs/evaluators.md)::

    {"evaluator": {"kind": "gguf:models/qwen2.5-1.5b-instruct-q4_k_m.gguf",
                   "gguf": {"contextSize": 8192, "threads": 4, "ports": [8100, 8199]}}}
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

import anyio
import anyio.lowlevel
import httpx

from ..contract.evaluation import Evaluation, EvaluationRequest
from ..errors import UpstreamError
from .backoff import DEFAULT_RETRIES
from .base import NO_CREDENTIALS_NEEDED, EvaluatorStatus
from .gguf_file import ServerSettings, check_gguf_file, model_name
from .gguf_server import ServerLease, ServerProcess, extra_problem
from .llm import DEFAULT_CONCURRENCY, DEFAULT_SAMPLES, LlmEvaluator
from .llm_profile import LlmProfile
from .llm_routes import LlmRoute

#: The route the requests take: the OpenAI wire (Chat Completions), to the server started here.
GGUF_ROUTE = LlmRoute("gguf", "chat", "http://127.0.0.1/v1", "gguf", (), takes_key=False,
                      example="model.gguf")
class GgufEvaluator:
    """An Evaluator over a GGUF file, through llama.cpp's server started for it (the module doc)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        settings: ServerSettings | None = None,
        readout: str = "auto",
        samples: int = DEFAULT_SAMPLES,
        concurrency: int = DEFAULT_CONCURRENCY,
        retries: int = DEFAULT_RETRIES,
        extra_body: Mapping[str, Any] | None = None,
        profile: LlmProfile | None = None,
    ) -> None:
        self.path = check_gguf_file(os.fspath(path))
        self.model = model_name(self.path)
        self.settings = settings or ServerSettings()
        self.route = GGUF_ROUTE
        self._options: dict[str, Any] = {"readout": readout, "samples": samples, "concurrency": concurrency,
                                         "retries": retries, "extra_body": extra_body, "profile": profile}
        self._client = httpx.AsyncClient(
            follow_redirects=False, timeout=None, trust_env=False,
            limits=httpx.Limits(max_keepalive_connections=64, max_connections=64))
        # Built now, pointed nowhere yet: a bad setting or profile is refused before anything starts.
        self._inner = self._llm("http://127.0.0.1:1/v1")
        self._inner_base: str | None = None
        #: Whether llama.cpp's server can run here, looked up once (status is asked often).
        self._problem = extra_problem()
        self._lease = ServerLease(self.path, self.model, self.settings)
        self._closed = False

    def _llm(self, base: str) -> LlmEvaluator:
        return LlmEvaluator(GGUF_ROUTE, self.model, base_urls={GGUF_ROUTE.name: base}, environ={},
                            client=self._client, **self._options)

    @property
    def mode(self) -> Literal["logprobs", "samples"]:
        """How answers are read now (as `LlmEvaluator.mode`)."""
        return self._inner.mode

    @property
    def server(self) -> ServerProcess | None:
        """The server this evaluator's requests go to, once it is started and ready; None before."""
        return self._lease.running

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        await anyio.lowlevel.checkpoint_if_cancelled()  # a cancelled caller starts nothing
        if self._closed:
            raise UpstreamError(f"the gguf evaluator for {self.model} is closed")
        if self._problem:
            raise UpstreamError(self._problem)
        deadline = anyio.current_time() + timeout
        try:
            with anyio.fail_after(timeout):
                url = await self._lease.url()
        except TimeoutError:
            raise UpstreamError(f"the llama.cpp server for {self.model} was still loading the model after "
                                f"{timeout:g} s; it goes on loading, and the next evaluation waits for it "
                                "again") from None
        base = url + "/v1"
        if base != self._inner_base:  # the first server, or a fresh one after it died
            mode = self._inner.mode
            self._inner, self._inner_base = self._llm(base), base
            self._inner.mode = mode
        return await self._inner.evaluate(request, timeout=max(deadline - anyio.current_time(), 1e-3))

    def status(self) -> EvaluatorStatus:
        """Presence only: whether llama.cpp's server is installed; never starts it."""
        return EvaluatorStatus(GGUF_ROUTE.name, self.model, NO_CREDENTIALS_NEEDED, self._problem, mode="offline")

    async def aclose(self) -> None:
        """Give back this evaluator's share of the server (the last one stops it). Idempotent."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            try:
                await self._lease.release()
            finally:
                await self._client.aclose()


__all__ = ["GGUF_ROUTE", "GgufEvaluator"]
