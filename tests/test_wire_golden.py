"""The JSON lines and files the host writes, byte for byte: results.jsonl, batch output lines, and
the other shapes that became typed models (issue 34). The strings were written by the hand-written
`to_json` methods the models replaced; a model's JSON must not move by one byte."""

from __future__ import annotations

import json
from typing import Any

from fabric_jev.batch.records import BatchOutcome
from fabric_jev.evals.compare import EvalSettings
from fabric_jev.evals.dataset import BadLine, EvalCase
from fabric_jev.evals.records import EvalRecord, RecordedJudgment, read_line


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# ------------------------------------------------------------------------------- results.jsonl

SETTINGS = EvalSettings(match=None, tolerance={"z": 0.5, "a": 1.0}, questions={"q": "route"})
JUDGMENT = RecordedJudgment(
    answers={"route": {"type": "choice", "choice": "billing", "probabilities": {"billing": 0.75, "tech": 0.25}}},
    usage={"input_tokens": 12, "output_tokens": 1},
    provenance={"route": "local", "model": "m", "readout": "heuristic", "profile": None, "calibration": None})


def test_eval_settings_json() -> None:
    assert compact(SETTINGS.to_json()) == '{"match":"partial","tolerance":{"a":1.0,"z":0.5},"questions":{"q":"route"}}'
    assert compact(EvalSettings(match="whole").to_json()) == '{"match":"whole","tolerance":{},"questions":{}}'


def _records() -> dict[str, EvalRecord]:
    case = EvalCase(3, "t3", {"text": "refund ✓"}, {"route": "billing", "urgency": 2, "address": {"city": "Oslo"}})
    return {
        "judged": EvalRecord.judged(("local", "base"), case, state="completed",
                                    result={"route": "tech", "urgency": 2.25, "address": {}}, error=None,
                                    settings=SETTINGS, evaluations=1, tool_calls=2,
                                    usage={"input_tokens": 12, "output_tokens": 1}, started=1767225600.125,
                                    seconds=0.0042, judgments=(JUDGMENT,)),
        "nulls": EvalRecord.judged(("fixture:a.json", "v2"), EvalCase(4, 4, None, {"x": None}), state="completed",
                                   result={"x": None, "y": [1, 2.5]}, error=None, settings=EvalSettings(match="whole")),
        "failed": EvalRecord.judged(("local", "base"), EvalCase(5, "t5", [1], True), state="failed", result=None,
                                    error="boom", settings=SETTINGS),
        "null result": EvalRecord.judged(("local", "base"), EvalCase(6, "t6", 1, None), state="completed",
                                         result=None, error=None, settings=SETTINGS),
    }


RESULT_LINES = {
    "judged": '{"evaluator":"local","variant":"base","line":3,"id":"t3","input":{"text":"refund ✓"},"expected":{"route":"billing","urgency":2,"address":{"city":"Oslo"}},"state":"completed","result":{"route":"tech","urgency":2.25,"address":{}},"passed":false,"fields":{"route":{"ok":false,"actual":"tech"},"urgency":{"ok":false,"actual":2.25},"address.city":{"ok":false}},"evaluations":1,"toolCalls":2,"usage":{"input_tokens":12,"output_tokens":1},"started":1767225600.125,"seconds":0.0042,"judgments":[{"answers":{"route":{"type":"choice","choice":"billing","probabilities":{"billing":0.75,"tech":0.25}}},"usage":{"input_tokens":12,"output_tokens":1},"provenance":{"route":"local","model":"m","readout":"heuristic","profile":null,"calibration":null}}]}',
    "nulls": '{"evaluator":"fixture:a.json","variant":"v2","line":4,"id":4,"input":null,"expected":{"x":null},"state":"completed","result":{"x":null,"y":[1,2.5]},"passed":false,"fields":{"x":{"ok":true,"actual":null},"y":{"ok":false,"actual":[1,2.5],"extra":true}},"evaluations":0,"toolCalls":0,"usage":{"input_tokens":0,"output_tokens":0},"started":0.0,"seconds":0.0,"judgments":[]}',
    "failed": '{"evaluator":"local","variant":"base","line":5,"id":"t5","input":[1],"expected":true,"state":"failed","error":"boom","passed":false,"fields":{"$":{"ok":false}},"evaluations":0,"toolCalls":0,"usage":{"input_tokens":0,"output_tokens":0},"started":0.0,"seconds":0.0,"judgments":[]}',
    "null result": '{"evaluator":"local","variant":"base","line":6,"id":"t6","input":1,"expected":null,"state":"completed","result":null,"passed":true,"fields":{"$":{"ok":true,"actual":null}},"evaluations":0,"toolCalls":0,"usage":{"input_tokens":0,"output_tokens":0},"started":0.0,"seconds":0.0,"judgments":[]}',
}


