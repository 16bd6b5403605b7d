"""Running an eval: every dataset line through every cell, on the batch engine.

A cell is one evaluator × one variant of the program. Cells run one after
another; inside a cell the lines run with the host's concurrency, through
`fabric_jev.batch.run_batch` (the engine `fabric-jev batch` runs on), which
keeps each line's judgments (`JevHost.run(on_evaluation=...)`) and wall time.
With `ray`, the cells of one evaluator run on one pool of batch's Ray actors
(`fabric_jev.batch.ray_backend.ActorPool`), each actor building the
evaluator from its spec, and the judgments come back with each outcome: the
records are the ones a local eval writes. Each outcome is compared with its
expected value as it ends and, with an `--out` folder, appended to it at
once, so `resume` never runs a line twice; the folder's manifest (what the
eval is made of, `manifest.py`) is checked before a resume runs anything.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..approval.question import Approver
from ..batch.local_backend import Emit
from ..batch.records import BatchItem, BatchOutcome
from ..batch.records import Judgment as BatchJudgment
from ..contract.config import HostConfig
from ..contract.program import Program, parse_program
from ..contract.values import JsonValue
from ..errors import EvalError, ProgramInvalid
from ..evaluators.base import Evaluator, EvaluatorStatus
from .compare import EvalSettings
from .dataset import Dataset, EvalCase, Key, read_dataset
from .files import RecordKey, ResultsFolder, file_digest, record_key
from .manifest import AGAIN, FILE_KINDS, EvalManifest, EvaluatorEntry, change, manifest, spec_entry
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


@dataclass(frozen=True, slots=True)
class _Named:
    """One evaluator of the matrix: its cell name, what it is in the manifest, and either the
    evaluator (a local eval) or the spec every Ray actor builds its own from."""

    name: str
    #: Its manifest entry, made when there is an --out folder (a spec's files are read for it).
    entry: Callable[[], EvaluatorEntry]
    evaluator: Evaluator | None
    spec: str | None


@dataclass
class _Evaluators:
    """The evaluators of the matrix by name; those built from a spec here are closed here. On
    Ray (`remote`) a spec is built by each actor, not here, and an object cannot go."""

    remote: bool
    named: list[_Named]
    built: list[Evaluator]

    def add(self, item: Evaluator | str | None, config: HostConfig, name: str | None = None) -> None:
        from ..evaluators.select import build_evaluator, select

        evaluator: Evaluator | None
        if item is None or isinstance(item, str):
            chosen = select(item, config)
            spec = chosen.spec
            if self.remote:
                from ..batch.api import ray_evaluator

                evaluator = None
                ray_evaluator(spec, config)  # a spec Ray cannot take is refused before anything starts
            else:
                evaluator = build_evaluator(spec, config)
                self.built.append(evaluator)
            name = name or spec_name(spec)
            entry = functools.partial(_spec_entry, spec, chosen.route, chosen.model, config)
        else:
            if self.remote:
                raise EvalError(f"evaluator {name or item.status().route!r} is an Evaluator object: with Ray, "
                                "give every evaluator as a spec string (for example 'fixture:FILE'); each "
                                "actor builds its own, and an object is not sent to the actors (it may hold "
                                "credentials)")
            status = item.status()
            evaluator, spec, name = item, None, name or status.route
            entry = functools.partial(EvaluatorEntry, spec=None, route=status.route, model=status.model)
        base, n = name, 1
        while name in (existing.name for existing in self.named):
            n += 1
            name = f"{base}#{n}"
        self.named.append(_Named(name, entry, evaluator, spec))

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            for evaluator in self.built:
                await evaluator.aclose()


def _spec_entry(spec: str, route: str, model: str | None, config: HostConfig) -> EvaluatorEntry:
    """A spec's manifest entry, with the digests of the files it reads."""
    kind, _, argument = spec.partition(":")
    profile = config.evaluator.get("profile")
    return spec_entry(spec, route, model, config,
                      file=file_digest(argument) if kind in FILE_KINDS and argument else None,
                      profile=file_digest(profile) if isinstance(profile, str) else None)


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
    ray: bool | str | None = None,
    actors: int | None = None,
) -> EvalSummary:
    """Run `program` (and each of `variants`) on every line of `dataset` with each evaluator.

    `evaluators` are Evaluators or spec strings (``"local"``, ``"fixture:FILE"``,
    ``"ollama:qwen3"``, …), or a mapping of cell names to them; none means the
    config's, else the local one. A cell is named by its spec (a file argument
    by its file name), an Evaluator by its route, unless you name it. A spec
    is built here and closed at the end; an Evaluator you pass stays yours
    (it is not closed). `variants` maps a name to the same program with other
    wording (a file, a dict or a Program). `settings` (tolerances, match, the
    question → field map) go over the dataset header's. With `out`, manifest.json,
    results.jsonl and summary.json are written there; `resume` continues a folder that was
    interrupted, after checking that the folder's manifest is this eval's (its
    variants' programs, its evaluators, dataset, settings and host config): a
    difference is refused with its reason before anything runs or is written.
    `on_start(total, skipped)` and `on_outcome(outcome)` follow the progress.
    `ray` runs the cells on a Ray cluster, as `run_batch(ray=...)` does: True for
    `ray.init()`'s default, or a cluster address; `actors` overrides one actor
    per CPU. With Ray every evaluator must be a spec string (each actor builds
    its own) and there is no `approver` (calls that ask are refused). Returns
    the summary; raises `EvalError` for an unusable dataset, variant, folder or
    evaluator spec.
    """
    from ..batch import run_batch

    remote = ray is not None and ray is not False
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
    lent = _Evaluators(remote, [], [])
    try:
        if isinstance(evaluators, Mapping):
            for given_name, given in evaluators.items():
                lent.add(given, config, given_name)
        else:
            for item in evaluators:
                lent.add(item, config)
        if not lent.named:
            lent.add(None, config)
        order = [(named.name, variant.name) for named in lent.named for variant in matrix]
        folder = ResultsFolder(out) if out is not None else None
        earlier: dict[RecordKey, EvalRecord] = {}
        if folder is not None:
            import anyio.to_thread

            def made(dataset: Dataset = dataset) -> EvalManifest:
                return manifest(order, {v.name: v.program for v in matrix},
                                {named.name: named.entry() for named in lent.named}, dataset, settings, config)

            current = await anyio.to_thread.run_sync(made)  # a digest of every line: a thread's work
            earlier = _resumed(folder, current, resume=resume, cases=cases, cells=set(order))
            folder.open(resume=resume, manifest=current)  # only now is anything written
        try:
            records: dict[RecordKey, EvalRecord] = dict(earlier)
            if on_start is not None:
                on_start(len(order) * len(cases), len(earlier))

            def pending(name: str, variant: Variant) -> list[EvalCase]:
                return [case for case in dataset.cases if (name, variant.name, case.key) not in records]

            def recorder(cell: tuple[str, str], status: EvaluatorStatus) -> Emit:
                async def record(outcome: BatchOutcome) -> None:
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

                return record

            if remote:
                todo = [(named, [(v, p) for v in matrix if (p := pending(named.name, v))]) for named in lent.named]
                await _on_ray([(named, cells) for named, cells in todo if cells], recorder, config=config,
                              concurrency=concurrency, address=None if ray is True else str(ray), actors=actors)
            else:
                for named in lent.named:
                    assert named.evaluator is not None  # built here, or the caller's
                    for variant in matrix:
                        lines = pending(named.name, variant)
                        if lines:
                            await run_batch(variant.program, _items(lines),
                                            recorder((named.name, variant.name), named.evaluator.status()),
                                            config=config, evaluator=_Borrowed(named.evaluator),
                                            concurrency=concurrency, approver=approver, judgments=True)
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


