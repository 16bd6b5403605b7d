"""A whole eval in one call, for a test: `eval_program(program, dataset, evaluator=...)`.

    def test_triage_judges_well(jev_evaluator):
        summary = eval_program("triage.js", "tickets.jsonl", evaluator=jev_evaluator)
        assert summary.pass_rate >= 0.9
        assert summary.fields["route"].accuracy >= 0.85

With the plugin's `jev_evaluator`, the answers come from this test's cassette:
record it once (`pytest --jev-record-mode=once --jev-evaluator ...`), and every
later run replays the whole eval offline. An async test awaits
`fabric_jev.evals.run_eval` instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import anyio

if TYPE_CHECKING:
    from ..contract.config import HostConfig
    from ..contract.program import Program
    from ..evals.dataset import Dataset
    from ..evals.engine import ProgramSource
    from ..evals.summary import EvalSummary
    from ..evaluators.base import Evaluator


def eval_program(
    program: ProgramSource,
    dataset: Dataset | str | Path,
    *,
    evaluator: Evaluator | str | None = None,
    evaluators: Sequence[Evaluator | str] = (),
    variants: Mapping[str, Program | str | Path] | None = None,
    tolerance: float | Mapping[str, float] | None = None,
    match: Literal["partial", "whole"] | None = None,
    config: HostConfig | None = None,
    concurrency: int | None = None,
    out: str | Path | None = None,
) -> EvalSummary:
    """Run the eval (see `fabric_jev.evals.run_eval`) and return its summary.

    `evaluator` is one evaluator (an Evaluator such as `jev_evaluator`, or a
    spec string); `evaluators` several, for a matrix. An Evaluator you pass is
    not closed. `tolerance` is a number for every numeric field or one per
    field; `match="whole"` fails fields a result has beyond its expected value.
    """
    from ..evals.compare import ANY_FIELD, EvalSettings
    from ..evals.engine import run_eval

    chosen: list[Evaluator | str | None] = list(evaluators)
    if evaluator is not None:
        chosen.insert(0, evaluator)
    given: dict[str, float] = {}
    if isinstance(tolerance, int | float):
        given = {ANY_FIELD: float(tolerance)}
    elif tolerance is not None:
        given = {k: float(v) for k, v in tolerance.items()}
    settings = EvalSettings(match=match, tolerance=given) if given or match else None

    async def main() -> EvalSummary:
        return await run_eval(program, dataset, evaluators=chosen, variants=dict(variants or {}), config=config,
                              settings=settings, concurrency=concurrency, out=out)

    return anyio.run(main)


__all__ = ["eval_program"]
