"""The model routes (`openai:MODEL`, `ollama:MODEL`, `anthropic:MODEL`) against stub servers of each wire on
loopback, whose requests the official openai and anthropic SDKs judge and whose answers their models build."""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from fabric_jev import AnswerInvalid, ConfigError, CredentialError, HostConfig, JevHost, RunState, UpstreamError
from fabric_jev.contract.evaluation import EvaluationRequest, validate_request
from fabric_jev.evaluators import AuthStore, CredentialResolver, evaluator_from_spec
from fabric_jev.evaluators.llm import LlmEvaluator
from fabric_jev.evaluators.llm_profile import LlmProfile
from fabric_jev.evaluators.llm_prompt import state_block
from fabric_jev.evaluators.llm_routes import ANTHROPIC, OLLAMA, OPENAI, LlmRoute
from tests.conftest import program
from tests.llm_stubs import Fault, Model, Stub, stub_server

pytestmark = pytest.mark.anyio
KEY = "sk-llm-route-canary-7f3a9c2e51d04b86"

REQUEST = validate_request({
    "state": {"ticket": "I was charged twice for March. Please refund the duplicate now!"},
    "questions": {
        "refund": {"type": "noul", "instructions": "Does the customer ask for money back?"},
        "team": {"type": "choice", "instructions": "Which team owns it?",
                 "criteria": {"billing": "invoices and refunds", "tech": None, "sales": None}},
        "anger": {"type": "score", "instructions": "How angry is the customer?",
                  "criteria": ["calm", "annoyed", "furious"]},
    }})

#: What the stub model believes, per question (spellings split on purpose, and junk tokens).
NOUL = {"Yes": 0.55, " yes": 0.15, "YES": 0.05, "No": 0.15, " Maybe": 0.1}
CHOICE = {"A": 0.5, " A": 0.1, "b": 0.15, "C": 0.05, "The": 0.2}
SCORE = {"1": 0.45, " 2": 0.3, "0": 0.05, "\n": 0.2}


def model(text: str) -> dict[str, float]:
    if text.endswith("Answer Yes or No."):
        return NOUL
    if "Answer with one letter" in text:
        return CHOICE
    return SCORE


def expected(dist: dict[str, float], labels: list[str]) -> list[float]:
    """The readout written out independently: merge spellings, renormalise over the labels."""
    mass = [sum(p for t, p in dist.items() if t.strip().lower() == label.lower()) for label in labels]
    return [m / sum(mass) for m in mass]


def route(kind: LlmRoute, url: str, tmp: Path, *, key: str | None = KEY, **options: Any) -> LlmEvaluator:
    environ = {kind.env_keys[0]: key} if key and kind.env_keys else {}
    return LlmEvaluator(kind, options.pop("model", "judge-model"), base_urls={kind.name: url}, environ=environ,
                        credentials=CredentialResolver(kind, store=AuthStore(tmp / "auth.json"), environ=environ),
                        **options)


async def ask(evaluator: LlmEvaluator, request: EvaluationRequest = REQUEST, timeout: float = 20) -> Any:
    try:
        return await evaluator.evaluate(request, timeout=timeout)
    finally:
        await evaluator.aclose()


# ------------------------------------------------------------------ logprobs, the OpenAI wire

async def test_logprobs_one_token_per_question_read_over_the_labels(tmp_path: Path) -> None:
    with stub_server(Stub(model)) as stub:
        result = await ask(route(OPENAI, stub.url, tmp_path))
    assert stub.problems == []  # every request is one the openai SDK's types accept
    assert [s.path for s in stub.seen] == ["/v1/chat/completions"] * 3
    for seen in stub.seen:
        body = seen.body
        assert seen.headers["authorization"] == f"Bearer {KEY}"
        assert (body["max_tokens"], body["logprobs"], body["top_logprobs"], body["n"]) == (1, True, 20, 1)
        assert body["model"] == "judge-model" and KEY not in json.dumps(body)
    assert result.answers["refund"]["noul"] == pytest.approx(expected(NOUL, ["Yes", "No"])[0])
    assert list(result.answers["team"]["probabilities"].values()) == pytest.approx(expected(CHOICE, ["A", "B", "C"]))
    assert result.answers["team"]["choice"] == "billing"
    assert list(result.answers["anger"]["probabilities"].values()) == pytest.approx(
        expected(SCORE, ["0", "1", "2"]))
    assert result.model == "stub-model-2025"  # as the server named it
    provenance = result.provenance
    assert (provenance.route, provenance.model, provenance.readout) == ("openai", "stub-model-2025", "logprobs")
    assert provenance.valid_mass == pytest.approx({"refund": 0.9, "team": 0.8, "anger": 0.8})
    assert provenance.low_mass == ()
    # Usage is every request's, summed.
    assert result.usage.output_tokens == 3 and result.usage.input_tokens > 300


