"""Every example a newcomer can run, run as a test through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PLUGIN_ARGS, seed_starters

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PLUGIN = PLUGIN_ARGS


def run_example(name: str, *extra: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "fabric_jev.cli", "run", str(EXAMPLES / name / "program.json"),
         "--input", str(EXAMPLES / name / "input.json"), *extra],
        capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr + done.stdout
    envelope: dict[str, object] = json.loads(done.stdout)
    return envelope


def test_word_stats() -> None:
    env = run_example("word-stats")
    assert env["result"] == {"words": 15, "distinct": 10, "top": [
        {"word": "the", "count": 4}, {"word": "dog", "count": 2}, {"word": "fox", "count": 2}]}


def test_paced_counter_reports_progress() -> None:
    env = run_example("paced-counter")
    assert env["result"] == {"steps": 10, "total": 385}
    assert [e["value"]["step"] for e in env["events"]] == list(range(1, 11))  # type: ignore[index,union-attr]
    assert env["logs"] == ["summed 10 squares"]


def test_the_seeds_starter_programs_ship_unchanged() -> None:
    seed = seed_starters()
    triage = EXAMPLES / "ticket-triage"
    assert json.loads((triage / "program.json").read_text()) == seed["request"]["program"]
    assert json.loads((triage / "input.json").read_text()) == seed["request"]["input"]
    observer = EXAMPLES / "observer-session"
    assert json.loads((observer / "advisor.json").read_text()) == seed["observer"]["program"]
    assert json.loads((observer / "observe.json").read_text()) == seed["observer"]["observe"]
    # The wording and the threshold a user copies from the seed are the ones that run.
    code = seed["request"]["program"]["code"]
    assert "Which team handles the request in text?" in code and "a.route.confidence < 0.8" in code


def test_ticket_triage_with_fixture_answers() -> None:
    env = run_example("ticket-triage", "--evaluator",
                      f"fixture:{EXAMPLES / 'ticket-triage' / 'fixture.json'}")
    assert env["name"] == "triage-tickets" and env["state"] == "completed"
    assert env["result"] == [{"route": "billing", "refundProbability": 0.96, "urgency": 0.2},
                             {"route": "technical", "refundProbability": 0.05, "urgency": 0.65}]
    # One evaluation, one emit and one paced sleep per ticket: all host calls.
    assert env["evaluations"] == 2 and env["toolCalls"] == 6
    assert env["usage"] == {"input_tokens": 240, "output_tokens": 12}
    assert [e["value"] for e in env["events"]] == [{"processed": 1}, {"processed": 2}]  # type: ignore[index,union-attr]


@pytest.mark.parametrize(("confidence", "route"), [(0.79, "review"), (0.8, "billing"), (0.95, "billing")])
def test_ticket_triage_routes_under_the_seeds_threshold_to_review(tmp_path: Path, confidence: float,
                                                                  route: str) -> None:
    fixture = json.loads((EXAMPLES / "ticket-triage" / "fixture.json").read_text())
    fixture["rules"][0]["answer"]["confidence"] = confidence  # the refund ticket's route answer
    (tmp_path / "fixture.json").write_text(json.dumps(fixture))
    env = run_example("ticket-triage", "--evaluator", f"fixture:{tmp_path / 'fixture.json'}")
    assert [r["route"] for r in env["result"]] == [route, "technical"]  # type: ignore[union-attr,index]


def test_ticket_triage_offline_with_the_local_evaluator() -> None:
    env = run_example("ticket-triage")
    assert env["state"] == "completed" and env["evaluations"] == 2
    for row in env["result"]:  # type: ignore[union-attr]
        assert row["route"] in ("billing", "technical", "review")  # type: ignore[index]
        assert 0 <= row["refundProbability"] <= 1 and 0 <= row["urgency"] <= 2  # type: ignore[index]


@pytest.mark.browser
@pytest.mark.timeout(240)
def test_the_pytest_example_passes_offline_with_plain_pytest(tmp_path: Path) -> None:
    # Run from a copy of its folder alone, as a user who takes it as a starting point would.
    import shutil

    folder = tmp_path / "project"
    shutil.copytree(EXAMPLES / "pytest", folder)
    cassettes = {p: p.read_bytes() for p in (folder / "cassettes").rglob("*.jsonl")}
    assert len(cassettes) == 3
    env = {k: v for k, v in os.environ.items()
           if k not in ("TYPESAFE_API_KEY", "OPENROUTER_API_KEY", "AI_GATEWAY_API_KEY", "PYTEST_ADDOPTS")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--jev-output",
                           str(tmp_path / "results"), *PLUGIN],
                          capture_output=True, text=True, timeout=220, cwd=folder,
                          env={**env, "FABRIC_JEV_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "7 passed" in done.stdout
    # Replaying changed nothing: the checked-in cassettes are byte for byte the same.
    assert {p: p.read_bytes() for p in cassettes} == cassettes


def run_eval_example(*extra: str) -> subprocess.CompletedProcess[str]:
    """The commands of examples/eval/README.md."""
    folder = EXAMPLES / "eval"
    return subprocess.run(
        [sys.executable, "-m", "fabric_jev.cli", "eval", str(folder / "triage.js"), "--dataset",
         str(folder / "tickets.jsonl"), "--variant", f"deadline={folder / 'triage-deadline.js'}", *extra],
        capture_output=True, text=True, timeout=220, cwd=ROOT)


@pytest.mark.timeout(240)
def test_the_eval_example_runs_offline_with_the_local_evaluator() -> None:
    done = run_eval_example("--evaluator", "local", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert [(c["evaluator"], c["variant"], c["lines"]) for c in summary["cells"]] == [
        ("local", "base", 40), ("local", "deadline", 40)]
    for cell in summary["cells"]:
        assert cell["provenance"] == [{"route": "local", "model": cell["provenance"][0]["model"],
                                       "readout": "heuristic", "profile": None, "calibration": "none"}]
        assert set(cell["fields"]) == {"route", "refund", "urgent", "urgency"}
        assert cell["cost"]["evaluations"] == 40
    assert len(summary["pairs"]) == 1


@pytest.mark.timeout(240)
def test_the_eval_example_with_its_fixture_shows_the_two_wordings_differ() -> None:
    done = run_eval_example("--evaluator", f"fixture:{EXAMPLES / 'eval' / 'fixture.json'}")
    assert done.returncode == 0, done.stderr
    assert "fixture:fixture.json × base      90.0% (36/40)" in done.stdout
    assert "fixture:fixture.json × deadline  60.0% (24/40)" in done.stdout
    assert "real difference" in done.stdout