def test_results_lines_byte_for_byte_and_read_back() -> None:
    for name, record in _records().items():
        line = compact(record.to_json())
        assert line == RESULT_LINES[name], name
        again = read_line(json.loads(line))
        assert isinstance(again, EvalRecord) and compact(again.to_json()) == line, name


def test_a_bad_line() -> None:
    bad = BadLine(line=7, error="dataset line 7: not JSON")
    assert compact(bad.to_json()) == '{"line":7,"bad":"dataset line 7: not JSON"}'
    assert read_line(json.loads(compact(bad.to_json()))) == bad


# ------------------------------------------------------------------------------- batch output lines

def test_batch_lines_byte_for_byte() -> None:
    line = {"line": 2, "id": "k", "state": "completed", "result": None, "evaluations": 1, "toolCalls": 4,
            "usage": {"input_tokens": 3, "output_tokens": 1},
            "evaluator": {"route": "ollama", "model": "q", "readout": "logprobs", "calibration": "none"}}
    assert compact(BatchOutcome.from_json(line).to_json()) == '{"line":2,"id":"k","state":"completed","result":null,"evaluations":1,"toolCalls":4,"usage":{"input_tokens":3,"output_tokens":1},"evaluator":{"route":"ollama","model":"q","readout":"logprobs","calibration":"none"}}'
    failed = BatchOutcome(line=9, id=9, state="timed_out", error="too slow", evaluations=2, tool_calls=0, started=5.0)
    assert compact(failed.to_json()) == '{"line":9,"id":9,"state":"timed_out","error":"too slow","evaluations":2,"toolCalls":0,"usage":{"input_tokens":0,"output_tokens":0}}'
    rejected = BatchOutcome(line=10, id="x", state="rejected", error="not JSON")
    assert compact(rejected.to_json()) == '{"line":10,"id":"x","state":"rejected","error":"not JSON","evaluations":0,"toolCalls":0,"usage":{"input_tokens":0,"output_tokens":0}}'
    assert BatchOutcome.from_json(json.loads(compact(failed.to_json()))) == failed


# ------------------------------------------------------------------------------- plans, cassettes, evaluators

def test_a_plan_and_a_compile_result() -> None:
    from fabric_jev.verification import CompileResult, Plan

    plan = Plan("sha256:ab", "see ✓", ("a", "b"), {"coverage": 0.97, "a": 0.95, "b": 1.0})
    assert compact(plan.to_json()) == '{"schemaVersion":1,"dictionaryDigest":"sha256:ab","intent":"see ✓","checkIds":["a","b"],"probabilities":{"coverage":0.97,"a":0.95,"b":1.0}}'
    ready = CompileResult(status="ready", plan=plan, probabilities={"coverage": 0.97, "check_0": 0.95},
                          request_count=1, usage={"input_tokens": 5, "output_tokens": 2}, model="m")
    assert compact(ready.to_json()) == '{"status":"ready","plan":{"schemaVersion":1,"dictionaryDigest":"sha256:ab","intent":"see ✓","checkIds":["a","b"],"probabilities":{"coverage":0.97,"a":0.95,"b":1.0}},"reason":null,"probabilities":{"coverage":0.97,"check_0":0.95},"requestCount":1,"usage":{"input_tokens":5,"output_tokens":2},"model":"m"}'
    assert compact(CompileResult(status="incomplete", reason="cancelled").to_json()) == '{"status":"incomplete","plan":null,"reason":"cancelled","probabilities":{},"requestCount":0,"usage":{},"model":null}'


def test_a_cassette_line() -> None:
    from fabric_jev.evaluators.cassette import Recording, canonical

    recording = Recording(digest="0" * 64, request={"state": {"b": 1, "a": [1.5, None]}, "model": "x"},
                          evaluation={"answers": {"q": {"noul": 0.5}}, "model": "x",
                                      "usage": {"input_tokens": 1, "output_tokens": 0}})
    assert canonical(recording.to_json()) == '{"digest":"0000000000000000000000000000000000000000000000000000000000000000","evaluation":{"answers":{"q":{"noul":0.5}},"model":"x","usage":{"input_tokens":1,"output_tokens":0}},"request":{"model":"x","state":{"a":[1.5,null],"b":1}}}'


