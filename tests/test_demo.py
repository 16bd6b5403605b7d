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


@pytest.mark.timeout(300)
def test_the_demo_sets_up_only_what_it_runs() -> None:
    # The demo's set-up stops after the package and the offline model: the test-only steps (the MCP
    # Inspector from npm, Chromium from apt) belong to ./scripts/setup without --demo.
    done = subprocess.run([str(ROOT / "scripts" / "setup"), "--demo"], capture_output=True, text=True,
                          timeout=280, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("setup: done (demo set-up; ./scripts/setup installs the rest)")
    assert "MCP Inspector" not in done.stdout and "chromium" not in done.stdout
    wrong = subprocess.run([str(ROOT / "scripts" / "setup"), "--everything"], capture_output=True, text=True,
                           timeout=60, cwd=ROOT)
    assert wrong.returncode == 2 and wrong.stderr == "usage: ./scripts/setup [--demo]\n"
