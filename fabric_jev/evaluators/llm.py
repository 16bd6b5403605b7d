"""jev.evaluate from a language model you run: `openai:MODEL`, `ollama:MODEL`, `anthropic:MODEL`.

The driver around the pure parts (`llm_prompt`, `llm_wire`, `readout`,
`backoff`): one `httpx.AsyncClient` per evaluator, redirects refused, every
body streamed with a 1 MiB cap, decompressed included (`bounded_body`),
errors that give the HTTP status only.

One evaluation asks each question in its own request (a choice over more
than 26 options in rounds, then a final round among their winners), all with
the same prompt prefix. The first request goes alone, so that the state is in
the server's prefix cache before the others, which then run concurrently
within `concurrency`, shared by every evaluation of this evaluator. A 429 or
5xx is retried (`backoff`). Token usage is summed over every request.

A question whose logprobs name none of its labels (a small model that starts
with a word), or are not a distribution (`readout.DistributionRefused`: NaN,
infinite or positive log-probabilities, a listed mass over 1), is read from
constrained samples instead, under readout `auto`: its valid mass is 0, the
provenance lists it in `sampled` and says why in `sampledReasons`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
import httpx

from ..contract.evaluation import MAX_DEPTH, MAX_RESPONSE_BYTES, Evaluation, EvaluationRequest, validate_answers
from ..contract.provenance import Provenance, SampledReason
from ..errors import AnswerInvalid, ConfigError, EvaluationError, UpstreamError
from ..questions import kind_of
from .backoff import DEFAULT_RETRIES, MAX_RETRIES, retry_delay
from .base import NO_CREDENTIALS_NEEDED, CredentialStatus, EvaluatorStatus, Mode, evaluation_deadline
from .bounded_body import read_capped
from .credentials import CredentialResolver
from .llm_profile import LlmProfile
from .llm_prompt import SYSTEM, Ask, ask, request_labels, state_block
from .llm_routes import LlmRoute, base_url, endpoint, is_llm_model, is_loopback_url, key_needed
from .llm_wire import (
    OWN_FIELDS,
    Completion,
    anthropic_headers,
    chat_headers,
    chat_logprobs_body,
    chat_sample_body,
    messages_body,
    read_chat,
    read_messages,
)
from .readout import (
    LOW_MASS,
    DistributionRefused,
    NoValidLabel,
    Reading,
    answer,
    combine_rounds,
    read_logprobs,
    read_samples,
    rounds,
    temper,
)

ReadoutMode = Literal["auto", "logprobs", "samples"]
DEFAULT_SAMPLES = 5
MAX_SAMPLES = 50
DEFAULT_CONCURRENCY = 4
MAX_CONCURRENCY = 64
MAX_EXTRA_BODY_BYTES = 16_384
#: A body larger than this is parsed, and searched for the key, in a worker thread.
PARSE_INLINE_BYTES = 64 * 1024
T = TypeVar("T")


class _NoLogprobs(Exception):
    """The server answered without logprobs (or refused to give them)."""


@dataclass
class _Turn:
    """One evaluation's requests: the first goes alone, so the state is cached before the others go."""

    claimed: bool = False
    first_done: anyio.Event = field(default_factory=anyio.Event)
    replies: list[Completion] = field(default_factory=list)