def test_a_selection() -> None:
    from fabric_jev.evaluators.select import Selection

    assert compact(Selection(spec="ollama:qwen3:8b", rule="--evaluator ollama:qwen3:8b").to_json()) == '{"route":"ollama","spec":"ollama:qwen3:8b","rule":"--evaluator ollama:qwen3:8b"}'
    assert compact(Selection(spec="vercel", rule="the config").to_json()) == '{"route":"vercel-ai-gateway","spec":"vercel","rule":"the config"}'
    assert compact(Selection(spec="fixture:a.json", rule="x").to_json()) == '{"route":"fixture","spec":"fixture:a.json","rule":"x"}'


def test_an_llm_profile() -> None:
    from fabric_jev.evaluators.llm_profile import LlmProfile

    plain = LlmProfile(name="p", route="openai", model="gpt-x", temperatures={"noul": 1.25, "choice": 2.0})
    assert compact(plain.to_json()) == '{"format":"fabric-jev-llm-profile","version":1,"name":"p","route":"openai","model":"gpt-x","temperatures":{"noul":1.25,"choice":2.0}}'
    full = LlmProfile(name="p", route="ollama", model="q:8b", temperatures={"score": 0.5}, readout="logprobs",
                      report={"before": {"ece": 0.1}, "n": 3})
    assert compact(full.to_json()) == '{"format":"fabric-jev-llm-profile","version":1,"name":"p","route":"ollama","model":"q:8b","readout":"logprobs","temperatures":{"score":0.5},"report":{"before":{"ece":0.1},"n":3}}'


def test_an_evaluator_status() -> None:
    from fabric_jev import EvaluatorStatus
    from fabric_jev.evaluators.base import NO_CREDENTIALS_NEEDED, CredentialStatus, ProfileStatus

    assert compact(EvaluatorStatus("my-route", "own-model").to_json()) == '{"route":"my-route","model":"own-model","mode":"offline","ready":true,"credentials":{"configured":false,"source":"missing","verified":false}}'
    full = EvaluatorStatus("local", "m", CredentialStatus(configured=True, source="environment", detail="KEY"),
                           "no weights", ProfileStatus(name="prof", signatures=2, examples=30), mode="online")
    assert compact(full.to_json()) == '{"route":"local","model":"m","mode":"online","ready":false,"credentials":{"configured":true,"source":"environment","verified":false},"profile":{"name":"prof","signatures":2,"examples":30},"problem":"no weights"}'
    assert compact(NO_CREDENTIALS_NEEDED.to_json()) == '{"configured":false,"source":"not needed","verified":false}'


# ------------------------------------------------------------------------------- bench JSON

def test_a_verification_bench_scenario() -> None:
    from fabric_jev.benchmarks.verification import AdapterCall, ScenarioReport

    ran = ScenarioReport(name="s1", kind="positive", expected=["a", "b"])
    ran.selected, ran.status, ran.request_count, ran.model_calls = ["a"], "ready", 1, 1
    ran.compile_ms, ran.replay_ms, ran.replay_status, ran.outcome = 12.34567, [1.00049, 2.5], "passed", "correct"
    ran.adapter = [AdapterCall(3.14159, {"input_tokens": 10, "output_tokens": 2}), AdapterCall(1.0, None),
                   AdapterCall(2.0, {"input_tokens": 1, "output_tokens": 1})]
    assert compact(ran.to_json()) == (
        '{"name":"s1","kind":"positive","expected":["a","b"],"selected":["a"],"status":"ready","reason":null,'
        '"requestCount":1,"modelCalls":1,"compileMs":12.346,"adapter":{"calls":3,"durationMs":6.142,'
        '"usage":{"input_tokens":11,"output_tokens":3}},"replayMs":[1.0,2.5],"replayStatus":"passed",'
        '"outcome":"correct"}')
    abstained = ScenarioReport(name="s2", kind="negative", expected=None)
    abstained.reason = "coverage 0.04"
    assert compact(abstained.to_json()) == (
        '{"name":"s2","kind":"negative","expected":null,"selected":null,"status":"incomplete",'
        '"reason":"coverage 0.04","requestCount":0,"modelCalls":0,"compileMs":0.0,'
        '"adapter":{"calls":0,"durationMs":null,"usage":null},"replayMs":[],"replayStatus":"skipped","outcome":""}')
    unanswered = ScenarioReport(name="s3", kind="x", expected=None)
    unanswered.adapter = [AdapterCall(5.0, None)]
    assert compact(unanswered.to_json()).endswith(
        ',"adapter":{"calls":1,"durationMs":5.0,"usage":null},"replayMs":[],"replayStatus":"skipped","outcome":""}')