async def test_the_official_sdk_reads_the_same_distribution_the_route_does(tmp_path: Path) -> None:
    """The stub driven through the openai SDK: what it parses is what the route read."""
    from openai import AsyncOpenAI

    with stub_server(Stub(model)) as stub:
        result = await ask(route(OPENAI, stub.url, tmp_path))
        first = stub.seen[0].body
        client = AsyncOpenAI(api_key="sk-other", base_url=stub.url, max_retries=0)
        completion = await client.chat.completions.create(
            model=first["model"], messages=first["messages"], max_tokens=1, logprobs=True, top_logprobs=20)
        await client.close()
    top = completion.choices[0].logprobs.content[0].top_logprobs  # type: ignore[union-attr]
    dist = {t.token: math.exp(t.logprob) for t in top}
    question = "refund" if first["messages"][1]["content"].endswith("Yes or No.") else None
    assert question == "refund", "the first request asks the first question"
    assert result.answers["refund"]["noul"] == pytest.approx(expected(dist, ["Yes", "No"])[0])


async def test_every_question_shares_the_state_prefix_and_the_first_goes_alone(tmp_path: Path) -> None:
    many = validate_request({"state": "x" * 4000, "questions": {
        f"q{i}": {"type": "noul", "instructions": f"Question {i}?"} for i in range(6)}})
    with stub_server(Stub(model)) as stub:
        await ask(route(OPENAI, stub.url, tmp_path, concurrency=2), many)
    prefix = state_block(many.state)
    systems = {s.body["messages"][0]["content"] for s in stub.seen}
    assert len(systems) == 1 and all(t.startswith(prefix) for t in stub.user_texts())
    assert len(stub.seen) == 6 and stub.seen[0].done_before == 0
    assert all(s.done_before >= 1 for s in stub.seen[1:])  # sent once the first was answered
    assert stub.max_in_flight <= 2  # the configured concurrency


# ------------------------------------------------------------------ faults

async def test_429_is_retried_after_the_wait_it_asks_for(tmp_path: Path) -> None:
    faults = [Fault(429, {"retry-after-ms": "20"}), Fault(503, {"Retry-After": "0"})]
    with stub_server(Stub(model, faults=faults)) as stub:
        result = await ask(route(OPENAI, stub.url, tmp_path))
    assert len(stub.seen) == 5 and result.answers["refund"]["noul"] > 0.5
    assert result.usage.output_tokens == 3  # only the answered requests count


async def test_500_gives_up_after_two_retries_with_the_status_only(tmp_path: Path) -> None:
    with stub_server(Stub(model, always=Fault(500))) as stub, \
            pytest.raises(UpstreamError) as caught:
        await ask(route(OPENAI, stub.url, tmp_path))
    assert str(caught.value) == "the openai server returned HTTP 500 (retried 2 times)"
    assert caught.value.status == 500 and len(stub.seen) == 3  # the first request and its two retries


async def test_a_wait_past_the_deadline_is_not_waited_for(tmp_path: Path) -> None:
    with stub_server(Stub(model, always=Fault(429, {"Retry-After": "30"}))) as stub, \
            pytest.raises(UpstreamError, match=r"^the openai server is rate limited \(HTTP 429\); back off"):
        await ask(route(OPENAI, stub.url, tmp_path), timeout=10)
    assert len(stub.seen) == 1


