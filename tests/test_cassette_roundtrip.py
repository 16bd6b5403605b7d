"""One cassette format end to end: recorded on the command line, replayed by a pytest test through
the plugin, fed to calibrate; and the other way round. Real processes, the real local evaluator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PLUGIN_ARGS

PLUGIN = PLUGIN_ARGS
QUESTIONS = {"refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
             "route": {"type": "choice", "instructions": "Which queue owns this ticket?",
                       "criteria": {"billing": "payments, invoices", "technical": "crashes, bugs"}},
             "urgency": {"type": "score", "instructions": "How urgent is it?", "criteria": ["low", "mid", "high"]}}
TICKETS = ["I was charged twice for March, please refund me", "The app crashes when I open settings"]


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    """A fresh project with no key and no auth store, as CI has it."""
    for name in ("TYPESAFE_API_KEY", "OPENROUTER_API_KEY", "AI_GATEWAY_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FABRIC_JEV_HOME", str(tmp_path / "home"))
    pytester.makepyprojecttoml(textwrap.dedent("""
        [tool.pytest.ini_options]
        addopts = "-p no:cacheprovider"
        filterwarnings = ["error"]
    """))
    return pytester


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "fabric_jev", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    return done


def calibrated(cwd: Path, cassette: str) -> dict[str, Any]:
    """calibrate with the cassette's answers as labels, asking the local evaluator again."""
    report: dict[str, Any] = json.loads(cli(cwd, "calibrate", "--from-cassette", cassette, "--evaluator", "local",
                                            "--json").stdout)
    return report


TEST_FILE = f'''
import json
from pathlib import Path

import pytest
from fabric_jev.contract.evaluation import validate_request

QUESTIONS = {QUESTIONS!r}
TICKETS = {TICKETS!r}

@pytest.fixture
def anyio_backend():
    return "asyncio"

@pytest.mark.anyio
async def test_ticket_answers(jev_evaluator):
    answers = [(await jev_evaluator.evaluate(validate_request({{"state": t, "questions": QUESTIONS}}),
                                             timeout=30)).to_json() for t in TICKETS]
    Path("seen_by_pytest.json").write_text(json.dumps(answers))
'''


@pytest.mark.timeout(300)
def test_recorded_on_the_command_line_replayed_by_pytest_and_calibrated(project: pytest.Pytester) -> None:
    root = project.path
    cassette = "cassettes/test_tickets/test_ticket_answers.jsonl"
    from_cli = []
    for n, ticket in enumerate(TICKETS):
        (root / f"request{n}.json").write_text(json.dumps({"state": ticket, "questions": QUESTIONS}))
        # No config: record:FILE records from the local evaluator.
        from_cli.append(json.loads(cli(root, "evaluate", f"request{n}.json", "--evaluator", f"record:{cassette}").stdout))
    assert len((root / cassette).read_text().splitlines()) == 1 + len(TICKETS)

    project.makepyfile(test_tickets=TEST_FILE)
    replayed = project.runpytest_subprocess(*PLUGIN)  # record mode none: replay only, or fail
    replayed.assert_outcomes(passed=1)
    # The same answers, and each says it was replayed, by whom it was recorded.
    assert json.loads((root / "seen_by_pytest.json").read_text()) == [
        {**live, "evaluator": {**live["evaluator"], "replayed": True}} for live in from_cli]
    assert all(live["evaluator"]["route"] == "local" for live in from_cli)

    report = calibrated(root, cassette)
    assert report["examples"] == len(TICKETS) * len(QUESTIONS)
    # The labels are what the local evaluator answered when recording: asked again, it agrees.
    assert {kind: s["accuracy"] for kind, s in report["types"].items()} == {"noul": 1.0, "choice": 1.0, "score": 1.0}


PROGRAM = {"name": "triage", "inputSchema": {"type": "string"}, "outputSchema": {}, "requires": ["jev.evaluate"],
           "code": "const r = await jev.evaluate({state: input, questions: " + json.dumps(QUESTIONS) + "});\n"
                   "return {route: r.answers.route.choice, refund: r.answers.refund.noul};"}