# ------------------------------------------------------------------------------- a check's trace

def test_a_check_attempt_and_a_near_element() -> None:
    from fabric_jev.assertions.check import Attempt
    from fabric_jev.assertions.escalation import FailureKind, RecoveryAction
    from fabric_jev.assertions.nearest import Near
    from fabric_jev.assertions.snapshot import Element

    attempts = [Attempt(n=1, reason=FailureKind.NO_MATCH, confidence=0.5, action=RecoveryAction.RETRY, detail="again"),
                Attempt(n=2, reason=None, confidence=None, action=RecoveryAction.DONE)]
    assert compact([a.to_json() for a in attempts]) == (
        '[{"n":1,"reason":"no_match","confidence":0.5,"action":"retry","detail":"again"},'
        '{"n":2,"reason":null,"confidence":null,"action":"done","detail":""}]')
    near = Near(element=Element(index=4, role="button", name="Save ✓", text="x" * 100), score=0.123456, why="text 0.10")
    assert compact(near.to_json()) == ('{"index":4,"role":"button","name":"Save ✓","text":"' + "x" * 80
                                       + '","score":0.123,"why":"text 0.10"}')


# ------------------------------------------------------------------------------- a local profile

def test_a_local_evaluator_profile_file() -> None:
    import hashlib

    import numpy as np

    from fabric_jev.contract.evaluation import validate_request
    from fabric_jev.evaluators.lexical import LexicalIndex
    from fabric_jev.evaluators.profile import Profile, SignatureModel

    def question(body: dict[str, Any]) -> Any:
        return validate_request({"state": "", "questions": {"q": body}}).questions[0]

    vectors = np.random.default_rng(7).standard_normal((2, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    plain = SignatureModel(question=question({"type": "noul", "instructions": "Is it urgent?"}), vectors=vectors,
                           weights=np.asarray([[0.5, -0.25], [-1.0, 2.0]], dtype=np.float32), labels=(0, 1),
                           kernel_temperature=0.05, ridge=0.1, readout_weight=3.5, prior_weight=1.0, floor=0.01)
    words = SignatureModel(
        question=question({"type": "choice", "instructions": "Which queue?",
                           "criteria": {"billing": "money", "tech": "bugs"}}),
        vectors=vectors, weights=np.asarray([[1, 0], [0, 1]], dtype=np.float32), labels=(1, 0),
        kernel_temperature=0.0, ridge=1.0, readout_weight=2.0, prior_weight=0.5, floor=0.02, lexical_weight=0.3,
        lexical=LexicalIndex([np.asarray([3, 9], dtype=np.uint32), np.asarray([9], dtype=np.uint32)]), support=0.4)
    profile = Profile(name="p1", embedding_sha256="ab" * 32, models={m.signature: m for m in (plain, words)},
                      training=frozenset({"ffffffffffffffff", "0000000000000000"}), report={"heldOut": {"before": 0.5}})
    text = compact(profile.to_json())
    assert text.startswith('{"format":"fabric-jev-local-profile","version":2,"name":"p1","embedding":{"model":'
                           '"all-MiniLM-L6-v2","sha256":"' + "ab" * 32 + '"},"signatures":[{"signature":')
    assert text.endswith('"weights":"AACAPwAAAAAAAAAAAACAPw==","support":0.4,"lexicalWeight":0.3,'
                         '"terms":"AwAAAAkAAAAJAAAA","termCounts":[2,1]}],"training":["0000000000000000",'
                         '"ffffffffffffffff"],"report":{"heldOut":{"before":0.5}}}')
    assert list(profile.to_json()["signatures"][0]) == [
        "signature", "type", "instructions", "criteria", "kernelTemperature", "ridge", "readoutWeight", "priorWeight",
        "floor", "labels", "vectors", "weights", "support", "lexicalWeight"]
    assert hashlib.sha256(text.encode()).hexdigest() == "597feaaa17e4ca0eba526781a13d3f8cb15a7197f062327cb6fbb126d3ed5eff"
    again = Profile.from_json(json.loads(text), source="golden", embedding_sha256="ab" * 32)
    assert compact(again.to_json()) == text