async def test_no_logprobs_and_sampling_takes_over(tmp_path: Path) -> None:
    with stub_server(Stub(model, logprobs=False)) as stub:
        evaluator = route(OPENAI, stub.url, tmp_path, samples=3)
        first = await evaluator.evaluate(REQUEST, timeout=20)
        asked = len(stub.seen)
        second = await ask(evaluator)
    assert stub.problems == []
    assert "logprobs" in stub.seen[0].body and "response_format" not in stub.seen[0].body
    assert asked == 1 + 3 * 3  # the logprobs request that came back without them, then 3 samples a question
    assert all("response_format" in s.body for s in stub.seen[1:])  # the evaluator keeps to samples
    assert len(stub.seen) == asked + 9
    # Usage counts every answered request: the first evaluation's logprobs request too.
    assert (first.usage.output_tokens, second.usage.output_tokens) == (10, 9)
    for result in (first, second):
        assert result.provenance.readout == "samples" and result.provenance.samples == 3
        # Three samples of the most likely label each, smoothed: (3 + 0.5) / (3 + 0.5 * labels).
        assert result.answers["refund"]["noul"] == pytest.approx(3.5 / 4)
        assert result.answers["team"]["probabilities"]["billing"] == pytest.approx(3.5 / 4.5)
    sample = stub.seen[-1].body
    assert sample["response_format"]["json_schema"]["schema"]["properties"]["label"]["enum"] in (
        ["Yes", "No"], ["A", "B", "C"], ["0", "1", "2"])


async def test_no_logprobs_when_they_were_required_is_one_line(tmp_path: Path) -> None:
    with stub_server(Stub(model, logprobs=False)) as stub, \
            pytest.raises(AnswerInvalid, match=r"^the openai server gave no logprobs for judge-model; set "):
        await ask(route(OPENAI, stub.url, tmp_path, readout="logprobs"))
    assert len(stub.seen) == 1


async def test_a_model_that_answers_outside_the_labels(tmp_path: Path) -> None:
    chatty: Model = lambda text: {"The": 0.6, "I": 0.3, "Sure": 0.1}  # noqa: E731
    with stub_server(Stub(chatty)) as stub, \
            pytest.raises(AnswerInvalid, match=r"^question '\w+': none of the labels .* is among the model's 3 most"):
        await ask(route(OPENAI, stub.url, tmp_path, readout="logprobs"))
    unsure: Model = lambda text: {"The": 0.4, "Yes": 0.2, "No": 0.1, "A": 0.1, "0": 0.1, "1": 0.1}  # noqa: E731
    with stub_server(Stub(unsure)) as stub:
        result = await ask(route(OPENAI, stub.url, tmp_path))
    assert set(result.provenance.low_mass) == {"refund", "team", "anger"}
    assert result.provenance.valid_mass == pytest.approx({"refund": 0.3, "team": 0.1, "anger": 0.2})
    assert result.answers["refund"]["noul"] == pytest.approx(2 / 3)


async def test_a_question_with_no_label_among_the_logprobs_is_sampled_and_flagged(tmp_path: Path) -> None:
    """readout auto: the question whose labels are all missing from the listed tokens is read from
    constrained samples; the others keep their logprobs; the answer says which and flags it."""
    def wordy(text: str) -> dict[str, float]:
        if text.endswith("Answer Yes or No."):
            return {"The": 0.6, "I": 0.3, "Sure": 0.1}  # no label at all: the stub's samples name "Yes"
        return model(text)

    profile = LlmProfile(name="judge-cal", route="openai", model="judge-model", temperatures={"noul": 2.0, "choice": 2.0},
                         readout="logprobs")
    with stub_server(Stub(wordy)) as stub:
        result = await ask(route(OPENAI, stub.url, tmp_path, samples=3, profile=profile))
    assert stub.problems == []
    sampled = [s.body for s in stub.seen if "response_format" in s.body]
    assert len(stub.seen) == 3 + 3 and len(sampled) == 3  # a logprobs request a question, then 3 samples
    assert all(b["response_format"]["json_schema"]["schema"]["properties"]["label"]["enum"] == ["Yes", "No"]
               for b in sampled)
    # Three "Yes" of three, smoothed; the logprobs profile is not applied to what was sampled.
    assert result.answers["refund"]["noul"] == pytest.approx(3.5 / 4)
    assert result.answers["team"]["probabilities"]["billing"] < expected(CHOICE, ["A", "B", "C"])[0]  # tempered
    p = result.provenance
    assert (p.readout, p.sampled, p.low_mass) == ("logprobs", ("refund",), ("refund",))
    assert p.valid_mass is not None and p.valid_mass["refund"] == 0.0
    shown = p.to_json()
    assert shown["sampled"] == ["refund"] and "sampled" not in p.identity.to_json()
    assert p.describe() == "openai stub-model-2025 (logprobs, sampled for 1 question, profile judge-cal)"


