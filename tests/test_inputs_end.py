"""Inputs that end (issue 39, part 4): every reader of a file a user names refuses what is not a
regular file at once, and bounds what it reads.

The real command in a child process, on a real `/dev/zero` behind a symlink named like a
dataset, a real FIFO with no writer and one with a writer, and a real unix socket. Each
command ends with one clear line and exit code 2. "Ends" is held by the subprocess's
timeout, generous for a busy machine: before the fix `eval` on `/dev/zero` spun for ever
and every command waited for ever in `open()` on a FIFO without a writer.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_jev import EvalError, JevError
from fabric_jev._files import LineLimits, bounded_lines, open_regular, read_regular
from fabric_jev.batch import count_inputs, read_inputs
from fabric_jev.evals.dataset import read_dataset
from fabric_jev.evaluators.cassette import Cassette
from fabric_jev.program_files import load_program
from tests.cli_support import ROOT, cli

EXAMPLE = ROOT / "examples" / "eval"
PROGRAM = str(EXAMPLE / "triage.js")
FIXTURE = f"fixture:{EXAMPLE / 'fixture.json'}"
#: Generous for a loaded machine: a refusal takes well under a second; a hang never ends.
ENDS_WITHIN = 30


# ---------------------------------------------------------------- the special files

@contextlib.contextmanager
def special(tmp: Path, kind: str, name: str) -> Iterator[tuple[Path, str]]:
    """`tmp/name` made into `kind`, and what a refusal calls it."""
    path = tmp / name
    if kind == "device":
        path.symlink_to("/dev/zero")
        yield path, "a character device (/dev/zero)"
    elif kind == "fifo":
        os.mkfifo(path)
        yield path, "a FIFO"
    elif kind == "fifo with a writer":
        os.mkfifo(path)
        # O_RDWR never waits on Linux: the test holds a writer (with a line waiting) while the
        # command runs, as a producer feeding the FIFO would.
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        try:
            os.write(fd, b'{"id": 1, "input": {"text": "x"}, "expected": {}}\n')
            yield path, "a FIFO"
        finally:
            os.close(fd)
    elif kind == "socket":
        # A short relative name: a socket's path is limited to 108 bytes.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            here = os.getcwd()
            os.chdir(tmp)
            try:
                server.bind(name)
            finally:
                os.chdir(here)
            yield path, "a socket"
    else:
        raise AssertionError(kind)


KINDS = ["device", "fifo", "fifo with a writer", "socket"]


def refused(done: object, message: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == message
    assert "Traceback" not in done.stderr


# ---------------------------------------------------------------- the four commands

@pytest.mark.parametrize("kind", KINDS)
def test_eval_on_a_dataset_that_is_not_a_file_ends_at_once(tmp_path: Path, kind: str) -> None:
    with special(tmp_path, kind, "data.jsonl") as (path, what):
        done = cli("eval", PROGRAM, "--dataset", str(path), "--evaluator", FIXTURE, "--out", str(tmp_path / "out"),
                   timeout=ENDS_WITHIN)
    refused(done, f"fabric-jev: cannot read dataset {path}: it is {what}, not a regular file")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_batch_on_inputs_that_are_not_a_file_ends_at_once(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "out.jsonl"
    with special(tmp_path, kind, "in.jsonl") as (path, what):
        done = cli("batch", PROGRAM, "--inputs", str(path), "--out", str(out), "--evaluator", FIXTURE,
                   timeout=ENDS_WITHIN)
    refused(done, f"fabric-jev: cannot read inputs {path}: it is {what}, not a regular file")
    assert not out.exists()  # refused before the output was opened


@pytest.mark.parametrize("kind", KINDS)
def test_run_on_an_input_or_program_that_is_not_a_file_ends_at_once(tmp_path: Path, kind: str) -> None:
    with special(tmp_path, kind, "input.json") as (path, what):
        done = cli("run", PROGRAM, "--input", str(path), "--evaluator", FIXTURE, timeout=ENDS_WITHIN)
        refused(done, f"fabric-jev: launch rejected: cannot read input {path}: it is {what}, not a regular file")
    with special(tmp_path, kind, "program.js") as (path, what):
        done = cli("run", str(path), "--input-json", "{}", timeout=ENDS_WITHIN)
        refused(done, f"fabric-jev: launch rejected: cannot read program {path}: it is {what}, not a regular file")


@pytest.mark.parametrize("kind", KINDS)
def test_mcp_on_a_programs_folder_that_is_not_a_folder_ends_at_once(tmp_path: Path, kind: str) -> None:
    with special(tmp_path, kind, "programs") as (path, what):
        done = cli("mcp", "--programs", str(path), "--evaluator", FIXTURE, timeout=ENDS_WITHIN)
    refused(done, f"fabric-jev: launch rejected: cannot use programs folder {path}: "
                  f"it is {what.split(' (')[0]}, not a folder")


def test_batch_reads_a_pipe_on_standard_input(tmp_path: Path) -> None:
    """A stream is still welcome, named as one: `--inputs -` reads standard input."""
    out = tmp_path / "out.jsonl"
    lines = (EXAMPLE / "tickets.jsonl").read_text(encoding="utf-8").splitlines()[1:4]
    inputs = "".join(json.dumps(json.loads(line)["input"]) + "\n" for line in lines)
    done = cli("batch", PROGRAM, "--inputs", "-", "--out", str(out), "--evaluator", FIXTURE, "--quiet",
               stdin=inputs, timeout=ENDS_WITHIN * 2)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["line"] for r in records) == [1, 2, 3]
    assert {r["state"] for r in records} == {"completed"}


# ---------------------------------------------------------------- every reader, in process

def readers() -> dict[str, Callable[[Path], object]]:
    """Each reader of a user-named file, by the name of what it reads."""
    from fabric_jev import FixtureEvaluator
    from fabric_jev.approval.settings import ApprovalSettings
    from fabric_jev.calibration.ask import AnswerCache
    from fabric_jev.calibration.labels import read_labels
    from fabric_jev.contract.config import HostConfig
    from fabric_jev.evals import read_results
    from fabric_jev.evaluators.llm_profile import LlmProfile
    from fabric_jev.evaluators.profile import Profile
    from fabric_jev.verification.files import load_plan

    schema = {"type": "object"}
    return {
        "dataset.jsonl": lambda p: read_dataset(p, input_schema=schema, output_schema=schema),
        "dataset.csv": lambda p: read_dataset(p, input_schema=schema, output_schema=schema),
        "dataset.parquet": lambda p: read_dataset(p, input_schema=schema, output_schema=schema),
        "inputs.jsonl": lambda p: list(read_inputs(p)),
        "counted.jsonl": count_inputs,
        "program.json": load_program,
        "program.ts": load_program,
        "cassette.jsonl": Cassette,
        "config.json": HostConfig.load,
        "settings.json": ApprovalSettings.load,
        "fixture.json": FixtureEvaluator.from_file,
        "profile.json": lambda p: Profile.load(p, embedding_sha256="0" * 64),
        "llm-profile.json": LlmProfile.load,
        "labels.jsonl": read_labels,
        "answers.jsonl": lambda p: AnswerCache(p, "identity"),
        "dictionary.json": lambda p: load_plan({}, p),
        "results.jsonl": lambda p: list(read_results(p)),
    }


ERRORS = (JevError, ValueError)  # each reader raises its own error of the tree


@pytest.mark.parametrize("kind", KINDS)
def test_every_reader_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    for name, read in readers().items():
        with special(tmp_path, kind, name) as (path, what):
            with pytest.raises(ERRORS) as caught:
                read(path)
            assert f"it is {what}, not a regular file" in str(caught.value), (name, str(caught.value))
            assert str(path) in str(caught.value), name


def test_a_save_to_disk_folder_holding_a_fifo_is_refused_before_the_library_opens_it(tmp_path: Path) -> None:
    folder = tmp_path / "saved"
    folder.mkdir()
    (folder / "state.json").write_text("{}")
    os.mkfifo(folder / "data-00000-of-00001.arrow")
    with pytest.raises(EvalError, match=r"data-00000-of-00001\.arrow is a FIFO, not a regular file$"):
        read_dataset(folder, input_schema={"type": "object"}, output_schema={"type": "object"})


def test_a_fifo_behind_a_linked_subfolder_is_refused_and_a_link_loop_ends(tmp_path: Path) -> None:
    folder = tmp_path / "saved"
    (folder / "train").mkdir(parents=True)
    (folder / "dataset_dict.json").write_text('{"splits": ["train", "test"]}')
    (folder / "train" / "loop").symlink_to(folder)  # a link back up: the walk must still end
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.mkfifo(elsewhere / "data-00000-of-00001.arrow")
    (folder / "test").symlink_to(elsewhere)
    with pytest.raises(EvalError, match=r"test/data-00000-of-00001\.arrow is a FIFO, not a regular file$"):
        read_dataset(folder, input_schema={"type": "object"}, output_schema={"type": "object"})


# ---------------------------------------------------------------- the bounds, on text of any shape

LIMITS = LineLimits(max_bytes=4096, max_line_bytes=64, max_lines=50)


def split_as_expected(data: bytes) -> list[bytes | None] | str:
    """What bounded_lines should give for `data` under LIMITS: its lines (None for a long one),
    or the refusal's kind ("size", "lines")."""
    if len(data) > LIMITS.max_bytes:
        return "size"
    lines = data.split(b"\n")
    pieces = [line + b"\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    if len(pieces) > LIMITS.max_lines:
        return "lines"
    return [None if len(p) > LIMITS.max_line_bytes and not (len(p) == LIMITS.max_line_bytes + 1
                                                              and p.endswith(b"\n")) else p
            for p in pieces]


TEXT = st.lists(st.one_of(st.text(max_size=80), st.just(""), st.text(alphabet="x", min_size=60, max_size=300)),
                max_size=80).map(lambda lines: "\n".join(lines).encode("utf-8"))


@settings(max_examples=150, deadline=None)
@given(TEXT, st.booleans())
def test_bounded_lines_gives_every_line_or_refuses_at_a_bound(data: bytes, newline: bool) -> None:
    data = data + b"\n" if newline else data
    expected = split_as_expected(data)
    lines = bounded_lines(io.BufferedReader(io.BytesIO(data)), label="the file", limits=LIMITS,  # type: ignore[arg-type]
                          error=EvalError)
    if isinstance(expected, str):
        with pytest.raises(EvalError, match=("is larger than 4096 bytes" if expected == "size"
                                             else "has more than 50 lines")):
            list(lines)
        return
    got = list(lines)
    assert got == expected
    # Nothing is lost: the lines kept, and the ones too long, make up the whole text.
    assert sum(len(g) for g in got if g is not None) <= len(data)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000), st.integers(min_value=0, max_value=3000))
