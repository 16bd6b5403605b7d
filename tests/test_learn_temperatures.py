"""Fitting a temperature per question type on labels (calibration.learn_temperatures), with a real evaluator.

The route-independent part of `learn --evaluator ROUTE:MODEL`: here the offline evaluator
answers (a real one, without a network), on the shipped example's labels.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric_jev.calibration.labels import read_labels
from fabric_jev.calibration.learn_temperatures import learn_temperatures, tempered
from fabric_jev.calibration.temperature import MAX_TEMPERATURE, MIN_TEMPERATURE
from fabric_jev.contract.evaluation import validate_request
from fabric_jev.evaluators.local import LocalEvaluator

LABELS = Path(__file__).resolve().parents[1] / "examples" / "learn" / "labels.jsonl"


def question(raw: dict[str, object]):  # type: ignore[no-untyped-def]
    return validate_request({"state": "s", "questions": {"q": raw}}).questions[0]


def test_tempering_keeps_the_pick_and_moves_the_confidence() -> None:
    q = question({"type": "choice", "instructions": "?", "criteria": {"a": None, "b": None, "c": None}})
    answer = {"type": "choice", "choice": "a", "probabilities": {"a": 0.6, "b": 0.3, "c": 0.1}, "confidence": 0.6}
    soft = tempered(q, answer, 3.0)
    assert soft["choice"] == "a" and max(soft["probabilities"], key=soft["probabilities"].get) == "a"
    assert soft["probabilities"]["a"] < 0.6 and sum(soft["probabilities"].values()) == pytest.approx(1.0)
    noul = tempered(question({"type": "noul", "instructions": "?"}), {"type": "noul", "noul": 0.8}, 0.5)
    assert noul["noul"] == pytest.approx(0.64 / 0.68)


@pytest.mark.timeout(120)
@pytest.mark.anyio
async def test_temperatures_are_fitted_on_the_training_share_and_measured_on_the_rest() -> None:
    examples = read_labels(LABELS)[::3]  # a third of them, every question type still there
    fit = await learn_temperatures(LocalEvaluator(), examples, holdout=0.3)
    r = fit.report
    assert r["trained"] + r["heldOut"] == len(examples) and r["failed"] == 0
    assert set(fit.temperatures) == {e.question.type for e in examples}
    for qtype, t in r["types"].items():
        assert MIN_TEMPERATURE <= t["temperature"] <= MAX_TEMPERATURE
        # On the examples it was fitted to, the temperature never does worse than none (T = 1).
        assert t["trainingNll"]["after"] <= t["trainingNll"]["before"] + 1e-12
        # It never changes a pick: the same held-out accuracy.
        assert t["after"]["accuracy"] == t["before"]["accuracy"], qtype
        assert t["after"]["examples"] == t["heldOut"] > 0
    assert r["after"]["examples"] == r["before"]["examples"] == r["heldOut"]