ONE = validate_request({
    "state": {"ticket": "I was charged twice for March. Please refund the duplicate now!"},
    "questions": {"refund": {"type": "noul", "instructions": "Does the customer ask for money back?"}}})
#: A logprobs answer's top tokens that are no distribution, each with the reason the readout gives.
#: The first is the issue's: 19 copies of `No` at logprob 0 (a mass of 19.99). The int is written
#: out as JSON text (an SDK model cannot hold it): 1 followed by 400 zeros.
NOT_A_DISTRIBUTION = {
    "mass_above_one": (Fault(candidates=[("No", 0.0)] * 19 + [("Yes", math.log(0.99))]),
                       r"the 20 next tokens the server listed add up to a probability of 19\.99, more than 1"),
    "positive_logprob": (Fault(candidates=[("Yes", 0.4), ("No", -1.2)]),
                         r"a next-token log-probability is positive \(0\.4\)"),
    "not_finite": (Fault(candidates=[("No", -0.25), ("Yes", -2.0)], replace=(b'"logprob":-0.25', b'"logprob":-1' + b"0" * 400)),
                   r"a next-token log-probability is not a finite number"),
}


@pytest.mark.parametrize("reason", list(NOT_A_DISTRIBUTION))
async def test_logprobs_that_are_no_distribution_are_sampled_and_say_why(tmp_path: Path, reason: str) -> None:
    """readout auto: the question is read from constrained samples instead, and the provenance says
    why; readout logprobs: the evaluation fails with that reason. Before, the issue's 19.99 was read
    as probabilities (No at 0.95) and a positive log-probability failed the evaluation."""
    fault, message = NOT_A_DISTRIBUTION[reason]
    with stub_server(Stub(model, always=fault)) as stub:
        result = await ask(route(OPENAI, stub.url, tmp_path, samples=3), ONE)
    assert stub.problems == []
    assert len(stub.seen) == 1 + 3 and all("response_format" in s.body for s in stub.seen[1:])
    assert result.answers["refund"]["noul"] == pytest.approx(3.5 / 4)  # the stub's samples say Yes
    p = result.provenance
    assert (p.readout, p.sampled, p.sampled_reasons, p.low_mass) == ("logprobs", ("refund",), {"refund": reason},
                                                                      ("refund",))
    assert p.to_json()["sampledReasons"] == {"refund": reason}
    assert "sampledReasons" not in p.identity.to_json()
    with stub_server(Stub(model, always=fault)) as stub, \
            pytest.raises(AnswerInvalid, match=rf"^question 'refund': {message}"):
        await ask(route(OPENAI, stub.url, tmp_path, readout="logprobs"), ONE)
    assert len(stub.seen) == 1


@pytest.mark.parametrize(("written", "message"), [
    (b"NaN", "the openai server's response contains NaN, which JSON does not allow"),
    (b"-Infinity", "the openai server's response contains -Infinity, which JSON does not allow"),
    (b"-1e400", "the openai server's response holds the number -1e400, too large for a finite float"),
    (b'"-0.25"', "logprobs entry 0 is not a token with a numeric log-probability"),
    (b"null", "logprobs entry 0 is not a token with a numeric log-probability"),
])
async def test_a_log_probability_json_cannot_hold_is_a_malformed_response(tmp_path: Path, written: bytes,
                                                                          message: str) -> None:
    """Not JSON, or not a number: the response itself is malformed, so even readout auto fails
    (one line, nothing sampled)."""
    fault = Fault(candidates=[("No", -0.25), ("Yes", -2.0)], replace=(b'"logprob":-0.25', b'"logprob":' + written))
    with stub_server(Stub(model, always=fault)) as stub, pytest.raises(AnswerInvalid, match=rf"^{message}$"):
        await ask(route(OPENAI, stub.url, tmp_path), ONE)
    assert len(stub.seen) == 1


