"""`fabric-jev eval` end to end: real QuickJS workers, the example's program and fixture evaluator."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from fabric_jev import EvalError, HostConfig, JevHost
from fabric_jev.evals import read_results, read_summary, run_eval
from fabric_jev.evals.files import MANIFEST, PARTIAL, RESULTS, SUMMARY
from fabric_jev.evals.records import EvalRecord
from fabric_jev.testing import ScriptedEvaluator
from tests.cli_support import ROOT, cli

EXAMPLE = ROOT / "examples" / "eval"
PROGRAM = str(EXAMPLE / "triage.js")
DEADLINE = str(EXAMPLE / "triage-deadline.js")
FIXTURE = f"fixture:{EXAMPLE / 'fixture.json'}"


def dataset(tmp_path: Path, count: int, *extra: object, name: str = "tickets.jsonl") -> Path:
    """The example's header and first `count` tickets, then `extra` lines."""
    lines = (EXAMPLE / "tickets.jsonl").read_text(encoding="utf-8").splitlines()[: count + 1]
    lines += [x if isinstance(x, str) else json.dumps(x) for x in extra]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def records_of(folder: Path) -> list[EvalRecord]:
    return [r for r in read_results(folder / RESULTS) if isinstance(r, EvalRecord)]


def test_out_writes_results_and_summary_whole_and_json_prints_the_same_summary(tmp_path: Path) -> None:
    data = dataset(tmp_path, 6, '{"input": {"text": "no expected value"}}')
    out = tmp_path / "out"
    done = cli("eval", PROGRAM, "--dataset", str(data), "--evaluator", FIXTURE, "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed == json.loads((out / SUMMARY).read_text())
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, RESULTS, SUMMARY]  # no partial file left behind
    assert "eval: dataset line 8: has no 'expected'" in done.stderr
    lines = [json.loads(x) for x in (out / RESULTS).read_text().splitlines()]
    assert lines[0] == {"line": 8, "bad": "dataset line 8: has no 'expected'"}
    runs = lines[1:]
    assert [r["line"] for r in runs] == [2, 3, 4, 5, 6, 7]
    for record in runs:
        assert record["evaluator"] == "fixture:fixture.json" and record["variant"] == "base"
        (judgment,) = record["judgments"]
        assert set(judgment["answers"]) == {"route", "refund", "urgent", "urgency"}
        assert judgment["provenance"] == {"route": "fixture", "model": "fixture-triage", "readout": "fixture",
                                          "profile": None, "calibration": "none"}
        assert record["seconds"] > 0 and record["started"] > 0
    cell = printed["cells"][0]
    assert cell["lines"] == 6 and printed["dataset"]["bad"] == 1 and printed["dataset"]["lines"] == 7
    assert cell["passed"] == sum(r["passed"] for r in runs)
    assert cell["cost"]["evaluations"] == 6 and cell["cost"]["inputTokens"] == 6 * 180


def test_the_table_shows_the_matrix_and_the_paired_test(tmp_path: Path) -> None:
    data = dataset(tmp_path, 12)
    done = cli("eval", PROGRAM, "--dataset", str(data), "--evaluator", FIXTURE, "--variant", f"deadline={DEADLINE}")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "fixture:fixture.json × base" in out and "fixture:fixture.json × deadline" in out
    assert "paired tests (McNemar" in out and "exact" in out
    assert "worst lines" in out


async def _interrupted_after(folder: Path, data: Path, outcomes: int) -> None:
    """An eval stopped (as by Ctrl-C) once `outcomes` lines have ended."""
    seen = 0
    with anyio.CancelScope() as scope:
        def counted(_: Any) -> None:
            nonlocal seen
            seen += 1
            if seen == outcomes:
                scope.cancel()

        await run_eval(PROGRAM, data, evaluators=[FIXTURE], out=folder, concurrency=2, on_outcome=counted)
    assert scope.cancelled_caught


