"""Resuming an eval: its --out folder's manifest is checked first, and a changed eval is refused
with the reason, the folder left as it was. Real QuickJS workers and the example's fixture evaluator."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_jev import ConfigError, EvalError, HostConfig
from fabric_jev.contract.program import parse_program
from fabric_jev.evals import EvalSettings, read_summary, run_eval
from fabric_jev.evals.dataset import Dataset, EvalCase
from fabric_jev.evals.files import MANIFEST, PARTIAL, RESULTS, SUMMARY
from fabric_jev.evals.manifest import EvalManifest, EvaluatorEntry, change, manifest
from fabric_jev.evaluators.fixture import FixtureEvaluator
from tests.cli_support import cli
from tests.test_eval_cli import DEADLINE, EXAMPLE, FIXTURE, PROGRAM, dataset, records_of

pytestmark = pytest.mark.anyio


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


async def started(tmp_path: Path, lines: int = 3, **given: Any) -> tuple[Path, Path]:
    """A finished eval of the example, base and deadline wordings, in tmp_path/out."""
    data = dataset(tmp_path, lines)
    folder = tmp_path / "out"
    options: dict[str, Any] = {"evaluators": [FIXTURE], "variants": {"deadline": DEADLINE}, **given}
    await run_eval(PROGRAM, data, out=folder, **options)
    return data, folder


async def test_a_resume_after_a_wording_change_is_refused_and_touches_nothing(tmp_path: Path) -> None:
    data, folder = await started(tmp_path)
    before = snapshot(folder)
    assert sorted(before) == [MANIFEST, RESULTS, SUMMARY]
    reworded = tmp_path / "triage-deadline.js"
    text = Path(DEADLINE).read_text(encoding="utf-8")
    instructions = re.search(r"instructions: \"([^\"]+)\"", text)
    assert instructions is not None
    reworded.write_text(text.replace(instructions.group(1), "Is this urgent? Answer carefully."), encoding="utf-8")
    with pytest.raises(EvalError) as refused:
        await run_eval(PROGRAM, data, evaluators=[FIXTURE], variants={"deadline": str(reworded)}, out=folder,
                       resume=True)
    assert str(refused.value) == (f"--out {folder}: variant 'deadline' changed since it was recorded: its code "
                                  "differs; resume with the program files it was started with, or start a new --out")
    assert snapshot(folder) == before
    # The command says the same in one line, exit 2, and writes nothing either.
    done = cli("eval", PROGRAM, "--dataset", str(data), "--evaluator", FIXTURE, "--variant", f"deadline={reworded}",
               "--out", str(folder), "--resume")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith("variant 'deadline' changed since it was recorded: its "
                                                         "code differs; resume with the program files it was "
                                                         "started with, or start a new --out")
    assert snapshot(folder) == before
    # The same files again: nothing runs, the same summary.
    again = await run_eval(PROGRAM, data, evaluators=[FIXTURE], variants={"deadline": DEADLINE}, out=folder,
                           resume=True)
    assert again == read_summary(folder)


async def test_a_resume_names_what_else_changed(tmp_path: Path) -> None:
    data, folder = await started(tmp_path)
    before = snapshot(folder)
    same: dict[str, Any] = {"evaluators": [FIXTURE], "variants": {"deadline": DEADLINE}, "out": folder,
                            "resume": True}
    fixture = json.loads((EXAMPLE / "fixture.json").read_text())
    moved = tmp_path / "elsewhere" / "fixture.json"
    moved.parent.mkdir()
    shutil.copyfile(EXAMPLE / "fixture.json", moved)  # the same file at another path: the same evaluator
    edited = tmp_path / "fixture.json"
    edited.write_text(json.dumps({**fixture, "model": "another"}))
    base_only = {k: v for k, v in same.items() if k != "variants"}
    cases: list[tuple[dict[str, Any], str]] = [
        ({**same, "evaluators": [f"fixture:{edited}"]},
         f"evaluator 'fixture:fixture.json' changed since it was recorded: its file {edited} differs"),
        ({**same, "evaluators": ["local"]},
         "holds results of evaluator 'fixture:fixture.json' × variant 'base', which this eval does not run"),
        ({**same, "evaluators": [FIXTURE, "local"]},
         "was started without evaluator 'local' × variant 'base', which this eval runs"),
        (base_only, "holds results of evaluator 'fixture:fixture.json' × variant 'deadline', which this eval "
                    "does not run"),
        ({**same, "settings": EvalSettings(tolerance={"urgency": 1.0})},
         "the eval settings changed since they were recorded: tolerance differs"),
        ({**same, "config": HostConfig(deny=("network",))},
         "the host config changed since it was recorded: its deny differs"),
        ({**same, "config": HostConfig.model_validate({"ceilings": {"timeoutMs": 5000}})},
         "the host config changed since it was recorded: its ceilings differs"),
    ]
    for options, reason in cases:
        with pytest.raises(EvalError, match=re.escape(reason)):
            await run_eval(PROGRAM, data, **options)
        assert snapshot(folder) == before, reason
    grown = dataset(tmp_path, 4, name="grown.jsonl")
    with pytest.raises(EvalError, match=re.escape("the dataset changed since it was recorded: it has 4 cases and 0 "
                                                  "bad lines now, 3 and 0 then; resume with the dataset it was "
                                                  "started with, or start a new --out")):
        await run_eval(PROGRAM, grown, **same)
    assert snapshot(folder) == before
    # What only sets the pace may change, and the fixture may move: the resume goes on.
    faster = HostConfig(max_concurrent_runs=8, warm_workers=3)
    summary = await run_eval(PROGRAM, data, **{**same, "evaluators": {"fixture:fixture.json": f"fixture:{moved}"}},
                             config=faster, concurrency=8)
    assert summary == read_summary(folder)


async def test_a_line_changed_in_place_is_named(tmp_path: Path) -> None:
    data, folder = await started(tmp_path)
    before = snapshot(folder)
    data.write_text(data.read_text().replace('"route": "billing"', '"route": "review"', 1))
    with pytest.raises(EvalError, match="the dataset's line id 't01' changed"):
        await run_eval(PROGRAM, data, evaluators=[FIXTURE], variants={"deadline": DEADLINE}, out=folder, resume=True)
    assert snapshot(folder) == before


async def test_an_interrupted_eval_resumed_after_a_wording_change_keeps_its_partial_file(tmp_path: Path) -> None:
    data = dataset(tmp_path, 8)
    folder = tmp_path / "out"
    import anyio

    seen = 0
    with anyio.CancelScope() as scope:
        def counted(_: Any) -> None:
            nonlocal seen
            seen += 1
            if seen == 3:
                scope.cancel()

        await run_eval(PROGRAM, data, evaluators=[FIXTURE], out=folder, concurrency=1, on_outcome=counted)
    assert scope.cancelled_caught and (folder / PARTIAL).exists() and (folder / MANIFEST).exists()
    before = snapshot(folder)
    with pytest.raises(EvalError, match=re.escape("variant 'base' changed since it was recorded: its code differs")):
        await run_eval(DEADLINE, data, evaluators=[FIXTURE], out=folder, resume=True)
    assert snapshot(folder) == before
    await run_eval(PROGRAM, data, evaluators=[FIXTURE], out=folder, resume=True)
    assert sorted(r.line for r in records_of(folder)) == list(range(2, 10))


async def test_a_folder_without_a_manifest_is_not_resumed(tmp_path: Path) -> None:
    data, folder = await started(tmp_path)
    (folder / MANIFEST).unlink()
    before = snapshot(folder)
    with pytest.raises(EvalError, match=re.escape(f"{folder} holds an eval without a manifest.json (written by a "
                                                  "fabric-jev that did not record what an eval was made of): "
                                                  "whether it is this eval cannot be checked, so it is not "
                                                  "resumed; start a new --out")):
        await run_eval(PROGRAM, data, evaluators=[FIXTURE], variants={"deadline": DEADLINE}, out=folder, resume=True)
    assert snapshot(folder) == before
    (folder / MANIFEST).write_text('{"format": "fabric-jev-eval-manifest", "version": 2}')
    with pytest.raises(EvalError, match=r"manifest.json is not an eval manifest \(version: .*\); not resuming"):
        await run_eval(PROGRAM, data, evaluators=[FIXTURE], variants={"deadline": DEADLINE}, out=folder, resume=True)


async def test_a_folder_holding_only_a_manifest_is_an_eval_already(tmp_path: Path) -> None:
    data = dataset(tmp_path, 2)
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / MANIFEST).write_text("{}")
    with pytest.raises(EvalError, match=re.escape("already holds an eval (manifest.json); pass --resume")):
        await run_eval(PROGRAM, data, evaluators=[FIXTURE], out=folder)
    assert snapshot(folder) == {MANIFEST: b"{}"}


async def test_an_evaluator_object_cannot_go_to_ray(tmp_path: Path) -> None:
    # Refused before Ray is started or anything is written.
    data = dataset(tmp_path, 2)
    fixture = FixtureEvaluator.from_file(EXAMPLE / "fixture.json")
    with pytest.raises(EvalError, match="is an Evaluator object: with Ray, give every evaluator as a spec string"):
        await run_eval(PROGRAM, data, evaluators=[fixture], out=tmp_path / "out", ray=True)
    with pytest.raises(ConfigError, match="record:FILE cannot be used with Ray"):
        await run_eval(PROGRAM, data, evaluators=[f"record:{tmp_path / 'c.jsonl'}"], out=tmp_path / "out", ray=True)
    assert not (tmp_path / "out").exists()
    done = cli("eval", PROGRAM, "--dataset", str(data), "--actors", "2")
    assert done.returncode == 2 and "--actors is the number of Ray actors: give --ray too" in done.stderr


def _manifest(code: str, expected: Any = "billing") -> EvalManifest:
    program = parse_program({"name": "p", "code": code, "inputSchema": {"type": "string"}, "outputSchema": {}})
    data = Dataset(path="d.jsonl", format="jsonl", cases=(EvalCase(line=1, key=1, input="x", expected=expected),))
    return manifest([("local", "base")], {"base": program},
                    {"local": EvaluatorEntry(spec="local", route="local")}, data, EvalSettings(), HostConfig())


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_the_code_is_told_apart_by_its_text_alone(one: str, two: str) -> None:
    found = change(_manifest(one), _manifest(two))
    if one == two:
        assert found is None
    else:
        assert found is not None and found.part == "variant" and "its code differs" in found.reason
    # What is written is read back the same.
    written = _manifest(one)
    assert EvalManifest.from_json(json.loads(json.dumps(written.to_json()))) == written


@settings(max_examples=30, deadline=None)
@given(st.text(max_size=20), st.text(max_size=20))
def test_a_label_is_told_apart_by_its_text_alone(one: str, two: str) -> None:
    found = change(_manifest("return 1", one), _manifest("return 1", two))
    assert (found is None) == (one == two)
    assert found is None or found.reason.startswith("the dataset changed since it was recorded: its lines differ")


def test_an_object_is_known_by_its_route() -> None:
    spec = _manifest("return 1")
    other = spec.model_copy(update={"evaluators": {"local": EvaluatorEntry(spec=None, route="local", model="m")}})
    assert change(spec, other) is None
    elsewhere = spec.model_copy(update={"evaluators": {"local": EvaluatorEntry(spec=None, route="ollama")}})
    found = change(spec, elsewhere)
    assert found is not None and "its route differs ('local' then, 'ollama' now)" in found.reason
