"""Running an eval: every dataset line through every cell, on the batch engine.

A cell is one evaluator × one variant of the program. Cells run one after
another; inside a cell the lines run with the host's concurrency, through
`fabric_jev.batch.run_batch` (the engine `fabric-jev batch` runs on), which
keeps each line's judgments (`JevHost.run(on_evaluation=...)`) and wall time.
Each outcome is compared with its expected value as it ends and, with an
`--out` folder, appended to it at once, so `resume` never runs a line twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..approval.question import Approver
from ..batch.records import BatchItem, BatchOutcome
from ..batch.records import Judgment as BatchJudgment
from ..contract.config import HostConfig
from ..contract.program import Program, parse_program
from ..contract.values import JsonValue
from ..errors import EvalError, ProgramInvalid
from ..evaluators.base import Evaluator, EvaluatorStatus
from .compare import EvalSettings
from .dataset import Dataset, EvalCase, Key, read_dataset
from .files import RecordKey, ResultsFolder, record_key
from .records import PROVENANCE_KEYS, EvalRecord, RecordedJudgment
from .summary import EvalSummary, summarize

if TYPE_CHECKING:
    from ..contract.evaluation import Evaluation, EvaluationRequest

#: The name of the program given first, the baseline every variant is compared with.
BASE = "base"
ProgramSource = Program | dict[str, Any] | str | Path


@dataclass(frozen=True, slots=True)
class Variant:
    """One wording of the program: its name and the program."""

    name: str
    program: Program


class _Borrowed:
    """An evaluator lent to one cell's host: every host closes its evaluator, but one evaluator
    serves every variant, and one the caller gave stays the caller's."""

    def __init__(self, inner: Evaluator) -> None:
        self._inner = inner

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        return await self._inner.evaluate(request, timeout=timeout)

    def status(self) -> EvaluatorStatus:
        return self._inner.status()

    async def aclose(self) -> None:
        return None


def load(source: ProgramSource, what: str) -> Program:
    """A program from a file (.ts, .js or the JSON artifact), a dict, or a Program."""
    if isinstance(source, str | Path):
        from ..program_files import load_program

        try:
            return parse_program(load_program(source))
        except ProgramInvalid as exc:
            raise EvalError(f"{what}: {exc}") from None
    return parse_program(source)


def variants_of(program: ProgramSource, variants: Mapping[str, ProgramSource]) -> list[Variant]:
    """The base program and its variants; a variant must keep the base's schemas."""
    base = load(program, "program")
    out = [Variant(BASE, base)]
    for name, source in variants.items():
        if not isinstance(name, str) or not name.strip() or name in (v.name for v in out):
            raise EvalError(f"variant name {name!r} is empty or taken (the program itself is {BASE!r})")
        variant = load(source, f"variant {name}")
        if variant.input_schema != base.input_schema or variant.output_schema != base.output_schema:
            raise EvalError(f"variant {name}: its inputSchema or outputSchema differs from the program's; a "
                            "variant is the same program with other wording")
        out.append(Variant(name, variant))
    return out


def provenance_of(evaluation: Evaluation, status: EvaluatorStatus) -> dict[str, JsonValue]:
    """Who gave an answer: route, model, readout, profile and calibration (and whatever else the
    evaluation says of itself: sample counts, valid mass, a replay).

    Every evaluator of fabric-jev names its provenance (`Evaluation.provenance`),
    taken whole; an application's own evaluator that names none is described by
    its status (the route and model it reports; the readout unknown).
    """
    if evaluation.provenance is not None:
        named: dict[str, JsonValue] = evaluation.provenance.to_json()
        return {**dict.fromkeys(PROVENANCE_KEYS), **named}
    return {"route": status.route, "model": evaluation.model or status.model, "readout": "unknown",
            "profile": None if status.profile is None else status.profile.name, "calibration": None}


def _judgment(kept: BatchJudgment, status: EvaluatorStatus) -> RecordedJudgment:
    evaluation = kept.evaluation
    return RecordedJudgment(answers=evaluation.answers,
                            usage={"input_tokens": evaluation.usage.input_tokens,
                                   "output_tokens": evaluation.usage.output_tokens},
                            provenance=provenance_of(evaluation, status))


def spec_name(spec: str) -> str:
    """A cell's evaluator name: the spec, with a file argument cut to its file name
    (``fixture:examples/eval/fixture.json`` → ``fixture:fixture.json``)."""
    kind, sep, argument = spec.partition(":")
    if sep and kind in ("fixture", "cassette", "record") and argument:
        return f"{kind}:{Path(argument).name}"
    return spec


@dataclass
class _Evaluators:
    """The evaluators of the matrix by name; those built from a spec here are closed here."""

    named: list[tuple[str, Evaluator]]
    built: list[Evaluator]

    def add(self, item: Evaluator | str | None, config: HostConfig, name: str | None = None) -> None:
        from ..evaluators.select import build_evaluator, select

        if item is None or isinstance(item, str):
            spec = select(item, config).spec
            evaluator = build_evaluator(spec, config)
            self.built.append(evaluator)
            name = name or spec_name(spec)
        else:
            evaluator, name = item, name or item.status().route
        base, n = name, 1
        while name in (existing for existing, _ in self.named):
            n += 1
            name = f"{base}#{n}"
        self.named.append((name, evaluator))

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            for evaluator in self.built:
                await evaluator.aclose()


