"""The `openai:` route against a real llama.cpp server (llama-server with SmolLM2-135M-Instruct).

What only a real server shows: the route's probabilities are the server's own next-token
distribution over the labels, renormalised; five questions on one state pay for the state once
(the server's own counts of prompt tokens evaluated and reused); `learn` fits temperatures on
it that the route then applies. States are short: this machine
evaluates about 100 prompt tokens per CPU second.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from fabric_jev import HostConfig
from fabric_jev.benchmarks.llama_server import LlamaServer
from fabric_jev.contract.evaluation import Evaluation, EvaluationRequest, validate_request
from fabric_jev.evaluators.select import evaluator_from_spec
from tests.llama_server import Exchange, relay

ROOT = Path(__file__).resolve().parent.parent

TICKET = ("Hello, I ordered a blue kettle on the 3rd and was charged twice. The parcel still has not "
          "arrived and the tracking link shows an error. Please refund the second charge. Sam")


def config(base_url: str) -> HostConfig:
    return HostConfig.model_validate({"evaluator": {"kind": "openai:smollm2-135m-instruct",
                                                    "baseUrls": {"openai": base_url}}})


def metric(server: LlamaServer, name: str) -> int:
    text = httpx.get(server.url + "/metrics", timeout=10).text
    (value,) = [line.split()[-1] for line in text.splitlines() if line.startswith(f"llamacpp:{name} ")]
    return int(float(value))


def softmax_over(labels: list[str], top: list[dict[str, Any]]) -> list[float]:
    """What the server's top_logprobs say about `labels`: each label's probability (spellings that
    differ in case or surrounding space merged), renormalised over the labels."""
    mass = [sum(math.exp(t["logprob"]) for t in top if t["token"].strip().casefold() == label.casefold())
            for label in labels]
    return [m / sum(mass) for m in mass]


async def through_relay(llama: LlamaServer, settings: HostConfig,
                        request: EvaluationRequest) -> tuple[Evaluation, list[Exchange]]:
    """One evaluation by the `openai:` route with `settings`, sent through a relay to the server:
    the answer, and each request the route sent with the response it read."""
    with relay(llama.url) as (url, exchanges):
        evaluator = evaluator_from_spec("openai:" + llama.model, settings.model_copy(update={"evaluator": {
            **settings.evaluator, "baseUrls": {"openai": url}}}))
        try:
            evaluation = await evaluator.evaluate(request, timeout=120)
        finally:
            await evaluator.aclose()
    return evaluation, list(exchanges)


@pytest.mark.timeout(120)
@pytest.mark.anyio
async def test_the_route_reads_the_servers_own_next_token_distribution(llama: LlamaServer) -> None:
    request = validate_request({"state": TICKET, "questions": {
        "team": {"type": "choice", "instructions": "Which team should handle this ticket?",
                 "criteria": {"billing": "payments and refunds", "shipping": "parcels and delivery",
                              "technical": "bugs and errors"}}}})
    # No prefix cache for this request, nor for the bare one below: both evaluate the whole prompt in
    # the same batches, so the server gives the same logits (across a cached and an uncached prefix,
    # llama.cpp's logits differed by up to 0.04 here).
    uncached = HostConfig.model_validate({"evaluator": {
        "kind": "openai:" + llama.model, "baseUrls": {"openai": "http://127.0.0.1:1/v1"},
        "extraBody": {"cache_prompt": False}}})
    evaluation, exchanges = await through_relay(llama, uncached, request)
    (sent,) = exchanges
    assert sent.path == "/v1/chat/completions" and sent.request["max_tokens"] == 1 and sent.request["logprobs"]
    assert sent.request["cache_prompt"] is False
    got = evaluation.answers["team"]["probabilities"]
    # The same body again, straight to the server with a bare client: its own top_logprobs.
    fresh = httpx.post(llama.base_url + "/chat/completions", json=sent.request, timeout=120).json()
    top = fresh["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    expected = softmax_over(["A", "B", "C"], top)
    assert [got["billing"], got["shipping"], got["technical"]] == pytest.approx(expected, abs=1e-6)
    # And exactly what the route was answered (the relay's copy of the response it read).
    answered = softmax_over(["A", "B", "C"], sent.response["choices"][0]["logprobs"]["content"][0]["top_logprobs"])
    assert [got["billing"], got["shipping"], got["technical"]] == pytest.approx(answered, rel=1e-9)
    assert evaluation.provenance is not None and evaluation.provenance.readout == "logprobs"


@pytest.mark.timeout(120)
@pytest.mark.anyio
async def test_constrained_samples_come_back_in_the_labels(llama: LlamaServer) -> None:
    """The samples a question falls back to when its logprobs name no label: llama.cpp holds each to the
    JSON schema's enum of labels, and the answer is the smoothed count of what the samples named."""
    config = HostConfig.model_validate({"evaluator": {"kind": "openai:" + llama.model, "readout": "samples",
                                                      "samples": 3, "baseUrls": {"openai": "http://127.0.0.1:1/v1"}}})
    request = validate_request({"state": "Please refund the second charge.", "questions": {
        "refund": {"type": "noul", "instructions": "Does the customer ask for money back?"}}})
    evaluation, exchanges = await through_relay(llama, config, request)
    assert len(exchanges) == 3 and all("response_format" in e.request for e in exchanges)
    named = [json.loads(e.response["choices"][0]["message"]["content"])["label"] for e in exchanges]
    assert set(named) <= {"Yes", "No"}  # the server's own text, parsed as JSON (it spaces it its own way)
    assert evaluation.answers["refund"]["noul"] == pytest.approx((named.count("Yes") + 0.5) / 4)
    p = evaluation.provenance
    assert p is not None and (p.readout, p.samples, p.valid_mass) == ("samples", 3, {"refund": 1.0})