@pytest.mark.anyio
async def test_resume_runs_only_the_lines_not_yet_recorded(tmp_path: Path) -> None:
    data = dataset(tmp_path, 10)
    folder = tmp_path / "out"
    await _interrupted_after(folder, data, 4)
    assert not (folder / RESULTS).exists() and (folder / PARTIAL).exists()
    partial = (folder / PARTIAL).read_text().splitlines()
    assert len(partial) >= 4
    # A kill mid-write leaves a cut-off last line: it is dropped and its line runs again.
    (folder / PARTIAL).write_text("\n".join(partial) + "\n" + partial[0][:40])
    with pytest.raises(EvalError, match=r"already holds an eval .*pass --resume"):
        await run_eval(PROGRAM, data, evaluators=[FIXTURE], out=folder)

    from fabric_jev.evaluators.fixture import FixtureEvaluator

    counting = FixtureEvaluator.from_file(EXAMPLE / "fixture.json")
    summary = await run_eval(PROGRAM, data, evaluators={"fixture:fixture.json": counting}, out=folder, resume=True)
    assert counting.calls == 10 - len(partial)
    records = records_of(folder)
    assert sorted(r.line for r in records) == list(range(2, 12))  # each line once
    assert not (folder / PARTIAL).exists()
    fresh = await run_eval(PROGRAM, data, evaluators=[FIXTURE])
    assert (summary.cells[0].passed, summary.cells[0].fields) == (fresh.cells[0].passed, fresh.cells[0].fields)


@pytest.mark.anyio
async def test_resume_refuses_results_of_another_eval(tmp_path: Path) -> None:
    data = dataset(tmp_path, 3)
    folder = tmp_path / "out"
    await run_eval(PROGRAM, data, evaluators=[FIXTURE], out=folder)
    with pytest.raises(EvalError, match=re.escape("holds results of evaluator 'fixture:fixture.json' × variant "
                                                  "'base', which this eval does not run")):
        await run_eval(PROGRAM, data, evaluators=[ScriptedEvaluator({})], out=folder, resume=True)
    changed = dataset(tmp_path, 3, name="changed.jsonl")
    changed.write_text(changed.read_text().replace('"route": "billing"', '"route": "review"', 1))
    with pytest.raises(EvalError, match="the dataset's line id 't01' changed"):
        await run_eval(PROGRAM, changed, evaluators=[FIXTURE], out=folder, resume=True)
    # The same eval resumed when finished runs nothing and writes the same summary again.
    again = await run_eval(PROGRAM, data, evaluators=[FIXTURE], out=folder, resume=True)
    assert again == read_summary(folder)


def test_fail_under_gates_on_the_pass_rate_and_each_field(tmp_path: Path) -> None:
    data = dataset(tmp_path, 14)  # line 14 (t13) is routed wrong by the fixture: 13 of 14 pass
    base = ("eval", PROGRAM, "--dataset", str(data), "--evaluator", FIXTURE, "--quiet")
    below = cli(*base, "--fail-under", "pass_rate=0.95", "--fail-under", "route=90%")
    assert below.returncode == 1, below.stderr
    assert "eval: --fail-under: pass_rate of fixture:fixture.json × base is 0.857, under 0.95" in below.stderr
    assert "eval: --fail-under: route of fixture:fixture.json × base is 0.857, under 0.9" in below.stderr
    assert cli(*base, "--fail-under", "pass_rate=0.8", "--fail-under", "refund=1").returncode == 0
    unknown = cli(*base, "--fail-under", "rout=0.5")
    assert unknown.returncode == 2
    assert "--fail-under rout: no such metric; the dataset's are pass_rate, refund, route, urgency, urgent" in \
        unknown.stderr
    assert cli(*base, "--fail-under", "pass_rate=1.5").returncode == 2