async def run_eval(
    program: ProgramSource,
    dataset: Dataset | str | Path,
    *,
    evaluators: Sequence[Evaluator | str | None] | Mapping[str, Evaluator | str] = (),
    variants: Mapping[str, ProgramSource] | None = None,
    config: HostConfig | None = None,
    settings: EvalSettings | None = None,
    concurrency: int | None = None,
    out: str | Path | None = None,
    resume: bool = False,
    split: str | None = None,
    approver: Approver | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_outcome: Callable[[BatchOutcome], None] | None = None,
) -> EvalSummary:
    """Run `program` (and each of `variants`) on every line of `dataset` with each evaluator.

    `evaluators` are Evaluators or spec strings (``"local"``, ``"fixture:FILE"``,
    ``"ollama:qwen3"``, …), or a mapping of cell names to them; none means the
    config's, else the local one. A cell is named by its spec (a file argument
    by its file name), an Evaluator by its route, unless you name it. A spec
    is built here and closed at the end; an Evaluator you pass stays yours
    (it is not closed). `variants` maps a name to the same program with other
    wording (a file, a dict or a Program). `settings` (tolerances, match, the
    question → field map) go over the dataset header's. With `out`, results.jsonl
    and summary.json are written there; `resume` continues a folder that was
    interrupted. `on_start(total, skipped)` and `on_outcome(outcome)` follow the
    progress. Returns the summary; raises `EvalError` for an unusable dataset,
    variant, folder or evaluator spec.
    """
    from ..batch import run_batch

    config = config or HostConfig()
    matrix = variants_of(program, variants or {})
    base = matrix[0].program
    if not isinstance(dataset, Dataset):
        import anyio.to_thread

        source = dataset  # read in a thread: a large file (or a datasets import) must not stall the loop
        dataset = await anyio.to_thread.run_sync(lambda: read_dataset(
            source, input_schema=base.input_schema, output_schema=base.output_schema, split=split))
    settings = (dataset.settings or EvalSettings()).merged(settings)
    cases = {case.key: case for case in dataset.cases}
    lent = _Evaluators([], [])
    try:
        if isinstance(evaluators, Mapping):
            for given_name, named in evaluators.items():
                lent.add(named, config, given_name)
        else:
            for item in evaluators:
                lent.add(item, config)
        if not lent.named:
            lent.add(None, config)
        cells = [(name, evaluator, variant) for name, evaluator in lent.named for variant in matrix]
        order = [(name, variant.name) for name, _, variant in cells]
        folder = ResultsFolder(out) if out is not None else None
        earlier = folder.recorded(resume=resume) if folder is not None else {}
        _check_earlier(earlier, cases, set(order), folder)
        if folder is not None:
            folder.open(resume=resume)  # only now is anything written: a refused resume touched nothing
        try:
            records: dict[RecordKey, EvalRecord] = dict(earlier)
            if on_start is not None:
                on_start(len(cells) * len(cases), len(earlier))
            for name, evaluator, variant in cells:
                cell = (name, variant.name)
                pending = [case for case in dataset.cases if (name, variant.name, case.key) not in records]
                if not pending:
                    continue
                status = evaluator.status()

                async def record(outcome: BatchOutcome, cell: tuple[str, str] = cell,
                                 status: EvaluatorStatus = status) -> None:
                    case = cases[outcome.id]
                    judged = EvalRecord.judged(
                        cell, case, state=outcome.state, result=outcome.result, error=outcome.error,
                        settings=settings, evaluations=outcome.evaluations, tool_calls=outcome.tool_calls,
                        usage=outcome.usage, started=outcome.started, seconds=outcome.seconds,
                        judgments=tuple(_judgment(j, status) for j in outcome.judgments))
                    if folder is not None:
                        folder.append(judged)  # on disk before it is counted
                    records[record_key(judged)] = judged
                    if on_outcome is not None:
                        on_outcome(outcome)

                await run_batch(variant.program, _items(pending), record, config=config,
                                evaluator=_Borrowed(evaluator), concurrency=concurrency, approver=approver,
                                judgments=True)
        finally:
            if folder is not None:
                folder.close()
        position = {cell: i for i, cell in enumerate(order)}
        ranked = sorted(records.values(), key=lambda r: (position[r.cell], r.line))
        summary = summarize(ranked, program=base.name, dataset=dataset, settings=settings,
                            output_schema=base.output_schema, cells=order)
        if folder is not None:
            folder.finish(sorted(dataset.bad, key=lambda b: b.line), ranked, summary)
        return summary
    finally:
        await lent.aclose()


def _items(cases: Sequence[EvalCase]) -> list[BatchItem]:
    return [BatchItem(line=case.line, key=case.key, value=case.input) for case in cases]


def _check_earlier(earlier: Mapping[RecordKey, EvalRecord], cases: Mapping[Key, EvalCase],
                   cells: set[tuple[str, str]], folder: ResultsFolder | None) -> None:
    """Lines resumed from a folder must be of this eval: its cells, its dataset's lines unchanged."""
    for record in earlier.values():
        where = folder.folder if folder is not None else "the results"
        if record.cell not in cells:
            raise EvalError(f"{where} holds results of evaluator {record.evaluator!r} × variant "
                            f"{record.variant!r}, which this eval does not run; resume with the same "
                            "--evaluator and --variant options")
        case = cases.get(record.id)
        if case is None or case.input != record.input or case.expected != record.expected:
            raise EvalError(f"{where}: the dataset's line id {record.id!r} changed (or went) since it was "
                            "recorded; start again in another --out")