async def test_fullwidth_and_invisible_spellings_of_a_label_are_that_label(tmp_path: Path) -> None:
    """NFKC and invisible code points, on the wire: `Ｎｏ`, `No` + a zero-width space and a BOM-led
    `no` are `No` (before, none of them was: `No` counted as unlisted and the answer was 1.0)."""
    spelled: Model = lambda text: {"Yes": 0.3, "Ｎｏ": 0.25, "No\u200b": 0.2, "\ufeffno": 0.1, "Nope": 0.15}  # noqa: E731
    with stub_server(Stub(spelled)) as stub:
        result = await ask(route(OPENAI, stub.url, tmp_path, readout="logprobs"), ONE)
    assert stub.problems == [] and len(stub.seen) == 1
    assert result.answers["refund"]["noul"] == pytest.approx(0.3 / 0.85)
    assert result.provenance.valid_mass == pytest.approx({"refund": 0.85})
    assert result.provenance.sampled == () and result.provenance.sampled_reasons is None


async def test_a_truncated_body_is_an_upstream_error(tmp_path: Path) -> None:
    with stub_server(Stub(model, faults=[Fault(truncate=40)])) as stub, \
            pytest.raises(UpstreamError, match=r"^the openai server is unreachable or broke off \(\w+\)$"):
        await ask(route(OPENAI, stub.url, tmp_path))


async def test_the_key_echoed_back_is_refused_and_never_shown(tmp_path: Path) -> None:
    for echoed in (KEY, KEY[::-1], KEY.upper()):
        with stub_server(Stub(model, always=Fault(model=f"gpt-{echoed}"[:120]))) as stub, \
                pytest.raises(AnswerInvalid) as caught:
            await ask(route(OPENAI, stub.url, tmp_path))
        assert "contains the credential it was sent with" in str(caught.value)
        assert KEY not in str(caught.value) and KEY[::-1] not in str(caught.value)


async def test_a_refused_key_says_so_without_the_key(tmp_path: Path) -> None:
    with stub_server(Stub(model, always=Fault(401))) as stub, \
            pytest.raises(UpstreamError) as caught:
        await ask(route(OPENAI, stub.url, tmp_path))
    assert str(caught.value) == "the openai server refused the key (HTTP 401)" and len(stub.seen) == 1


async def test_the_timeout_bounds_the_whole_evaluation(tmp_path: Path) -> None:
    with stub_server(Stub(model, always=Fault(stall=True))) as stub, \
            pytest.raises(UpstreamError, match=r"^evaluation timed out after 0.5 s$"):
        await ask(route(OPENAI, stub.url, tmp_path), timeout=0.5)
    assert len(stub.seen) == 1  # the others wait for the first, and were never sent


async def test_cancellation_stops_the_evaluation_and_sends_nothing_more(tmp_path: Path) -> None:
    with stub_server(Stub(model, always=Fault(stall=True))) as stub:
        evaluator = route(OPENAI, stub.url, tmp_path)
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(evaluator.evaluate, REQUEST, timeout=20))
                await anyio.to_thread.run_sync(stub.arrived.wait, 10)
                scope.cancel()
        assert scope.cancelled_caught and len(stub.seen) == 1
        with anyio.CancelScope() as already:
            already.cancel()
            await evaluator.evaluate(REQUEST, timeout=5)  # a cancelled caller sends nothing
        await evaluator.aclose()
    assert len(stub.seen) == 1


# ------------------------------------------------------------------ keys and the loopback rule

