"""Evals: how well a program judges, over a labeled dataset, evaluator × wording.

    from fabric_jev.evals import run_eval

    summary = await run_eval("triage.js", "tickets.jsonl", evaluators=["local", "fixture:answers.json"],
                             variants={"deadline": "triage-deadline.js"}, out="eval-out")
    print(summary.pass_rate, summary.fields["route"].accuracy)

`fabric-jev eval PROGRAM --dataset FILE` is the same from the command line,
with a table, `--report DIR` (an HTML page and PNG charts), `--compare` and
`--fail-under`; `fabric_jev.testing.eval_program` the same in a test. The
modules: `dataset` (reading and screening lines), `compare` (expected against
result), `stats` and `summary` (pure numbers), `records` (results.jsonl),
`engine` (the run, on the batch engine), `files` (the --out folder), `diff`
(two evals), `report` and `charts` (HTML and PNG). See docs/eval.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .compare import EvalSettings, FieldVerdict, compare
    from .dataset import BadLine, Dataset, EvalCase, read_dataset
    from .diff import EvalDiff, diff_evals
    from .engine import run_eval
    from .files import read_results, read_summary
    from .records import EvalRecord, RecordedJudgment
    from .report import write_report
    from .summary import CellSummary, EvalSummary, FieldSummary, PairedTest, QuestionSummary, summarize

_LAZY = {
    **dict.fromkeys(("EvalSettings", "FieldVerdict", "compare"), ".compare"),
    **dict.fromkeys(("BadLine", "Dataset", "EvalCase", "read_dataset"), ".dataset"),
    **dict.fromkeys(("EvalDiff", "diff_evals"), ".diff"),
    "run_eval": ".engine",
    **dict.fromkeys(("read_results", "read_summary"), ".files"),
    **dict.fromkeys(("EvalRecord", "RecordedJudgment"), ".records"),
    "write_report": ".report",
    **dict.fromkeys(("CellSummary", "EvalSummary", "FieldSummary", "PairedTest", "QuestionSummary", "summarize"),
                    ".summary"),
}

__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = ["BadLine", "CellSummary", "Dataset", "EvalCase", "EvalDiff", "EvalRecord", "EvalSettings", "EvalSummary",
           "FieldSummary", "FieldVerdict", "PairedTest", "QuestionSummary", "RecordedJudgment", "compare", "diff_evals",
           "read_dataset", "read_results", "read_summary", "run_eval", "summarize", "write_report"]
