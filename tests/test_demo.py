"""`./scripts/demo` writes only the envelope on stdout (set-up steps and notes go to stderr),
so `./scripts/demo | jq` works. Run with the shipped fixture evaluator, which answers at once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(300)  # the demo runs set-up first: quick when nothing changed
def test_the_demo_prints_only_the_envelope_on_stdout() -> None:
    done = subprocess.run([str(ROOT / "scripts" / "demo"), "--evaluator",
                           "fixture:examples/ticket-triage/fixture.json"],
                          capture_output=True, text=True, timeout=280, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)  # one JSON document, nothing else
    assert envelope["state"] == "completed" and envelope["name"] == "triage-tickets"
    assert "setup: done" in done.stderr and "demo: ticket triage" in done.stderr
