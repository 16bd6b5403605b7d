"""Batch judgment: one program over many inputs, with bounded concurrency, resume and Ray.

    from fabric_jev.batch import batch

    async for outcome in batch(program, inputs, evaluator="fixture:answers.json"):
        print(outcome.id, outcome.state, outcome.result)

`fabric-jev batch PROGRAM --inputs FILE.jsonl --out FILE.jsonl` is the same
on files, with progress, `--resume` and a summary. See docs/scale.md.
"""

from .api import batch, run_batch
from .files import OutputLog, count_inputs, read_inputs
from .records import REJECTED, BatchItem, BatchOutcome, Judgment, Tally

__all__ = ["REJECTED", "BatchItem", "BatchOutcome", "Judgment", "OutputLog", "Tally", "batch", "count_inputs",
           "read_inputs", "run_batch"]
