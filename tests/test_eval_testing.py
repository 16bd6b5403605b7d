"""`fabric_jev.testing.eval_program` in a user's pytest project: recorded once, replayed offline."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.cli_support import ROOT
from tests.conftest import PLUGIN_ARGS

PLUGIN = PLUGIN_ARGS
EXAMPLE = ROOT / "examples" / "eval"

TESTS = '''
from fabric_jev.testing import eval_program

def test_triage_judges_well(jev_evaluator):
    summary = eval_program("triage.js", "tickets.jsonl", evaluator=jev_evaluator)
    assert summary.cells[0].lines == LINES
    assert summary.pass_rate >= 0.8, summary.pass_rate
    assert summary.fields["route"].accuracy >= 0.8
    assert summary.fields["urgency"].mae < 0.2
'''


def project(pytester: pytest.Pytester, lines: int) -> None:
    pytester.makepyprojecttoml(textwrap.dedent("""
        [tool.pytest.ini_options]
        addopts = "-p no:cacheprovider"
        filterwarnings = ["error"]
    """))
    pytester.makepyfile(test_triage=TESTS.replace("LINES", str(lines)))
    tickets = (EXAMPLE / "tickets.jsonl").read_text().splitlines()[: lines + 1]
    (pytester.path / "tickets.jsonl").write_text("\n".join(tickets) + "\n")
    (pytester.path / "triage.js").write_text((EXAMPLE / "triage.js").read_text())


@pytest.mark.timeout(180)
def test_a_recorded_eval_replays_offline(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    monkeypatch.setenv("FABRIC_JEV_HOME", str(tmp_path / "home"))
    project(pytester, 8)
    (pytester.path / "answers.json").write_text((EXAMPLE / "fixture.json").read_text())
    recorded = pytester.runpytest_subprocess(*PLUGIN, "--jev-record-mode=once", "--jev-evaluator=fixture:answers.json")
    recorded.assert_outcomes(passed=1)
    cassette = pytester.path / "cassettes" / "test_triage" / "test_triage_judges_well.jsonl"
    lines = cassette.read_text().splitlines()
    assert len(lines) == 1 + 8  # the header and one recording per ticket
    assert {json.loads(x)["evaluation"]["model"] for x in lines[1:]} == {"fixture-triage"}

    # The fixture is gone: the default mode (none) answers every line from the cassette.
    (pytester.path / "answers.json").unlink()
    pytester.runpytest_subprocess(*PLUGIN).assert_outcomes(passed=1)

    # A line the cassette has not heard fails the test, naming the request, instead of asking anyone.
    project(pytester, 9)
    missed = pytester.runpytest_subprocess(*PLUGIN)
    missed.assert_outcomes(failed=1)
    missed.stdout.fnmatch_lines(["*no recorded Jev answer for this request in cassettes/test_triage/"
                                 "test_triage_judges_well.jsonl (record mode none)*"])