async def test_a_loopback_server_needs_no_key_and_ollama_is_never_sent_one(tmp_path: Path) -> None:
    with stub_server(Stub(model)) as stub:
        await ask(route(OPENAI, stub.url, tmp_path, key=None))
        ollama = LlmEvaluator(OLLAMA, "qwen3:8b", base_urls={"ollama": stub.url},
                              environ={"OPENAI_API_KEY": KEY}, credentials=CredentialResolver(
                                  OLLAMA, store=AuthStore(tmp_path / "auth.json"), environ={"OPENAI_API_KEY": KEY}))
        result = await ask(ollama)
    assert all("authorization" not in s.headers for s in stub.seen)
    assert result.provenance.route == "ollama" and stub.seen[-1].body["model"] == "qwen3:8b"
    assert ollama.status().credentials.source == "not needed" and ollama.status().mode == "offline"


async def test_a_remote_server_without_a_key_is_not_ready_and_refuses_before_sending(tmp_path: Path) -> None:
    evaluator = route(OPENAI, "https://api.openai.com/v1", tmp_path, key=None)
    status = evaluator.status()
    assert not status.ready and status.mode == "online"
    assert status.problem == ("no credentials for the openai route: run `fabric-jev login openai`, set "
                              "OPENAI_API_KEY, or configure credentialCommand")
    with pytest.raises(CredentialError, match="no credentials for the openai route"):
        await ask(evaluator)


# ------------------------------------------------------------------ the Messages wire (Anthropic)

async def test_anthropic_samples_through_one_forced_tool_with_a_cached_state(tmp_path: Path) -> None:
    with stub_server(Stub(model, served_model="claude-judge-20250101"), wire="messages") as stub:
        result = await ask(route(ANTHROPIC, stub.url, tmp_path, samples=4, model="claude-judge"))
    assert stub.problems == []  # every request is one the anthropic SDK's types accept
    assert len(stub.seen) == 3 * 4 and {s.path for s in stub.seen} == {"/v1/messages"}
    tools = {json.dumps(s.body["tools"], sort_keys=True) for s in stub.seen}
    assert len(tools) == 1  # one tool for every question: the cached prefix stays the same
    enum = stub.seen[0].body["tools"][0]["input_schema"]["properties"]["label"]["enum"]
    assert enum == ["A", "B", "C", "Yes", "No", "0", "1", "2"]
    for seen in stub.seen:
        assert seen.headers["x-api-key"] == KEY and seen.headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in seen.headers
        state, _question = seen.body["messages"][0]["content"]
        assert state["cache_control"] == {"type": "ephemeral"} and state["text"] == state_block(REQUEST.state)
        assert seen.body["tool_choice"] == {"type": "tool", "name": "answer"}
    provenance = result.provenance
    assert (provenance.route, provenance.model, provenance.readout, provenance.samples) == (
        "anthropic", "claude-judge-20250101", "samples", 4)
    assert result.answers["refund"]["noul"] == pytest.approx(4.5 / 5)
    assert result.usage.input_tokens == 12 * 100 and result.usage.output_tokens == 12 * 9


async def test_anthropic_gives_no_logprobs_so_readout_logprobs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="the anthropic route gives no logprobs"):
        route(ANTHROPIC, "https://api.anthropic.com", tmp_path, readout="logprobs")


async def test_the_anthropic_sdk_reads_the_stub_as_a_message(tmp_path: Path) -> None:
    from anthropic import AsyncAnthropic

    with stub_server(Stub(model), wire="messages") as stub:
        client = AsyncAnthropic(api_key="sk-ant-other", base_url=stub.url, max_retries=0)
        message = await client.messages.create(
            model="claude-judge", max_tokens=64, messages=[{"role": "user", "content": "Answer Yes or No."}],
            tools=[{"name": "answer", "input_schema": {"type": "object", "properties": {
                "label": {"type": "string", "enum": ["Yes", "No"]}}}}],
            tool_choice={"type": "tool", "name": "answer"})
        await client.close()
    assert message.content[0].type == "tool_use" and message.content[0].input == {"label": "Yes"}


# ------------------------------------------------------------------ rounds, profiles, specs