@pytest.mark.timeout(180)
@pytest.mark.anyio
async def test_five_questions_on_one_state_pay_for_the_state_once(llama: LlamaServer) -> None:
    # A state no earlier request has shown the server, so none of it is in the slot's cache.
    state = f"Ticket {os.getpid()}-{id(llama)}:\n" + "\n".join(
        f"Line {i}: the customer repeats that the kettle order {i * 7} was charged twice." for i in range(12))
    questions = {
        "refund": {"type": "noul", "instructions": "Refund asked?"},
        "angry": {"type": "noul", "instructions": "Angry?"},
        "team": {"type": "choice", "instructions": "Team?", "criteria": {"billing": None, "shipping": None}},
        "urgency": {"type": "score", "instructions": "Urgency?", "criteria": ["low", "high"]},
        "repeat": {"type": "noul", "instructions": "Repeated?"},
    }
    state_tokens = len(httpx.post(llama.url + "/tokenize", json={"content": state}, timeout=30).json()["tokens"])
    evaluated, cached = metric(llama, "prompt_tokens_total"), metric(llama, "prompt_tokens_cached_total")
    evaluator = evaluator_from_spec("openai:" + llama.model, config(llama.base_url))
    try:
        evaluation = await evaluator.evaluate(validate_request({"state": state, "questions": questions}), timeout=300)
    finally:
        await evaluator.aclose()
    evaluated = metric(llama, "prompt_tokens_total") - evaluated
    cached = metric(llama, "prompt_tokens_cached_total") - cached
    assert state_tokens > 200
    # Every question's prompt holds the whole state; the server read it from its cache for four of them.
    assert evaluation.usage.input_tokens == evaluated + cached
    assert cached >= 4 * state_tokens
    # What was evaluated: the state once, the system text, five short questions; not five states.
    assert evaluated < evaluation.usage.input_tokens / 2


@pytest.mark.timeout(240)
@pytest.mark.anyio
async def test_learn_fits_temperatures_that_the_route_then_applies(llama: LlamaServer, tmp_path: Path) -> None:
    from fabric_jev.calibration.labels import read_labels
    from fabric_jev.calibration.learn_temperatures import tempered
    from fabric_jev.evaluators.llm_profile import LlmProfile

    shipped = (ROOT / "examples" / "llm-calibration" / "labels.jsonl").read_text().splitlines()
    picked = ([line for line in shipped if '"id": "review-00' in line][:3]
              + [line for line in shipped if '"id": "route-00' in line][:3])
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(picked) + "\n")
    out = tmp_path / "smol.profile.json"
    env = {**os.environ, "FABRIC_JEV_OPENAI_BASE_URL": llama.base_url}
    done = subprocess.run([sys.executable, "-m", "fabric_jev.cli", "learn", str(labels), "--evaluator",
                           "openai:" + llama.model, "--out", str(out), "--holdout", "0.34", "--concurrency", "1"],
                          capture_output=True, text=True, timeout=220, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    assert "held-out" in done.stdout and "ECE" in done.stdout and f"wrote {out}" in done.stdout
    profile = LlmProfile.load(out)
    assert (profile.route, profile.model, profile.readout) == ("openai", llama.model, "logprobs")
    assert set(profile.temperatures) == {"noul", "choice"}
    assert profile.report["heldOut"]["examples"] == 2
    # The route applies it: the same question, answered without and with the profile.
    example = read_labels(labels)[0]
    answers = []
    for extra in ({}, {"profile": str(out)}):
        evaluator = evaluator_from_spec("openai:" + llama.model, HostConfig.model_validate(
            {"evaluator": {"kind": "openai:" + llama.model, "baseUrls": {"openai": llama.base_url}, **extra}}))
        try:
            answers.append(await evaluator.evaluate(example.request(), timeout=120))
        finally:
            await evaluator.aclose()
    plain, calibrated = answers
    assert calibrated.provenance is not None and calibrated.provenance.calibration == "temperature"
    expected = tempered(example.question, plain.answers["q"], profile.temperatures["noul"])
    assert calibrated.answers["q"]["noul"] == pytest.approx(expected["noul"], abs=2e-3)


@pytest.mark.timeout(1800)
def test_serve_in_front_of_llama_cpp_passes_every_must_of_jevcompat(llama: LlamaServer, tmp_path: Path) -> None:
    """`fabric-jev serve --evaluator ollama:MODEL` as a gateway to the real llama.cpp server: the real
    `jevcompat test` passes every MUST, 255-option choices (read in rounds) and 128 questions included.
    SmolLM2 often starts an answer with a word, so some questions have no label among the 20 next
    tokens the server lists: those are read from constrained samples, never refused."""
    from tests.test_serve import JEVCOMPAT, served

    log: list[str] = []
    report_file = tmp_path / "report.json"
    with served("--evaluator", f"ollama:{llama.model}", "--request-timeout", "1200", "--no-access-log",
                env={"FABRIC_JEV_OLLAMA_BASE_URL": llama.base_url}, log=log) as url:
        # About 100 requests to llama.cpp: 4-5 minutes here under load, more on a busier machine.
        done = subprocess.run([str(JEVCOMPAT), "test", url, "--json", str(report_file), "--timeout", "1200"],
                              capture_output=True, text=True, timeout=1700)
    report = json.loads(report_file.read_text())
    summary = report["summary"]
    failed = [r["id"] for r in report["results"] if r["status"] == "fail"]
    assert summary["MUST"]["failed"] == 0 and summary["untested_musts"] == [], (failed, log[-20:])
    assert summary["verdict"] == "conformant" and done.returncode == 0, (summary, failed, done.stdout[-2000:])
    assert summary["MUST"]["passed"] == summary["MUST"]["tested"] > 0
