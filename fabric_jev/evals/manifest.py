"""What an eval's `--out` folder was made of (manifest.json), and why a resume is refused. No I/O.

An eval writes its manifest before its first record; `--resume` compares it
with the eval it is asked to continue before anything runs or is written, and
refuses the first difference with its reason: a records file must never mix
lines of two programs, evaluators, datasets or settings. ::

    {"format": "fabric-jev-eval-manifest", "version": 1,
     "cells": [["local", "base"], ["local", "terse"]],
     "variants": {"base": {"name": "sha256:…", "code": "sha256:…", "inputSchema": "sha256:…", …}},
     "evaluators": {"local": {"spec": "local", "route": "local", "model": null,
                              "file": null, "profile": "sha256:…", "section": "sha256:…"}},
     "dataset": {"cases": 40, "bad": 1, "digest": "sha256:…"},
     "settings": {"match": "partial", "tolerance": {"urgency": 0.5}, "questions": {}},
     "host": {"defaults": "sha256:…", "ceilings": "sha256:…", "approvals": "sha256:…", …}}

A variant is known by a digest of each field of its program (its code, where
the wording is, its schemas, its requires and limits), so a refusal says
which changed. An evaluator given as a spec is known by its spec, the
digest of the file a `fixture:` or `cassette:` spec names (the same file at
another path is the same evaluator), the digest of its profile, and
of the config's evaluator section (credential settings left out); one given
as an object (Python only) by the route and model its status reports, which
is all there is to know of it. The dataset is known by one digest of its
lines (number, id, input, expected; bad lines by their messages), wherever
the file is; the host config by a digest per field, without the fields that
only set the pace (run slots, queue, warm workers, the approver's timeout)
nor `connectors`, whose settings may hold secrets. Nothing in a manifest is
a secret: values are digests, but for the specs and the eval settings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, ValidationError
from pydantic import JsonValue as Json  # a model field's JSON: pydantic's own recursive alias

from ..contract.config import HostConfig
from ..contract.program import Program
from ..contract.wire_model import WireModel, validate_json_object
from .compare import EvalSettings
from .dataset import Dataset

#: The spec kinds whose argument is a file they only read: known by its content, not its path
#: (`record:FILE` writes to its cassette as it runs: it is known by its spec).
FILE_KINDS = ("fixture", "cassette")
#: Host config fields that set the pace, not the outcome (and `connectors`: secrets, maybe).
_UNRECORDED_HOST = frozenset({"maxConcurrentRuns", "maxQueuedRuns", "maxRetainedRuns", "warmWorkers",
                              "approverTimeoutMs", "evaluator", "connectors"})
#: Evaluator section keys left out of its digest: where credentials come from, which routes are
#: off (a disabled route is never built), and the profile (known by its file's content).
_UNRECORDED_SECTION = frozenset({"credentialCommand", "disabled", "profile"})
Part = Literal["cells", "variant", "evaluator", "dataset", "settings", "host"]


def digest(value: object) -> str:
    """sha256 of a JSON value's canonical text (sorted keys, no spaces)."""
    return "sha256:" + hashlib.sha256(_canonical(value).encode()).hexdigest()


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class _Model(WireModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EvaluatorEntry(_Model):
    """Who answered a cell: its spec (None for an Evaluator object) and what that spec reads."""

    spec: str | None
    route: str
    model: str | None = None
    #: The digest of the file a fixture: or cassette: spec names (None: not readable here).
    file: str | None = None
    #: The digest of the profile file the config's evaluator section names.
    profile: str | None = None
    #: The digest of the config's evaluator section, credential settings left out.
    section: str | None = None


class DatasetEntry(_Model):
    cases: int
    bad: int
    digest: str


class EvalManifest(_Model):
    """An eval's manifest.json (the module doc)."""

    format: Literal["fabric-jev-eval-manifest"] = "fabric-jev-eval-manifest"
    version: Literal[1] = 1
    cells: list[tuple[str, str]]
    variants: dict[str, dict[str, str]]
    evaluators: dict[str, EvaluatorEntry]
    dataset: DatasetEntry
    settings: dict[str, Json]
    host: dict[str, str]

    @classmethod
    def from_json(cls, raw: object) -> EvalManifest:
        """A manifest read back; ValueError names what is wrong with it."""
        try:
            return validate_json_object(cls, raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ValueError(f"{'.'.join(str(p) for p in first['loc']) or 'manifest'}: {first['msg']}") from None


def program_entry(program: Program) -> dict[str, str]:
    """A digest per field of the program's JSON (name, code, schemas, requires, limits, language)."""
    return {name: digest(value) for name, value in program.to_json().items()}


def spec_entry(spec: str, route: str, model: str | None, config: HostConfig, *, file: str | None,
               profile: str | None) -> EvaluatorEntry:
    """A spec's entry; `file` and `profile` are the digests of the files it reads (None if none)."""
    kind = spec.partition(":")[0]
    section = None
    if kind not in ("fixture", "cassette"):  # those two read no section
        section = digest({k: v for k, v in config.evaluator.items() if k not in _UNRECORDED_SECTION})
    return EvaluatorEntry(spec=spec, route=route, model=model, file=file, profile=profile, section=section)


def dataset_entry(dataset: Dataset) -> DatasetEntry:
    """One digest over every line: a case's number, id, input and expected value; a bad line's message."""
    h = hashlib.sha256()
    for case in dataset.cases:
        h.update(_canonical([case.line, case.key, case.input, case.expected]).encode() + b"\n")
    for bad in sorted(dataset.bad, key=lambda b: b.line):
        h.update(_canonical([bad.line, bad.error]).encode() + b"\n")
    return DatasetEntry(cases=len(dataset.cases), bad=len(dataset.bad), digest="sha256:" + h.hexdigest())


def host_entry(config: HostConfig) -> dict[str, str]:
    """A digest per host config field that can change an outcome (the module doc)."""
    raw = config.to_json()
    typecheck = raw.get("typecheck")
    if isinstance(typecheck, dict):  # where the checker caches is not what it checks
        raw["typecheck"] = {k: v for k, v in typecheck.items() if k not in ("cacheDir", "diskCache")}
    return {name: digest(value) for name, value in raw.items() if name not in _UNRECORDED_HOST}


def manifest(cells: Iterable[tuple[str, str]], variants: Mapping[str, Program],
             evaluators: Mapping[str, EvaluatorEntry], dataset: Dataset, settings: EvalSettings,
             config: HostConfig) -> EvalManifest:
    return EvalManifest(cells=list(cells), variants={name: program_entry(p) for name, p in variants.items()},
                        evaluators=dict(evaluators), dataset=dataset_entry(dataset), settings=settings.to_json(),
                        host=host_entry(config))


@dataclass(frozen=True, slots=True)
class Change:
    """The first way an eval differs from the one a folder recorded: which part, and the reason
    (a sentence that says what to do)."""

    part: Part
    reason: str


AGAIN = "start a new --out"


def change(recorded: EvalManifest, current: EvalManifest) -> Change | None:
    """How `current` differs from `recorded`, the first difference found; None if it does not."""
    for evaluator, variant in recorded.cells:
        if (evaluator, variant) not in current.cells:
            return Change("cells", f"it holds results of evaluator {evaluator!r} × variant {variant!r}, which this "
                                   f"eval does not run; resume with the same --evaluator and --variant options, "
                                   f"or {AGAIN}")
    for evaluator, variant in current.cells:
        if (evaluator, variant) not in recorded.cells:
            return Change("cells", f"it was started without evaluator {evaluator!r} × variant {variant!r}, which "
                                   f"this eval runs; resume with the same --evaluator and --variant options, "
                                   f"or {AGAIN} for this matrix")
    for name, fields in current.variants.items():
        differ = _differing(recorded.variants.get(name, {}), fields)
        if differ:
            return Change("variant", f"variant {name!r} changed since it was recorded: its {_listed(differ)} "
                                     f"{'differs' if len(differ) == 1 else 'differ'}; resume with the program "
                                     f"files it was started with, or {AGAIN}")
    for name, entry in current.evaluators.items():
        earlier = recorded.evaluators.get(name)
        why = "it was not recorded" if earlier is None else _evaluator_change(earlier, entry)
        if why is not None:
            return Change("evaluator", f"evaluator {name!r} changed since it was recorded: {why}; resume with "
                                       f"the evaluator it was started with, or {AGAIN}")
    if recorded.dataset != current.dataset:
        then, now = recorded.dataset, current.dataset
        what = (f"it has {now.cases} cases and {now.bad} bad lines now, {then.cases} and {then.bad} then"
                if (then.cases, then.bad) != (now.cases, now.bad) else "its lines differ")
        return Change("dataset", f"the dataset changed since it was recorded: {what}; resume with the dataset "
                                 f"it was started with, or {AGAIN}")
    differ = _differing(recorded.settings, current.settings)
    if differ:
        return Change("settings", f"the eval settings changed since they were recorded: {_listed(differ)} "
                                  f"{'differs' if len(differ) == 1 else 'differ'} (--tolerance, --match, "
                                  f"--settings, the dataset's header); resume with the same, or {AGAIN}")
    differ = _differing(recorded.host, current.host)
    if differ:
        return Change("host", f"the host config changed since it was recorded: its {_listed(differ)} "
                              f"{'differs' if len(differ) == 1 else 'differ'} (--config, --allow, --deny); "
                              f"resume with the same, or {AGAIN}")
    return None


def _differing(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    return [name for name in dict.fromkeys([*before, *after]) if before.get(name) != after.get(name)]


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _evaluator_change(then: EvaluatorEntry, now: EvaluatorEntry) -> str | None:
    if then.spec is None or now.spec is None:  # an object is known by its status alone
        if then.route != now.route:
            return f"its route differs ({then.route!r} then, {now.route!r} now)"
        if then.spec is None and now.spec is None and then.model != now.model:
            return f"its model differs ({then.model!r} then, {now.model!r} now)"
        return None
    kind = then.spec.partition(":")[0]
    by_content = kind in FILE_KINDS and then.file is not None and now.file is not None
    if kind != now.spec.partition(":")[0] or (not by_content and then.spec != now.spec):
        return f"its spec differs ({then.spec!r} then, {now.spec!r} now)"
    if then.file != now.file:
        return f"its file {now.spec.partition(':')[2]} differs"
    if then.profile != now.profile:
        return "its profile differs"
    if then.section != now.section:
        return "the config's evaluator section differs"
    return None