#: Answers the local evaluator would never give: what the CLI replays came from the cassette.
FIXTURE = {"answers": {"refund": {"noul": 0.123}, "route": {"choice": "technical"}, "urgency": {"score": 2}},
           "rules": [{"question": "refund", "stateContains": "refund", "answer": {"noul": 0.987}},
                     {"question": "route", "stateContains": "charged", "answer": {"choice": "billing"}}]}


@pytest.mark.timeout(300)
def test_recorded_by_pytest_replayed_on_the_command_line_and_calibrated(project: pytest.Pytester) -> None:
    root = project.path
    (root / "answers.json").write_text(json.dumps(FIXTURE))
    (root / "triage.json").write_text(json.dumps(PROGRAM))
    project.makepyfile(test_triage=textwrap.dedent(f'''
        import json
        from pathlib import Path
        import pytest

        PROGRAM = json.loads(Path("triage.json").read_text())

        @pytest.fixture
        def anyio_backend():
            return "asyncio"

        @pytest.mark.anyio
        @pytest.mark.parametrize("ticket", {TICKETS!r})
        async def test_triage(jev_host, ticket):
            env = await jev_host.run(PROGRAM, ticket)
            assert env.state == "completed", env.error
    '''))
    recorded = project.runpytest_subprocess(*PLUGIN, "--jev-record-mode=once", "--jev-evaluator=fixture:answers.json")
    recorded.assert_outcomes(passed=2)
    tapes = sorted((root / "cassettes" / "test_triage").glob("*.jsonl"))
    assert len(tapes) == 2

    # Each test's cassette replays on the command line, offline, with the answers pytest recorded.
    expected = {TICKETS[0]: {"route": "billing", "refund": 0.987}, TICKETS[1]: {"route": "technical", "refund": 0.123}}
    for tape, ticket in zip(tapes, sorted(TICKETS), strict=True):  # the names sort as the tickets do
        (root / "input.json").write_text(json.dumps(ticket))
        done = cli(root, "run", "triage.json", "--input", "input.json", "--result", "--quiet",
                   "--evaluator", f"cassette:{tape.relative_to(root)}")
        assert json.loads(done.stdout) == expected[ticket], ticket

    # And they are labels: the fixture's answers, one example per recorded question.
    report = calibrated(root, str(tapes[1].relative_to(root)))
    assert report["examples"] == len(QUESTIONS)


CJK_NAME = "test_" + "払い戻しの依頼は請求担当に回る" * 6  # 90 CJK characters: 270 bytes in UTF-8


@pytest.mark.timeout(180)
def test_a_test_named_in_ninety_cjk_characters_gets_its_cassette(project: pytest.Pytester) -> None:
    # Round four: the name was cut at 150 characters, and 90 CJK characters are 270 bytes,
    # past the 255 a file name may have: "File name too long".
    root = project.path
    (root / "answers.json").write_text(json.dumps(FIXTURE))
    project.makepyfile(test_cjk=f'''
from fabric_jev.contract.evaluation import validate_request
import pytest

@pytest.fixture
def anyio_backend():
    return "asyncio"

@pytest.mark.anyio
async def {CJK_NAME}(jev_evaluator):
    r = await jev_evaluator.evaluate(validate_request({{"state": "x", "questions": {QUESTIONS!r}}}), timeout=30)
    assert r.answers["refund"]["noul"] == 0.123
''')
    project.runpytest_subprocess(*PLUGIN, "--jev-record-mode=once", "--jev-evaluator=fixture:answers.json"
                                 ).assert_outcomes(passed=1)
    (tape,) = (root / "cassettes" / "test_cjk").glob("*.jsonl")
    assert len(tape.name.encode()) <= 255 and tape.name.startswith("test_払い戻し")
    project.runpytest_subprocess(*PLUGIN).assert_outcomes(passed=1)  # and it replays from that name