def test_read_regular_reads_a_file_whole_or_refuses_it_by_its_bound(tmp_path_factory: pytest.TempPathFactory,
                                                                   data: bytes, bound: int) -> None:
    path = tmp_path_factory.mktemp("read") / "f.bin"
    path.write_bytes(data)
    if len(data) > bound:
        with pytest.raises(EvalError, match=rf"^f\.bin is larger than {bound} bytes \({len(data)} bytes\)$"):
            read_regular(path, label="f.bin", max_bytes=bound, error=EvalError)
    else:
        assert read_regular(path, label="f.bin", max_bytes=bound, error=EvalError) == data


def test_a_dataset_line_without_end_is_one_bad_line_and_a_dataset_past_its_size_stops(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/dev/zero as a regular file: a line that never ends is skipped in blocks and counted
    bad, and reading stops with an error at the dataset's size bound, nothing of it used."""
    import fabric_jev.evals.dataset as dataset

    schema = {"type": "object"}
    path = tmp_path / "zeros.jsonl"
    with open(path, "wb") as f:
        f.write(b'{"input": {}, "expected": {}}\n')
        f.truncate(1 << 20)  # a 1 MiB line of NULs, with no newline
    got = read_dataset(path, input_schema=schema, output_schema=schema)
    assert len(got.cases) == 1 and [b.line for b in got.bad] == [2]
    assert got.bad[0].error == f"dataset line 2: is larger than {dataset.MAX_LINE_BYTES} bytes"
    # The same file past a bound it passes while it is read (one it grew past after the open).
    monkeypatch.setattr(dataset, "_JSONL_LIMITS", LineLimits(max_bytes=512 << 10, max_line_bytes=256 << 10,
                                                            max_lines=10))
    with pytest.raises(EvalError, match=rf"^dataset {path} is larger than {512 << 10} bytes$"):
        read_dataset(path, input_schema=schema, output_schema=schema)
    path.write_bytes(b"\n" * 11)
    with pytest.raises(EvalError, match=rf"^dataset {path} has more than 10 lines$"):
        read_dataset(path, input_schema=schema, output_schema=schema)


def test_open_regular_names_what_it_cannot_open(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match=r"^cannot read the file .*nope: No such file or directory$"):
        open_regular(tmp_path / "nope", label=f"the file {tmp_path / 'nope'}", error=EvalError)
    with pytest.raises(EvalError, match=r"^cannot read the folder: it is a directory, not a regular file$"):
        open_regular(tmp_path, label="the folder", error=EvalError)