class LlmEvaluator:
    """An Evaluator over a language model's Chat Completions or Messages API (see the module doc)."""

    def __init__(
        self,
        route: LlmRoute,
        model: str,
        *,
        base_urls: Mapping[str, object] | None = None,
        environ: Mapping[str, str] | None = None,
        credentials: CredentialResolver | None = None,
        readout: str = "auto",
        samples: int = DEFAULT_SAMPLES,
        concurrency: int = DEFAULT_CONCURRENCY,
        retries: int = DEFAULT_RETRIES,
        extra_body: Mapping[str, Any] | None = None,
        profile: LlmProfile | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if not is_llm_model(model):
            raise ConfigError(f"model name {model[:140]!r} for the {route.name} route is not usable")
        self.route = route
        self.model = model
        self.base_url = base_url(route, base_urls, environ)
        self.url = endpoint(route, self.base_url)
        self._url = httpx.URL(self.url)
        if readout not in ("auto", "logprobs", "samples"):
            raise ConfigError("evaluator.readout must be auto, logprobs or samples")
        if route.wire == "messages" and readout == "logprobs":
            raise ConfigError(f"the {route.name} route gives no logprobs: use readout samples (or auto)")
        self.readout: ReadoutMode = readout  # type: ignore[assignment]  # checked just above
        self.samples = _bounded(samples, "evaluator.samples", 1, MAX_SAMPLES)
        self.concurrency = _bounded(concurrency, "evaluator.concurrency", 1, MAX_CONCURRENCY)
        self.retries = _bounded(retries, "evaluator.retries", 0, MAX_RETRIES)
        self.extra_body = _extra(extra_body)
        if profile is not None and (profile.route, profile.model) != (route.name, model):
            raise ConfigError(f"profile {profile.name} was fitted for {profile.route}:{profile.model}, "
                              f"not {route.name}:{model}")
        self.profile = profile
        #: How answers are read now: auto starts with logprobs and keeps to samples once a server gave none.
        self.mode: Literal["logprobs", "samples"] = (
            "samples" if route.wire == "messages" or readout == "samples" else "logprobs")
        self.credentials = credentials or CredentialResolver(route, environ=environ)
        self._needs_key = key_needed(route, self.base_url)
        self._client = client or httpx.AsyncClient(
            follow_redirects=False,
            timeout=None,  # the caller's timeout covers the whole call, retries included
            limits=httpx.Limits(max_keepalive_connections=self.concurrency, max_connections=self.concurrency),
            trust_env=False,
        )
        self._limiter: anyio.CapacityLimiter | None = None
        #: HTTP requests sent, retries included.
        self.requests = 0

    # ------------------------------------------------------------------ the Evaluator protocol

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        await anyio.lowlevel.checkpoint_if_cancelled()  # a cancelled caller sends nothing
        with evaluation_deadline(timeout):
            evaluation = await self._evaluate(request)
        return evaluation

    def status(self) -> EvaluatorStatus:
        """Presence only: never runs the credential command, never calls the server."""
        credentials, problem = self.credential_status()
        mode: Mode = "offline" if is_loopback_url(self.base_url) else "online"
        return EvaluatorStatus(self.route.name, self.model, credentials, problem, mode=mode)

    def credential_status(self) -> tuple[CredentialStatus, str | None]:
        if not self.route.takes_key:
            return NO_CREDENTIALS_NEEDED, None
        found = self.credentials.status()
        if found.configured or not self._needs_key:
            return (found if found.configured else NO_CREDENTIALS_NEEDED), None
        return found, self.credentials.missing_message()

    async def aclose(self) -> None:
        await self._client.aclose()

    # ------------------------------------------------------------------ one evaluation

    async def _evaluate(self, request: EvaluationRequest) -> Evaluation:
        key = await self._key()
        spent: list[Completion] = []  # every answered request counts toward usage, a logprobs one that failed too
        if self.mode == "logprobs":
            try:
                return await self._answer(request, key, "logprobs", spent)
            except _NoLogprobs:
                if self.readout != "auto":
                    raise AnswerInvalid(f"the {self.route.name} server gave no logprobs for {self.model}; "
                                        "set evaluator.readout to samples (or auto)") from None
                self.mode = "samples"  # this server will not give them: sample from now on
        return await self._answer(request, key, "samples", spent)

    async def _key(self) -> str | None:
        if not self.route.takes_key:
            return None
        if self._needs_key:
            return await self.credentials.key()
        try:  # a loopback server: its key when there is one, none otherwise
            return await self.credentials.key()
        except EvaluationError:
            return None

    async def _answer(self, request: EvaluationRequest, key: str | None, mode: Literal["logprobs", "samples"],
                      spent: list[Completion]) -> Evaluation:
        turn = _Turn(replies=spent)
        prefix = state_block(request.state)
        labels = request_labels(request)  # the Messages wire's one answer tool

        # Questions whose logprobs could not be read (no label among them, or not a distribution),
        # read from samples instead, with the first reason each gave.
        sampled: dict[str, SampledReason] = {}

        async def sample(item: Ask, where: str) -> Reading:
            body = self._body(item, prefix, labels, "samples")
            replies = await _gather([partial(self._send, body, key, turn, logprobs=False)] * self.samples)
            return read_samples(item.labels, [r.pick for r in replies], where)

        async def read(item: Ask) -> Reading:
            where = f"question {item.question.id!r}"
            if mode == "samples":
                return await sample(item, where)
            reply = await self._send(self._body(item, prefix, labels, "logprobs"), key, turn, logprobs=True)
            if reply.candidates is None:
                raise _NoLogprobs
            try:
                return read_logprobs(item.labels, reply.candidates, where)
            except (NoValidLabel, DistributionRefused) as exc:
                if self.readout != "auto":
                    raise
                reason = exc.reason
            # The model wanted to say something else first (a word, a space): none of the labels is
            # among the tokens listed, so their probabilities cannot be read; or what the server
            # listed is not a distribution. Constrained samples still answer in the labels; the
            # answer is flagged (valid mass 0, provenance `sampled`, and why in `sampledReasons`).
            sampled.setdefault(item.question.id, reason)
            return Reading((await sample(item, where)).probabilities, 0.0)

        async def question(q_index: int) -> tuple[tuple[float, ...], float]:
            q = request.questions[q_index]
            keys = kind_of(q.type).rounds(q)
            if keys is None:
                reading = await read(ask(q))
                return reading.probabilities, reading.valid_mass
            groups = rounds(len(keys))
            readings = await _gather([partial(read, ask(q, [keys[i] for i in g])) for g in groups])
            winners = [max(range(len(r.probabilities)), key=r.probabilities.__getitem__) for r in readings]
            final = await read(ask(q, [keys[g[w]] for g, w in zip(groups, winners, strict=True)]))
            return (combine_rounds(readings, final, winners),
                    min(final.valid_mass, *(r.valid_mass for r in readings)))

        results = await _gather([partial(question, i) for i in range(len(request.questions))])
        return self._evaluation(request, results, turn.replies, mode, sampled)

    def _body(self, item: Ask, prefix: str, labels: Sequence[str], mode: str) -> bytes:
        if self.route.wire == "messages":
            body = messages_body(self.model, SYSTEM, prefix, item.text, labels, self.extra_body)
        elif mode == "logprobs":
            body = chat_logprobs_body(self.model, SYSTEM, prefix + item.text, self.extra_body)
        else:
            body = chat_sample_body(self.model, SYSTEM, prefix + item.text, item.labels, self.extra_body)
        return json.dumps(body, ensure_ascii=False).encode("utf-8")

    def _evaluation(self, request: EvaluationRequest, results: Sequence[tuple[tuple[float, ...], float]],
                    replies: Sequence[Completion], mode: Literal["logprobs", "samples"],
                    sampled: Mapping[str, SampledReason]) -> Evaluation:
        profile = self.profile if self.profile is not None and self.profile.applies_to(mode) else None
        answers: dict[str, Any] = {}
        valid: dict[str, float] = {}
        for q, (probabilities, mass) in zip(request.questions, results, strict=True):
            if profile is not None and (q.id not in sampled or profile.applies_to("samples")):
                probabilities = temper(probabilities, profile.temperature(q.type))
            keys = kind_of(q.type).readout_keys(q, probabilities)
            answers[q.id] = answer(q.type, keys, probabilities)
            valid[q.id] = round(mass, 6)
        model = replies[0].model if replies else self.model
        provenance = Provenance(
            route=self.route.name, model=model, readout=mode,
            calibration="temperature" if profile is not None else "none",
            profile=profile.name if profile is not None else None,
            temperatures=dict(profile.temperatures) if profile is not None else None,
            samples=self.samples if mode == "samples" else None,
            valid_mass=valid, low_mass=tuple(qid for qid, m in valid.items() if m < LOW_MASS),
            sampled=tuple(q.id for q in request.questions if q.id in sampled),
            sampled_reasons={q.id: sampled[q.id] for q in request.questions if q.id in sampled} or None)
        usage = {"input_tokens": sum(r.input_tokens for r in replies),
                 "output_tokens": sum(r.output_tokens for r in replies)}
        return validate_answers(request, {"answers": answers, "usage": usage, "model": model},
                                provenance=provenance)

    # ------------------------------------------------------------------ one HTTP request

    async def _send(self, body: bytes, key: str | None, turn: _Turn, *, logprobs: bool) -> Completion:
        first = not turn.claimed
        turn.claimed = True
        if not first:
            await turn.first_done.wait()
        try:
            data = await self._post(body, key)
        except UpstreamError as exc:
            if logprobs and exc.status == 400 and self.readout == "auto":
                raise _NoLogprobs from None  # a server that refuses logprobs for this model
            raise
        finally:
            if first:
                turn.first_done.set()
        if self.route.wire == "messages":
            reply = read_messages(data, self.model)
        else:
            reply = read_chat(data, self.model, logprobs=logprobs)
        turn.replies.append(reply)
        return reply

    async def _post(self, body: bytes, key: str | None) -> object:
        headers = anthropic_headers(key) if self.route.wire == "messages" else chat_headers(key)
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.concurrency)
        attempt = 0
        while True:
            async with self._limiter:
                status, asked, raw = await self._exchange(body, headers)
            if status == 200:
                return await self._parse(raw, key)
            remaining = anyio.current_effective_deadline() - anyio.current_time()
            delay = retry_delay(status, asked, attempt, self.retries, remaining, time.time())
            if delay is None:
                raise self._status_error(status, attempt)
            attempt += 1
            await anyio.sleep(delay)

    async def _exchange(self, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """One POST: (status, the retry headers of an error, the body of a 200, read with a cap)."""
        self.requests += 1
        try:
            async with self._client.stream("POST", self._url, content=body, headers=headers) as resp:
                if resp.status_code != 200:  # the body of an error is never read
                    asked = {k: resp.headers[k] for k in ("retry-after", "retry-after-ms") if k in resp.headers}
                    return resp.status_code, asked, b""
                return 200, {}, await read_capped(resp, MAX_RESPONSE_BYTES, f"the {self.route.name} server's response")
        except httpx.HTTPError as exc:
            # The exception's text can name the URL, never the key or a body; only its type is shown.
            raise UpstreamError(f"the {self.route.name} server is unreachable or broke off "
                                f"({type(exc).__name__})") from None

    async def _parse(self, raw: bytes, key: str | None) -> object:
        if len(raw) <= PARSE_INLINE_BYTES:
            return _parse_body(raw, key, self.route.name)
        return await anyio.to_thread.run_sync(partial(_parse_body, raw, key, self.route.name))

    def _status_error(self, status: int, retried: int) -> UpstreamError:
        after = f" (retried {retried} time{'s' if retried != 1 else ''})" if retried else ""
        if status in (429, 529):
            return UpstreamError(f"the {self.route.name} server is rate limited (HTTP {status}){after}; "
                                 "back off before retrying", status=status)
        if 300 <= status < 400:
            return UpstreamError(f"the {self.route.name} server answered with a redirect (HTTP {status}); "
                                 "redirects are refused", status=status)
        if status in (401, 403):
            return UpstreamError(f"the {self.route.name} server refused the key (HTTP {status})", status=status)
        return UpstreamError(f"the {self.route.name} server returned HTTP {status}{after}", status=status)


def _parse_body(raw: bytes, key: str | None, route: str) -> object:
    from .._json import JSONInputError, loads_bounded

    try:
        body = loads_bounded(raw, what=f"the {route} server's response", max_bytes=MAX_RESPONSE_BYTES,
                             max_depth=MAX_DEPTH)
    except JSONInputError as exc:
        raise AnswerInvalid(str(exc)) from None
    if key:
        from ..redaction.key_echo import carries_key

        if carries_key(body, key):
            raise AnswerInvalid(f"the {route} server's response contains the credential it was sent with; refused")
    return body


async def _gather(calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run `calls` concurrently; their results in order. The first failure cancels the rest and is
    raised as itself (never an exception group); cancellation from outside goes through."""
    results: list[Any] = [None] * len(calls)
    failure: list[BaseException] = []

    async def one(i: int, scope: anyio.CancelScope) -> None:
        try:
            results[i] = await calls[i]()
        except Exception as exc:  # re-raised below, unwrapped
            if not failure:
                failure.append(exc)
            scope.cancel()

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(one, i, tg.cancel_scope)
    if failure:
        raise failure[0]
    return results


def _bounded(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{name} must be a whole number from {low} to {high}")
    return value


def _extra(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    if extra is None:
        return {}
    if not isinstance(extra, Mapping):
        raise ConfigError("evaluator.extraBody must be an object of request fields")
    taken = sorted(set(extra) & OWN_FIELDS)
    if taken:
        raise ConfigError(f"evaluator.extraBody may not set {taken[0]!r}: the route sets it itself")
    try:
        size = len(json.dumps(dict(extra), ensure_ascii=False, allow_nan=False).encode("utf-8"))
    except (TypeError, ValueError):
        raise ConfigError("evaluator.extraBody must be finite JSON") from None
    if size > MAX_EXTRA_BODY_BYTES:
        raise ConfigError(f"evaluator.extraBody exceeds {MAX_EXTRA_BODY_BYTES} bytes")
    return dict(extra)


__all__ = ["DEFAULT_CONCURRENCY", "DEFAULT_SAMPLES", "LlmEvaluator"]