def test_compare_shows_the_totals_and_the_lines_that_changed(tmp_path: Path) -> None:
    data = dataset(tmp_path, 20)
    for name, program in (("a", PROGRAM), ("b", DEADLINE)):
        done = cli("eval", program, "--dataset", str(data), "--evaluator", FIXTURE, "--out", str(tmp_path / name),
                   "--quiet")
        assert done.returncode == 0, done.stderr
    a, b = str(tmp_path / "a" / SUMMARY), str(tmp_path / "b" / SUMMARY)
    shown = cli("eval", "--compare", a, b)
    assert shown.returncode == 0, shown.stderr
    diff = json.loads(cli("eval", "--compare", a, b, "--json").stdout)
    (cell,) = diff["cells"]
    before, after = records_of(tmp_path / "a"), records_of(tmp_path / "b")
    by_id = {r.id: r.passed for r in before}
    broken = sorted(r.line for r in after if by_id[r.id] and not r.passed)
    fixed = sorted(r.line for r in after if not by_id[r.id] and r.passed)
    assert broken and cell["broken"] == len(broken) and cell["fixed"] == len(fixed)
    assert sorted(c["line"] for c in cell["changes"] if c["change"] == "broken") == broken
    assert cell["passRate"]["before"] > cell["passRate"]["after"]
    assert cell["pValue"] < 0.05
    assert f"{len(fixed)} fixed, {len(broken)} broken" in shown.stdout and "a real difference" in shown.stdout
    # Without the results beside them, only the totals can be compared.
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / SUMMARY).write_text((tmp_path / "b" / SUMMARY).read_text())
    totals = json.loads(cli("eval", "--compare", a, str(lone), "--json").stdout)
    assert totals["lineByLine"] is False and totals["cells"][0]["fixed"] is None
    broken_file = tmp_path / "broken.json"
    broken_file.write_text('{"format": "something else"}')
    refused = cli("eval", "--compare", a, str(broken_file))
    assert refused.returncode == 2 and "is not an eval summary" in refused.stderr