async def test_a_choice_over_26_options_is_read_in_rounds(tmp_path: Path) -> None:
    options = {f"opt{i:02}": None for i in range(30)}
    wide = validate_request({"state": "s", "questions": {"q": {"type": "choice", "instructions": "Which?",
                                                               "criteria": options}}})

    def favourite(text: str) -> dict[str, float]:  # likes opt17 wherever it is shown
        shown = [line.split(". ")[1] for line in text.splitlines() if line[:2].rstrip(".").isalpha()
                 and ". opt" in line]
        letter = {name: line for line, name in zip("ABCDEFGHIJKLMNOPQRSTUVWXYZ", shown, strict=False)}
        return {letter.get("opt17", "A"): 0.7, **{c: 0.3 / 25 for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                  if c != letter.get("opt17", "A")}}

    with stub_server(Stub(favourite)) as stub:
        result = await ask(route(OPENAI, stub.url, tmp_path), wide)
    assert len(stub.seen) == 3  # two rounds of 15, and a final between their winners
    answer = result.answers["q"]
    assert answer["choice"] == "opt17" and sum(answer["probabilities"].values()) == pytest.approx(1)
    assert set(answer["probabilities"]) == set(options)


async def test_a_profile_applies_its_temperatures_at_answer_time(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "fabric-jev-llm-profile", "version": 1, "name": "judge-cal",
                                "route": "openai", "model": "judge-model", "readout": "logprobs",
                                "temperatures": {"noul": 2.0}}))
    with stub_server(Stub(model)) as stub:
        result = await ask(route(OPENAI, stub.url, tmp_path, profile=LlmProfile.load(path)))
    raw_yes, raw_no = expected(NOUL, ["Yes", "No"])
    tempered = math.sqrt(raw_yes) / (math.sqrt(raw_yes) + math.sqrt(raw_no))
    assert result.answers["refund"]["noul"] == pytest.approx(tempered)
    assert list(result.answers["team"]["probabilities"].values()) == pytest.approx(expected(CHOICE, ["A", "B", "C"]))
    assert (result.provenance.calibration, result.provenance.profile) == ("temperature", "judge-cal")
    assert result.provenance.temperatures == {"noul": 2.0}


async def test_learn_measures_the_answers_the_route_gives_with_its_temperatures(tmp_path: Path) -> None:
    """One definition: `learn`'s tempered answers (what its report measures) are the route's own answers
    under the same temperatures, confidence included ((p − 1/n)/(1 − 1/n) for a choice, not max p)."""
    from fabric_jev.calibration.learn_temperatures import tempered

    temperatures = {"noul": 2.0, "choice": 0.5, "score": 3.0}
    profile = LlmProfile(name="judge-cal", route="openai", model="judge-model", temperatures=temperatures,
                         readout="logprobs")
    with stub_server(Stub(model)) as stub:
        raw = await ask(route(OPENAI, stub.url, tmp_path))
        calibrated = await ask(route(OPENAI, stub.url, tmp_path, profile=profile))
    for q in REQUEST.questions:
        measured, given = tempered(q, dict(raw.answers[q.id]), temperatures[q.type]), calibrated.answers[q.id]
        assert set(measured) == set(given), q.id
        for field, value in given.items():
            assert measured[field] == (pytest.approx(value) if not isinstance(value, str) else value), (q.id, field)
    team = calibrated.answers["team"]
    best = max(team["probabilities"].values())
    assert team["confidence"] == pytest.approx((best - 1 / 3) / (1 - 1 / 3)) and team["confidence"] < best


def test_a_profile_for_another_model_is_refused(tmp_path: Path) -> None:
    profile = LlmProfile(name="p", route="openai", model="gpt-x", temperatures={"noul": 1.2})
    with pytest.raises(ConfigError, match=r"^profile p was fitted for openai:gpt-x, not openai:judge-model$"):
        route(OPENAI, "https://api.openai.com/v1", tmp_path, profile=profile)