async def _on_ray(todo: Sequence[tuple[_Named, Sequence[tuple[Variant, Sequence[EvalCase]]]]],
                  recorder: Callable[[tuple[str, str], EvaluatorStatus], Emit], *, config: HostConfig,
                  concurrency: int | None, address: str | None, actors: int | None) -> None:
    """The pending lines of each cell on batch's Ray actors: one session, one pool of actors per
    evaluator that serves each of its variants in turn; nothing starts when nothing is pending."""
    if not todo:
        return
    from ..batch.api import host_config
    from ..batch.ray_backend import actor_pool, ray_session

    config, slots = host_config(config, concurrency)
    async with ray_session(address) as ray:
        for named, cells in todo:
            async with actor_pool(ray, config, named.spec, actors) as pool:
                for variant, lines in cells:
                    await pool.run(variant.program, _items(lines), recorder((named.name, variant.name), pool.status),
                                   concurrency=slots, judgments=True)


def _resumed(folder: ResultsFolder, current: EvalManifest, *, resume: bool, cases: Mapping[Key, EvalCase],
             cells: set[tuple[str, str]]) -> dict[RecordKey, EvalRecord]:
    """The records a resumed folder holds, once its manifest is found to be this eval's; EvalError
    with the first difference's reason otherwise (nothing read further, nothing written)."""
    recorded = folder.manifest() if resume else None
    found = None if recorded is None else change(recorded, current)
    if found is not None and found.part != "dataset":
        raise EvalError(f"--out {folder.folder}: {found.reason}")
    earlier = folder.recorded(resume=resume)
    _check_earlier(earlier, cases, cells, folder)  # a changed line, named, when a record has it
    if found is not None:
        raise EvalError(f"--out {folder.folder}: {found.reason}")
    return earlier


def _items(cases: Sequence[EvalCase]) -> list[BatchItem]:
    return [BatchItem(line=case.line, key=case.key, value=case.input) for case in cases]


def _check_earlier(earlier: Mapping[RecordKey, EvalRecord], cases: Mapping[Key, EvalCase],
                   cells: set[tuple[str, str]], folder: ResultsFolder) -> None:
    """Lines resumed from a folder must be of this eval: its cells, its dataset's lines unchanged
    (the manifest says so; a record says which line)."""
    for record in earlier.values():
        if record.cell not in cells:
            raise EvalError(f"--out {folder.folder}: it holds results of evaluator {record.evaluator!r} × "
                            f"variant {record.variant!r}, which this eval does not run; resume with the same "
                            f"--evaluator and --variant options, or {AGAIN}")
        case = cases.get(record.id)
        if case is None or case.input != record.input or case.expected != record.expected:
            raise EvalError(f"--out {folder.folder}: the dataset's line id {record.id!r} changed (or went) since "
                            f"it was recorded; resume with the dataset it was started with, or {AGAIN}")
