"""Files the host reads and writes back keep an integer an integer (`1`, not `1.0`) (issue 42.6).

Each test reads a file written with integers where floats are usual, through the
reader the host uses, writes it back through the writer the host uses, and
compares the two as JSON with the type of every number.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from fabric_jev.approval.settings import ApprovalSettings
from fabric_jev.contract.evaluation import validate_request
from fabric_jev.evals.compare import parse_settings
from fabric_jev.evals.files import read_results
from fabric_jev.evals.records import EvalRecord
from fabric_jev.evals.summary import Settings
from fabric_jev.evaluators.llm_profile import LlmProfile
from fabric_jev.evaluators.profile import Profile, encode_floats, signature_of
from fabric_jev.verification.files import _load
from fabric_jev.verification.replay import parse_plan


def typed(value: Any) -> Any:
    """The JSON with each number's type beside it: 1 and 1.0 compare unequal."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (type(value).__name__, value)
    return value


def write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def test_a_plan_read_and_written_back_keeps_its_integer_probabilities(tmp_path: Path) -> None:
    raw = {"schemaVersion": 1, "dictionaryDigest": "sha256:" + "0" * 64, "intent": "the cart shows two items",
           "checkIds": ["cart.count"], "probabilities": {"coverage": 1, "cart.count": 0.97, "cart.empty": 0}}
    plan = parse_plan(_load(write(tmp_path / "plan.json", raw), "plan"))
    assert typed(plan.to_json()) == typed(raw)


def test_an_llm_profile_loaded_and_saved_keeps_its_integer_temperatures(tmp_path: Path) -> None:
    raw = {"format": "fabric-jev-llm-profile", "version": 1, "name": "qwen3-support", "route": "ollama",
           "model": "qwen3:8b", "readout": "logprobs", "temperatures": {"noul": 2, "choice": 1.5, "score": 1},
           "report": {"examples": 40, "heldOut": {"examples": 12, "accuracy": {"before": 1, "after": 0.75}}}}
    profile = LlmProfile.load(write(tmp_path / "in.json", raw))
    assert profile.temperature("noul") == 2
    saved = profile.save(tmp_path / "out.json")
    assert typed(json.loads(saved.read_text(encoding="utf-8"))) == typed(raw)


def test_a_local_profile_loaded_and_saved_keeps_its_integer_numbers(tmp_path: Path) -> None:
    question = validate_request({"state": "", "questions": {"q": {"type": "noul", "instructions": "Urgent?"}}}
                                ).questions[0]
    vectors = np.zeros((2, 384), dtype=np.float32)
    vectors[0, 0] = vectors[1, 1] = 1.0
    entry = {"signature": signature_of(question), "type": "noul", "instructions": "Urgent?", "criteria": None,
             "kernelTemperature": 0, "ridge": 1, "readoutWeight": 3, "priorWeight": 0.5, "floor": 0,
             "labels": [0, 1], "vectors": encode_floats(vectors, "<f2"),
             "weights": encode_floats(np.asarray([[1, 0], [0, 1]], dtype=np.float32), "<f4"),
             "support": 0, "lexicalWeight": 0}
    sha = "ab" * 32
    raw = {"format": "fabric-jev-local-profile", "version": 2, "name": "p1",
           "embedding": {"model": "all-MiniLM-L6-v2", "sha256": sha}, "signatures": [entry],
           "training": ["0000000000000000"], "report": {"heldOut": {"before": 1}}}
    profile = Profile.load(write(tmp_path / "in.json", raw), embedding_sha256=sha)
    profile.save(tmp_path / "out.json")
    assert typed(json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))) == typed(raw)


def test_an_eval_record_read_back_keeps_its_integer_times(tmp_path: Path) -> None:
    line = {"evaluator": "local", "variant": "base", "line": 1, "id": "t1", "input": {"text": "hi"},
            "expected": {"urgency": 1}, "state": "completed", "result": {"urgency": 1.0}, "passed": True,
            "fields": {"urgency": {"ok": True, "actual": 1.0}}, "evaluations": 1, "toolCalls": 0,
            "usage": {"input_tokens": 0, "output_tokens": 0}, "started": 1767225600, "seconds": 0,
            "judgments": [{"answers": {"urgency": {"type": "noul", "noul": 1}},
                           "usage": {"input_tokens": 0, "output_tokens": 0},
                           "provenance": {"route": "local", "model": "m"}}]}
    (tmp_path / "results.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    [record] = list(read_results(tmp_path / "results.jsonl"))
    assert isinstance(record, EvalRecord)
    assert typed(record.to_json()) == typed(line)


def test_eval_settings_keep_an_integer_tolerance_in_the_manifest_and_the_summary() -> None:
    settings = parse_settings({"tolerance": {"urgency": 1, "score": 0.5}}, "dataset header")
    written = settings.to_json()
    assert typed(written["tolerance"]) == {"score": ("float", 0.5), "urgency": ("int", 1)}
    assert typed(Settings.model_validate(written).to_json()) == typed(written)
    assert typed(parse_settings({"tolerance": 2}, "settings").to_json()["tolerance"]) == {"*": ("int", 2)}


def test_approval_settings_loaded_and_saved_keep_an_integer_threshold(tmp_path: Path) -> None:
    path = write(tmp_path / "settings.json", {"approvals": {"model": "pi-fabric/typesafe/jev-latest", "threshold": 1}})
    ApprovalSettings.load(path).save(path)
    assert typed(json.loads(path.read_text(encoding="utf-8"))["approvals"]["threshold"]) == ("int", 1)


def test_an_integer_tolerance_given_on_the_command_line_stays_an_integer() -> None:
    from fabric_jev.cli.eval import tolerance_option

    assert typed(dict([tolerance_option("2")])) == {"*": ("int", 2)}
    assert typed(dict([tolerance_option("urgency=1")])) == {"urgency": ("int", 1)}
    assert typed(dict([tolerance_option("score=0.5"), tolerance_option("n=1e3")])) == {
        "score": ("float", 0.5), "n": ("float", 1000.0)}
    written = parse_settings({"tolerance": dict([tolerance_option("urgency=1")])}, "--tolerance").to_json()
    assert typed(written["tolerance"]) == {"urgency": ("int", 1)}