@pytest.mark.parametrize(("extra", "message"), [
    ({"logprobs": False}, "evaluator.extraBody may not set 'logprobs'"),
    ({"seed": math.inf}, "evaluator.extraBody must be finite JSON"),
])
def test_extra_body_cannot_change_what_the_route_reads(tmp_path: Path, extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        route(OPENAI, "https://api.openai.com/v1", tmp_path, extra_body=extra)


async def test_extra_body_reaches_the_server(tmp_path: Path) -> None:
    with stub_server(Stub(model)) as stub:
        await ask(route(OPENAI, stub.url, tmp_path, extra_body={"seed": 7}))
    assert {s.body["seed"] for s in stub.seen} == {7} and stub.problems == []


async def test_a_spec_and_the_config_build_the_route(tmp_path: Path) -> None:
    with stub_server(Stub(model)) as stub:
        config = HostConfig.parse({"evaluator": {"kind": "ollama:qwen3:8b", "baseUrls": {"ollama": stub.url},
                                                 "samples": 2, "retries": 0}})
        by_kind = evaluator_from_spec("ollama:qwen3:8b", config)
        assert isinstance(by_kind, LlmEvaluator) and (by_kind.samples, by_kind.retries) == (2, 0)
        result = await ask(by_kind)
        async with JevHost(config) as host:  # the config's kind, with nothing on the command line
            envelope = await host.run(program(
                "const r = await jev.evaluate({state: 'refund please', questions: {q: {type: 'noul', "
                "instructions: 'Refund?'}}}); return r.answers.q.noul", requires=["jev.evaluate"]), None)
    assert result.provenance.route == "ollama"
    assert envelope.state is RunState.COMPLETED, envelope.error
    assert envelope.result == pytest.approx(expected(NOUL, ["Yes", "No"])[0])
    assert envelope.evaluator is not None and envelope.evaluator.route == "ollama"
    assert envelope.evaluator.model == "stub-model-2025" and KEY not in json.dumps(envelope.to_json())


@pytest.mark.parametrize(("config", "message"), [
    ({"kind": "openai"}, "the openai route needs a model: openai:MODEL (for example openai:gpt-4.1-mini)"),
    ({"kind": "ollama:q", "samples": 0}, "evaluator.samples must be a whole number from 1 to 50"),
    ({"kind": "ollama:q", "readout": "vibes"}, "evaluator.readout must be auto, logprobs or samples"),
    ({"kind": "ollama:q", "concurrency": 100}, "evaluator.concurrency must be a whole number from 1 to 64"),
    ({"kind": "ollama:q", "disabled": ["ollama"]}, "the ollama route is disabled in the config"),
    ({"kind": "openai:m", "baseUrls": {"openai": "http://192.168.1.9:8000/v1"}},
     "plain http is allowed only to loopback, not 192.168.1.9"),
])
def test_bad_settings_are_one_line(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        evaluator_from_spec(config["kind"], HostConfig.parse({"evaluator": config}))
    assert message in str(caught.value) and "\n" not in str(caught.value)


async def test_the_key_reaches_no_envelope_log_error_or_program(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """Canary: a run that asks twice (the second refused), with every logger at DEBUG."""
    import logging

    caplog.set_level(logging.DEBUG)
    code = ("const a = await jev.evaluate({state: 'refund please', questions: {q: {type: 'noul', instructions: 'Refund?'}}});"
            "let err = ''; try { await jev.evaluate({state: 'again', questions: {q: {type: 'noul', instructions: '?'}}}); }"
            " catch (e) { err = String(e); } console.log(JSON.stringify(a), err); return [a, err]")
    with stub_server(Stub(model, faults=[Fault(), Fault(401)])) as stub:
        async with JevHost(HostConfig(), evaluator=route(OPENAI, stub.url, tmp_path)) as host:
            envelope = await host.run(program(code, requires=["jev.evaluate"]), None)
    assert envelope.state is RunState.COMPLETED, envelope.error
    assert envelope.result[1].startswith("Error: the openai server refused the key (HTTP 401)")
    assert stub.seen[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent, in the header only
    shown = json.dumps(envelope.to_json()) + caplog.text + "".join(json.dumps(s.body) for s in stub.seen)
    for form in (KEY, KEY[3:15], KEY[::-1]):
        assert form not in shown
