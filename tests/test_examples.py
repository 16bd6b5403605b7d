"""Every example a newcomer can run, run as a test through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


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


def test_ticket_triage_with_fixture_answers() -> None:
    env = run_example("ticket-triage", "--evaluator",
                      f"fixture:{EXAMPLES / 'ticket-triage' / 'fixture.json'}")
    rows = env["result"]
    assert [r["route"] for r in rows] == ["billing", "technical", "review"]  # type: ignore[union-attr,index]
    assert rows[0]["refundProbability"] == 0.96  # type: ignore[index]
    assert env["evaluations"] == 3 and env["usage"] == {"input_tokens": 360, "output_tokens": 18}
