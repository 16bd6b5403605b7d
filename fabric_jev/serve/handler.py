"""The request logic of `fabric-jev serve`, separate from sockets: a function of
(method, path, headers, body bytes) to (status, JSON payload).

Answers ``POST /v1/systemone`` with the same request and response shapes as
TypeSafe's System One, and the same error bodies (422 with ``detail[]`` for
validation, ``detail.error_type`` / ``detail.message`` otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.to_thread

from .._bearer import bearer_matches
from .._json import JSONInputError, copy_tree, loads_bounded, values_at_most
from ..contract.evaluation import MAX_DEPTH, MAX_NODES, EvaluationRequest, validate_request
from ..contract.provenance import Provenance
from ..errors import EvaluationError, RequestInvalid, UpstreamError
from ..evaluators.base import Evaluator
from .limits import ServeLimits

MODELS = ("jev-latest", "jev-1.13", "jev-1.13.0", "jev-preview")
DEFAULT_MODEL = "jev-latest"
#: Bodies above this are parsed in a worker thread: a 4 MiB parse is tens of milliseconds.
_PARSE_INLINE_BYTES = 64 * 1024

Response = tuple[int, dict[str, Any]]
#: One answer whatever was wrong (no header, another scheme, a wrong key): it tells a guesser nothing.
UNAUTHORIZED_MESSAGE = "Missing or invalid API key: send Authorization: Bearer <key>"


def error(status: int, error_type: str, message: str) -> Response:
    return status, {"detail": {"error_type": error_type, "message": message}}


def _invalid(msg: str, type_: str = "value_error", loc: tuple[str, ...] = ("body",)) -> Response:
    return 422, {"detail": [{"loc": list(loc), "msg": msg, "type": type_}]}


class JevServer:
    """What each request means; sockets, limits on bytes and time live in the ASGI layer."""

    def __init__(self, evaluator: Evaluator | str, *, key: str | Sequence[str] | None = None,
                 limits: ServeLimits | None = None) -> None:
        """`evaluator` is an Evaluator, or a spec string (``"local"``, ``"fixture:FILE"``, ...):
        one built from a spec belongs to this server, and `aclose()` closes it."""
        self._owned = isinstance(evaluator, str)
        if isinstance(evaluator, str):
            from ..evaluators.select import evaluator_from_spec

            evaluator = evaluator_from_spec(evaluator)
        self.evaluator: Evaluator = evaluator
        self.key = key if isinstance(key, str) or key is None else (key[0] if key else None)
        #: Every accepted key (a shared host gives one per client).
        self.keys: tuple[str, ...] = (key,) if isinstance(key, str) else tuple(key or ())
        self.limits = limits or ServeLimits()
        self._evaluations: anyio.CapacityLimiter | None = None
        #: The last provenance written and its JSON: an evaluator names itself the same way on
        #: every answer, and a provenance cannot change.
        self._provenance: tuple[Provenance, dict[str, Any]] | None = None

    async def aclose(self) -> None:
        """Close the evaluator this server built from a spec (one given as an object stays open)."""
        if self._owned:
            await self.evaluator.aclose()

    def _auth(self, headers: Mapping[str, str]) -> Response | None:
        if not self.keys:
            return None
        # Every key is compared (a list, not any()): the time does not tell which one came close.
        if not any([bearer_matches(headers.get("authorization"), key) for key in self.keys]):
            return error(401, "authentication_error", UNAUTHORIZED_MESSAGE)
        return None

    def refusal(self, method: str, path: str, headers: Mapping[str, str]) -> Response | None:
        """What the headers alone refuse (no route, wrong method, no or a wrong key), before any
        byte of the body is read: a client without the key cannot hold a connection with a body
        that never ends."""
        path = path.split("?", 1)[0]
        if method == "GET" and path == "/v1/models":
            return self._auth(headers)
        if path != "/v1/systemone":
            return error(404, "not_found", f"No route {path}")
        if method != "POST":
            return error(405, "method_not_allowed", "Use POST /v1/systemone")
        return self._auth(headers)

    async def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes, *,
                     admitted: bool = False) -> Response:
        """The answer to one request; `admitted`: `refusal` already passed these headers."""
        if not admitted:
            refused = self.refusal(method, path, headers)
            if refused:
                return refused
        path = path.split("?", 1)[0]
        if method == "GET" and path == "/v1/models":
            try:
                model = self.evaluator.status().model
            except Exception:  # as for x_evaluator below: a broken status() does not hide the aliases
                model = "unknown"
            return 200, {"models": [{"name": m, "description": f"served by fabric-jev ({model})",
                                     "release_date": "2026-11-29"} for m in MODELS]}
        if len(body) > _PARSE_INLINE_BYTES:
            parsed = await anyio.to_thread.run_sync(self._parse, body)
        else:
            parsed = self._parse(body)
        if not isinstance(parsed, EvaluationRequest):
            return parsed
        if parsed.model not in MODELS:
            return error(400, "api_usage_error", f"Unknown model: {parsed.model}")
        # The served evaluator answers with its own model; the requested alias is only checked.
        request = EvaluationRequest(state=parsed.state, questions=parsed.questions, model=None)
        if self._evaluations is None:
            self._evaluations = anyio.CapacityLimiter(self.limits.max_evaluations)
        limiter = self._evaluations
        try:
            limiter.acquire_nowait()  # no checkpoint when a place is free: one loop turn less per request
        except anyio.WouldBlock:
            await limiter.acquire()
        try:
            evaluation = await self.evaluator.evaluate(request, timeout=self.limits.request_timeout_s)
        except UpstreamError as exc:
            status = 429 if exc.status in (429, 529) else 502
            return error(status, "upstream_error", str(exc))
        except EvaluationError as exc:
            return error(502, "evaluator_error", str(exc))
        finally:
            limiter.release()
        # Extensions of the wire format are prefixed x_ (the spec asks it): who answered is x_provenance,
        # the shape every other result calls `evaluator`; x_evaluator is the route alone, as before.
        out = evaluation.to_json(evaluator=False)
        try:
            route = self.evaluator.status().route
        except Exception:  # a broken status() cannot undo an evaluation that succeeded
            route = "unknown"
        out["x_evaluator"] = route
        provenance = evaluation.provenance
        if provenance is not None:
            written = self._provenance
            if written is None or written[0] is not provenance:
                written = self._provenance = (provenance, provenance.to_json())
            out["x_provenance"] = copy_tree(written[1])
        return 200, out

    def _parse(self, body: bytes) -> EvaluationRequest | Response:
        """Bounded parse and validation of an untrusted body (may run in a worker thread)."""
        try:
            raw = loads_bounded(body, what="request body", max_bytes=self.limits.max_body_bytes,
                                max_depth=MAX_DEPTH)
        except JSONInputError as exc:  # lone surrogate escapes too: such text cannot be tokenized or hashed
            return _invalid(str(exc), "json_invalid")
        if not isinstance(raw, dict):
            return _invalid("request body must be a JSON object {state, questions, model?}", "model_attributes_type")
        # `model` is optional, as the docs say: the SDKs' default alias stands in.
        if raw.get("model") is None:
            raw["model"] = DEFAULT_MODEL
        # Parsed just now from at most max_body_bytes, depth and numbers checked: when its bytes
        # count few enough values, it need not be walked and serialized again to be measured.
        measured = values_at_most(body, MAX_NODES) <= MAX_NODES
        try:
            return validate_request(raw, max_bytes=self.limits.max_body_bytes, wire=True, measured=measured)
        except RequestInvalid as exc:
            return _invalid(str(exc))
