"""The `openai:` route against a real llama.cpp server (part of `bench evaluators`).

One llama.cpp server (xllamacpp, one slot, SmolLM2-135M-Instruct; ./scripts/setup-llm), three goals
measured in the same run:

- one prefill: a 5-question request on a ~1,000-token state costs at most 1.6× a 1-question
  request (the server's prefix cache reads the state once);
- the route's own cost: at most 1.10× a bare `httpx.AsyncClient` sending the same
  Chat Completions bodies in the same order (the first question alone, then the rest
  at once, as the route sends them);
- calibration: `learn`'s temperatures on examples/llm-calibration/labels.jsonl bring
  the held-out ECE from at least 0.10 to under 0.05.

Every sample uses a state the server has not seen, so no request finds its state in the
cache left by another. The variants alternate within each round, so drift in the
machine's load hits them alike.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from statistics import median as _median
from typing import Any

from .llama_server import LlamaServer, LlamaServerMissing, llama_server, locate_model, locate_server

_ROOT = Path(__file__).resolve().parents[2]
LABELS = _ROOT / "examples" / "llm-calibration" / "labels.jsonl"

_SENTENCES = (
    "The customer writes that the order arrived late and the box was damaged on one side.",
    "They say the invoice lists a charge for express shipping that they never chose.",
    "Support replied twice with a template that did not answer the question about the refund.",
    "The customer adds that the product itself works, but the instructions were missing.",
    "They mention a previous ticket about the same account that was closed without a reply.",
    "The message ends by asking whether the second charge will be returned this week.",
)
QUESTIONS: dict[str, Any] = {
    "refund": {"type": "noul", "instructions": "Does the customer ask for money back?"},
    "team": {"type": "choice", "instructions": "Which team should handle this ticket?",
             "criteria": {"billing": "payments, invoices, refunds", "shipping": "parcels and delivery",
                          "technical": "bugs and errors"}},
    "urgency": {"type": "score", "instructions": "How urgent is the ticket?",
                "criteria": ["not urgent", "within a few days", "today"]},
    "angry": {"type": "noul", "instructions": "Is the customer angry?"},
    "repeat": {"type": "noul", "instructions": "Has the customer written about this before?"},
}


def state(tag: str, sentences: int = 50) -> str:
    """A ticket of about 1,000 tokens (50 sentences: 985 with SmolLM2's tokenizer) that no other sample
    uses: `tag` opens it."""
    body = " ".join(f"({i + 1}) {_SENTENCES[i % len(_SENTENCES)]}" for i in range(sentences))
    return f"Ticket {tag}. {body}"


def _metric(server: LlamaServer, name: str) -> float:
    import httpx

    text = httpx.get(server.url + "/metrics", timeout=30).text
    return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(f"llamacpp:{name} ")))


class _Route:
    def __init__(self, server: LlamaServer) -> None:
        from ..contract.config import HostConfig
        from ..evaluators.select import evaluator_from_spec

        self.evaluator = evaluator_from_spec("openai:" + server.model, HostConfig.model_validate(
            {"evaluator": {"kind": "openai:" + server.model, "baseUrls": {"openai": server.base_url}}}))

    async def once(self, text: str, questions: dict[str, Any]) -> None:
        from ..contract.evaluation import validate_request

        await self.evaluator.evaluate(validate_request({"state": text, "questions": questions}), timeout=600)

    async def aclose(self) -> None:
        await self.evaluator.aclose()


class _Bare:
    """The same bodies the route sends, built with the route's own pure prompt and wire code
    outside the timing, sent by one kept-alive httpx.AsyncClient: the first alone, the rest at once."""

    def __init__(self, server: LlamaServer) -> None:
        import httpx

        self.url = server.base_url + "/chat/completions"
        self.model = server.model
        self.client = httpx.AsyncClient(timeout=600)

    def bodies(self, text: str, questions: dict[str, Any]) -> list[bytes]:
        from ..contract.evaluation import validate_request
        from ..evaluators.llm_prompt import SYSTEM, ask, state_block
        from ..evaluators.llm_wire import chat_logprobs_body

        request = validate_request({"state": text, "questions": questions})
        prefix = state_block(request.state)
        return [json.dumps(chat_logprobs_body(self.model, SYSTEM, prefix + ask(q).text, {}),
                           ensure_ascii=False).encode() for q in request.questions]

    async def send(self, bodies: list[bytes]) -> None:
        import anyio

        async def post(body: bytes) -> None:
            resp = await self.client.post(self.url, content=body, headers={"Content-Type": "application/json"})
            resp.raise_for_status()
            resp.json()

        await post(bodies[0])
        async with anyio.create_task_group() as tg:
            for body in bodies[1:]:
                tg.start_soon(post, body)

    async def aclose(self) -> None:
        await self.client.aclose()


async def _requests(server: LlamaServer, samples: int) -> dict[str, Any]:
    import httpx

    route, bare = _Route(server), _Bare(server)
    one = dict(list(QUESTIONS.items())[:1])
    walls: dict[str, list[float]] = {"route_1": [], "route_5": [], "bare_1": [], "bare_5": []}
    evaluated: dict[str, list[float]] = {k: [] for k in walls}
    tokens = len(httpx.post(server.url + "/tokenize", json={"content": state("x")}, timeout=60).json()["tokens"])
    try:
        await route.once(state("warm-up"), one)  # the system text in the cache, connections open
        for i in range(samples):
            order = list(walls)
            order = order[i % 4:] + order[:i % 4]  # a different variant goes first each round
            for name in order:
                questions = QUESTIONS if name.endswith("_5") else one
                text = state(f"{i}-{name}")
                bodies = bare.bodies(text, questions) if name.startswith("bare") else []
                before = _metric(server, "prompt_tokens_total")
                start = time.perf_counter()
                if name.startswith("route"):
                    await route.once(text, questions)
                else:
                    await bare.send(bodies)
                walls[name].append(time.perf_counter() - start)
                evaluated[name].append(_metric(server, "prompt_tokens_total") - before)
    finally:
        await route.aclose()
        await bare.aclose()
    m = {k: _median(v) for k, v in walls.items()}
    return {"samples": samples, "state_tokens": tokens, "seconds": m,
            "evaluated_tokens": {k: _median(v) for k, v in evaluated.items()},
            "five_over_one": m["route_5"] / m["route_1"],
            "route_over_bare_1": m["route_1"] / m["bare_1"], "route_over_bare_5": m["route_5"] / m["bare_5"]}


async def _calibration(server: LlamaServer, examples: int | None) -> dict[str, Any]:
    from ..calibration.labels import read_labels
    from ..calibration.learn_temperatures import learn_temperatures

    labeled = read_labels(LABELS)
    if examples is not None:
        per_type = max(1, examples // 3)
        labeled = [e for t in ("noul", "choice", "score")
                   for e in [x for x in labeled if x.question.type == t][:per_type]]
    route = _Route(server)
    start = time.perf_counter()
    try:
        fit = await learn_temperatures(route.evaluator, labeled, holdout=0.5, concurrency=1, timeout=600)
    finally:
        await route.aclose()
    r = fit.report
    return {"examples": len(labeled), "seconds": time.perf_counter() - start, "temperatures": fit.temperatures,
            "heldOut": r["heldOut"], "failed": r["failed"], "before": r["before"], "after": r["after"],
            "types": {t: {k: v[k] for k in ("temperature", "before", "after")} for t, v in r["types"].items()}}


async def bench_llm(samples: int = 5, examples: int | None = None) -> dict[str, object]:
    """The three goals against one llama.cpp server; {"missing": why} when it is not installed."""
    try:
        locate_server()
        locate_model()
    except LlamaServerMissing as exc:
        return {"missing": str(exc)}
    with tempfile.TemporaryDirectory() as tmp, llama_server(Path(tmp) / "llama-server.log", context=8192) as server:
        return {"server": f"llama.cpp server (xllamacpp; 1 slot, 1 thread), {server.model}",
                "requests": await _requests(server, samples),
                "calibration": await _calibration(server, examples)}


def print_llm(r: dict[str, Any]) -> None:
    if "missing" in r:
        print(f"  openai: route against llama.cpp: not measured ({r['missing']})")
        return
    q, c = r["requests"], r["calibration"]
    s, ev = q["seconds"], q["evaluated_tokens"]
    print(f"  openai: route against {r['server']}, a {q['state_tokens']}-token state, median of {q['samples']}:")
    print(f"    1 question {s['route_1']:6.2f} s   5 questions {s['route_5']:6.2f} s   ratio "
          f"{q['five_over_one']:.2f} (goal <= 1.6); prompt tokens evaluated {ev['route_1']:.0f} and "
          f"{ev['route_5']:.0f}")
    print(f"    bare httpx, same bodies: 1 question {s['bare_1']:6.2f} s, 5 questions {s['bare_5']:6.2f} s; route "
          f"over bare {q['route_over_bare_1']:.2f} and {q['route_over_bare_5']:.2f} (goal <= 1.10)")
    if c["before"] and c["after"]:
        temps = ", ".join(f"{k} {v:.2f}" for k, v in c["temperatures"].items())
        print(f"    learn on {c['examples']} labeled examples ({c['heldOut']} held out, {c['seconds']:.0f} s): "
              f"ECE {c['before']['ece']:.3f} -> {c['after']['ece']:.3f} (goal: from >= 0.10 to < 0.05), Brier "
              f"{c['before']['brier']:.3f} -> {c['after']['brier']:.3f}, accuracy {c['after']['accuracy']:.1%}; "
              f"temperatures {temps}")