def test_bad_input_is_one_line_and_loses_nothing(tmp_path: Path) -> None:
    data = dataset(tmp_path, 2)
    other = tmp_path / "other.js"
    other.write_text(Path(DEADLINE).read_text().replace('"maxLength": 2000', '"maxLength": 10'))
    cases = [
        (("--variant", f"other={other}"), "variant other: its inputSchema or outputSchema differs"),
        (("--evaluator", "nonsense"), "unknown evaluator 'nonsense'"),
        (("--tolerance", "urgency=-1"), "a tolerance is a finite number"),
    ]
    for extra, message in cases:
        done = cli("eval", PROGRAM, "--dataset", str(data), *extra)
        assert done.returncode == 2 and message in done.stderr.splitlines()[-1], (extra, done.stderr)
        assert "Traceback" not in done.stderr
    missing = cli("eval", PROGRAM, "--dataset", str(tmp_path / "none.jsonl"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    assert cli("eval", PROGRAM).returncode == 2
    out = tmp_path / "out"
    assert cli("eval", PROGRAM, "--dataset", str(data), "--evaluator", FIXTURE, "--out", str(out)).returncode == 0
    again = cli("eval", PROGRAM, "--dataset", str(data), "--evaluator", FIXTURE, "--out", str(out))
    assert again.returncode == 2 and "already holds an eval" in again.stderr
    assert len(records_of(out)) == 2  # the refusal touched nothing


@pytest.mark.anyio
async def test_each_run_hears_only_its_own_judgments_when_runs_overlap() -> None:
    # The seam eval stands on: JevHost.run(on_evaluation=...) with several runs in flight at once.
    release = anyio.Event()
    asked = 0

    async def answer(request: Any) -> dict[str, Any]:
        nonlocal asked
        asked += 1
        if asked == 4:
            release.set()
        await release.wait()  # every run asks before any is answered
        return {"q": {"noul": 0.9 if "yes" in request.state else 0.1}}

    program = {"name": "ask", "inputSchema": {"type": "string"}, "outputSchema": {}, "requires": ["jev.evaluate"],
               "code": "const r = await jev.evaluate({state: input, questions: {q: {type: 'noul', "
                       "instructions: 'yes?'}}}); return r.answers.q.noul;"}
    evaluator = ScriptedEvaluator(answer)
    heard: dict[str, list[float]] = {"yes 1": [], "no 2": [], "yes 3": [], "no 4": []}
    async with JevHost(HostConfig(max_concurrent_runs=4), evaluator=evaluator) as host, \
            anyio.create_task_group() as tg:
        for text, kept in heard.items():
            async def one(text: str = text, kept: list[float] = kept) -> None:
                envelope = await host.run(program, text, on_evaluation=lambda _, e: kept.append(
                    e.answers["q"]["noul"]))
                assert envelope.state == "completed", envelope.error

            tg.start_soon(one)
    assert heard == {"yes 1": [0.9], "no 2": [0.1], "yes 3": [0.9], "no 4": [0.1]}


@pytest.mark.anyio
async def test_batch_and_eval_run_on_one_engine(tmp_path: Path) -> None:
    from fabric_jev.batch import BatchOutcome, run_batch
    from fabric_jev.evaluators.fixture import FixtureEvaluator

    data = dataset(tmp_path, 5)
    texts = [json.loads(x)["input"] for x in data.read_text().splitlines()[1:]]
    outcomes: list[BatchOutcome] = []

    async def keep(outcome: BatchOutcome) -> None:
        outcomes.append(outcome)

    from fabric_jev import load_program

    await run_batch(load_program(PROGRAM), texts, keep, evaluator=FixtureEvaluator.from_file(EXAMPLE / "fixture.json"),
                    judgments=True)
    summary = await run_eval(PROGRAM, data, evaluators=[FIXTURE], out=tmp_path / "out")
    by_line = {o.line: o for o in outcomes}
    for record in records_of(tmp_path / "out"):
        outcome = by_line[record.line - 1]  # the batch numbers its inputs from 1; the dataset has a header
        assert (record.state, record.result) == (outcome.state, outcome.result)
        assert [dict(j.answers) for j in record.judgments] == [j.evaluation.answers for j in outcome.judgments]
    assert summary.cells[0].lines == 5


@pytest.mark.anyio
async def test_an_evaluator_that_names_no_provenance_is_described_by_its_status(tmp_path: Path) -> None:
    import dataclasses

    from fabric_jev.evaluators.base import EvaluatorStatus
    from fabric_jev.evaluators.fixture import FixtureEvaluator

    class Silent:
        """An application's own evaluator: its answers say nothing of who gave them."""

        def __init__(self) -> None:
            self.inner = FixtureEvaluator.from_file(EXAMPLE / "fixture.json")

        async def evaluate(self, request: Any, *, timeout: float) -> Any:
            return dataclasses.replace(await self.inner.evaluate(request, timeout=timeout), provenance=None)

        def status(self) -> EvaluatorStatus:
            return EvaluatorStatus("in-house", "model-7")

        async def aclose(self) -> None:
            return None

    summary = await run_eval(PROGRAM, dataset(tmp_path, 2), evaluators=[Silent()])  # type: ignore[list-item]
    assert summary.cells[0].evaluator == "in-house"
    assert summary.cells[0].provenance == [{"route": "in-house", "model": "fixture-triage", "readout": "unknown",
                                            "profile": None, "calibration": None}]


def test_text_from_the_dataset_cannot_act_on_the_terminal(tmp_path: Path) -> None:
    hostile = "x\x1b]52;c;aGk=\x07\u202e\x9b2J\nforged row"
    data = dataset(tmp_path, 0, {"id": hostile, "input": {"text": hostile}, "expected": {"route": "billing"}},
                   {"id": "k", "input": {"text": "x"}, "expected": {"route": "billing"}, hostile: 1})
    done = cli("eval", PROGRAM, "--dataset", str(data), "--evaluator", FIXTURE)
    assert done.returncode == 0, done.stderr
    for stream in (done.stdout, done.stderr):
        assert not any(ch in stream for ch in "\x1b\x07\u202e\x9b"), stream
        assert "\nforged row" not in stream
    assert "worst lines" in done.stdout and "\\u001b" in done.stdout  # the failed line is shown, escaped
