"""jev.evaluate over HTTP: TypeSafe, OpenRouter and Vercel AI Gateway.

One `httpx.AsyncClient` per evaluator keeps connections alive across calls.
Redirects are refused, retries are never made, the body of an error response
is never read, and a 200 body is streamed with a 1 MiB cap, decompressed
included (`bounded_body`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from functools import partial

import anyio.lowlevel
import anyio.to_thread
import httpx

from ..contract.evaluation import MAX_RESPONSE_BYTES, Evaluation, EvaluationRequest, parse_response_bytes
from ..contract.provenance import Provenance
from ..errors import EvaluationError, UpstreamError
from .base import EvaluatorStatus, evaluation_deadline
from .bounded_body import ACCEPT_ENCODING, read_capped
from .credentials import CredentialResolver
from .routes import Route, endpoint

RATE_LIMITED = frozenset({429, 529})
#: A body larger than this is parsed, and searched for the key, in a worker thread: near the
#: 1 MiB cap that takes 0.1-0.3 s, which on the event loop would stall every other run.
PARSE_INLINE_BYTES = 64 * 1024


def status_error(status: int) -> UpstreamError:
    if status in RATE_LIMITED:
        return UpstreamError(f"Jev upstream rate limited (HTTP {status}); back off before retrying",
                             status=status)
    if 300 <= status < 400:
        return UpstreamError(f"Jev upstream answered with a redirect (HTTP {status}); "
                             "redirects are refused", status=status)
    return UpstreamError(f"Jev upstream returned HTTP {status}", status=status)


class HttpEvaluator:
    """An Evaluator for one route. Close it (or the host) to release connections."""

    def __init__(
        self,
        route: Route,
        *,
        model: str = "jev-latest",
        credentials: CredentialResolver | None = None,
        base_urls: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.route = route
        self.model = model
        route.model_id(model)  # refuse a model this route does not serve, at configuration time
        self.url = endpoint(route, base_urls, environ)
        self._url = httpx.URL(self.url)  # parsed once, not per request
        self.credentials = credentials or CredentialResolver(route, environ=environ)
        self._client = client or httpx.AsyncClient(
            follow_redirects=False,
            timeout=None,  # the caller's timeout covers the whole call, lookup included
            limits=httpx.Limits(max_keepalive_connections=8, max_connections=16),
            trust_env=False,
        )
        self.requests = 0

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        await anyio.lowlevel.checkpoint_if_cancelled()  # a cancelled caller sends nothing
        with evaluation_deadline(timeout):
            evaluation = await self._evaluate(request)
        return evaluation

    async def _evaluate(self, request: EvaluationRequest) -> Evaluation:
        model = self.route.model_id(request.model or self.model)
        key = await self.credentials.key()
        body = json.dumps(request.to_wire(model), ensure_ascii=False).encode("utf-8")
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
                   "Accept": "application/json", "Accept-Encoding": ACCEPT_ENCODING}
        self.requests += 1
        try:
            async with self._client.stream("POST", self._url, content=body, headers=headers) as resp:
                if resp.status_code != 200:
                    raise status_error(resp.status_code)
                data = await read_capped(resp, MAX_RESPONSE_BYTES, "evaluator response")
        except EvaluationError:
            raise
        except httpx.HTTPError as exc:
            # The exception text can name the URL but never the key or a body.
            raise UpstreamError(f"Jev upstream unreachable ({type(exc).__name__})") from None
        if len(data) <= PARSE_INLINE_BYTES:
            evaluation = parse_response_bytes(request, data, secret=key)  # the common case: well under 1 ms
        else:
            evaluation = await anyio.to_thread.run_sync(partial(parse_response_bytes, request, data, secret=key))
        return replace(evaluation, provenance=self.provenance(evaluation.model or model))

    def provenance(self, model: str) -> Provenance:
        """A System One answer: the service's own distribution, named by the model it reported."""
        return Provenance(route=self.route.name, model=model, readout="systemone", calibration="upstream")

    def status(self) -> EvaluatorStatus:
        credentials = self.credentials.status()
        # Presence only: a configured key may still be refused upstream (verified: false).
        problem = None if credentials.configured else self.credentials.missing_message()
        return EvaluatorStatus(self.route.name, self.model, credentials, problem, mode="online")

    async def aclose(self) -> None:
        await self._client.aclose()
