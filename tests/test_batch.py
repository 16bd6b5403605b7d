"""`fabric-jev batch` and `fabric_jev.batch.batch`: real hosts, real workers, a fixture evaluator."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import resource
import signal
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from contextlib import aclosing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from fabric_jev import BatchError, CompileError, FixtureEvaluator, HostConfig
from fabric_jev.batch import BatchOutcome, OutputLog, batch, count_inputs, read_inputs
from tests.conftest import child_pids

ROOT = Path(__file__).resolve().parent.parent
COUNT = 500

#: Multiples of 7 throw; every input asks one noul question of the fixture.
PROGRAM: dict[str, Any] = {
    "name": "judge",
    "code": "if (input.n % 7 === 0) throw new Error('seven'); "
            "const a = await jev.evaluate({state: input, questions: {q: {type: 'noul', instructions: 'ok?'}}}); "
            "return {n: input.n, ok: a.answers.q.noul}",
    "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    "outputSchema": {"type": "object"},
    "requires": ["jev.evaluate"],
}
FIXTURE = {"answers": {"q": {"noul": 0.75}}, "usage": {"input_tokens": 10, "output_tokens": 2}}


def input_line(n: int) -> str:
    """Line n of the inputs: every 50th is off-schema, line 123 is not JSON, the rest {n}."""
    if n == 123:
        return "{not json"
    if n % 50 == 0:
        return json.dumps({"n": "fifty"})
    return json.dumps({"n": n})


def expected_state(n: int) -> str:
    if n == 123 or n % 50 == 0:
        return "rejected"
    return "failed" if n % 7 == 0 else "completed"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "program.json").write_text(json.dumps(PROGRAM))
    (tmp_path / "fixture.json").write_text(json.dumps(FIXTURE))
    (tmp_path / "inputs.jsonl").write_text("".join(input_line(n) + "\n" for n in range(1, COUNT + 1)))
    return {"program": str(tmp_path / "program.json"), "fixture": str(tmp_path / "fixture.json"),
            "inputs": str(tmp_path / "inputs.jsonl"), "out": str(tmp_path / "out.jsonl")}


def batch_argv(files: dict[str, str], *extra: str) -> list[str]:
    return [sys.executable, "-m", "fabric_jev.cli", "batch", files["program"], "--inputs", files["inputs"],
            "--out", files["out"], "--evaluator", f"fixture:{files['fixture']}", *extra]


def run_cli(files: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(batch_argv(files, *extra), capture_output=True, text=True, timeout=50, cwd=ROOT)


def records(path: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def check_complete(lines: list[dict[str, Any]]) -> None:
    """One line per input, none twice, each with the state and result its input calls for."""
    assert sorted(r["line"] for r in lines) == list(range(1, COUNT + 1))
    for r in lines:
        n = r["line"]
        assert r["id"] == n
        assert r["state"] == expected_state(n), r
        if r["state"] == "completed":
            assert r["result"] == {"n": n, "ok": 0.75}
            assert r["evaluations"] == 1 and r["usage"] == {"input_tokens": 10, "output_tokens": 2}
        else:
            assert r["error"] and "result" not in r
    rejected = {r["line"]: r["error"] for r in lines if r["state"] == "rejected"}
    assert rejected[123] == "input line 123 is not valid JSON: Expecting property name enclosed in double quotes (line 1, column 2)"
    assert rejected[50].startswith("input does not match its declared schema")


def test_500_inputs_give_500_lines_with_the_right_states(files: dict[str, str]) -> None:
    done = run_cli(files)
    assert done.returncode == 1, done.stderr  # some inputs did not complete
    check_complete(records(files["out"]))
    assert "batch summary" in done.stderr
    summary = done.stderr[done.stderr.index("batch summary"):]
    completed = sum(expected_state(n) == "completed" for n in range(1, COUNT + 1))
    assert f"completed    {completed}\n" in summary
    assert f"evaluations  {completed}\n" in summary
    assert f"tokens       {completed * 10} in / {completed * 2} out\n" in summary
    # Not a terminal: one plain progress line per input.
    assert done.stderr.count("batch: [") == COUNT


def test_resume_after_a_kill_loses_and_duplicates_nothing(files: dict[str, str]) -> None:
    proc = subprocess.Popen(batch_argv(files), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True, cwd=ROOT)
    assert proc.stderr is not None
    try:
        # Each progress line is printed after its output line was written.
        for _ in range(150):
            assert proc.stderr.readline().startswith("batch: [")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(10)
        proc.stderr.close()
    first = Path(files["out"]).read_bytes()
    assert 150 <= first.count(b"\n") < COUNT
    done = run_cli(files, "--resume", "--quiet")
    assert done.returncode == 1, done.stderr
    assert Path(files["out"]).read_bytes().startswith(first.rpartition(b"\n")[0])
    check_complete(records(files["out"]))
    assert "already done" in done.stderr


def test_a_cut_off_last_line_is_dropped_and_run_again(files: dict[str, str]) -> None:
    Path(files["inputs"]).write_text("".join(input_line(n) + "\n" for n in range(1, 4)))
    whole = json.dumps(BatchOutcome(line=1, id=1, state="completed", result={"n": 1, "ok": 0.75}).to_json())
    Path(files["out"]).write_text(whole + "\n" + '{"line": 2, "id": 2, "sta')
    done = run_cli(files, "--resume")
    assert done.returncode == 0, done.stderr
    lines = records(files["out"])
    assert lines[0]["line"] == 1 and sorted(r["line"] for r in lines) == [1, 2, 3]


def test_an_existing_output_needs_resume(files: dict[str, str]) -> None:
    Path(files["out"]).write_text("{}\n")
    done = run_cli(files)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"fabric-jev: output {files['out']} already has records; pass --resume to continue it or choose another --out"]
    done = run_cli(files, "--resume")
    assert done.returncode == 2
    assert done.stderr.strip() == (f"fabric-jev: output {files['out']} line 1 is not a batch record "
                                   "(line must be a positive integer); not resuming")
    assert Path(files["out"]).read_text() == "{}\n"


def test_a_program_that_does_not_compile_stops_the_batch(files: dict[str, str]) -> None:
    Path(files["program"]).write_text(json.dumps({**PROGRAM, "code": "return 1 +"}))
    done = run_cli(files)
    assert done.returncode == 2
    assert "fabric-jev: launch rejected: Jev program does not compile" in done.stderr
    assert "Traceback" not in done.stderr and "batch summary" not in done.stderr


def on_a_terminal(argv: list[str]) -> str:
    """What a command shows on a pseudo-terminal, once it has ended (exit code 1 expected)."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=terminal, cwd=ROOT, env={**os.environ, "COLUMNS": "120", "TERM": "xterm"})
    os.close(terminal)
    shown = bytearray()
    try:
        while True:
            try:
                chunk = os.read(controller, 65_536)
            except OSError:  # EIO: the batch closed its terminal
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)
        assert proc.wait(30) == 1
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.decode())  # without rich's colours


def test_a_resumed_bar_counts_what_is_done_and_ends_full(files: dict[str, str]) -> None:
    Path(files["inputs"]).write_text("".join(input_line(n) + "\n" for n in range(1, 21)))
    assert run_cli(files, "--limit", "12", "--quiet").returncode == 1  # line 7 and 14 fail
    text = on_a_terminal(batch_argv(files, "--resume"))
    assert "resuming: 12 inputs already in the output are skipped" in text
    assert "20/20" in text and "ETA" in text  # not 8/20: the bar counts the 12 done earlier
    assert len(records(files["out"])) == 20


def test_a_terminal_gets_a_live_bar_and_a_summary_table(files: dict[str, str]) -> None:
    Path(files["inputs"]).write_text("".join(input_line(n) + "\n" for n in range(1, 21)))
    text = on_a_terminal(batch_argv(files))
    assert "batch: [" not in text  # not the plain lines
    assert "20/20" in text and "not completed" in text and "ETA" in text
    assert "batch summary" in text and "│" in text  # rich's table
    assert len(records(files["out"])) == 20


def test_inputs_keyed_by_an_id_field(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "n": 1}\n\n{"id": "b", "n": 2}\n{"id": "a", "n": 3}\n{"n": 4}\n')
    items = list(read_inputs(path, id_field="id"))
    assert [(i.line, i.key, i.error) for i in items] == [
        (1, "a", None), (3, "b", None), (4, "a", "input line 4 repeats id 'a'"),
        (5, 5, "input line 5 has no 'id' (a string or an integer)")]


def test_output_log_refuses_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(BatchError, match=r"cannot write output .*: No such file or directory"):
        OutputLog(tmp_path / "no" / "out.jsonl").open(resume=False)


@pytest.mark.anyio
async def test_python_api_yields_every_outcome() -> None:
    evaluator = FixtureEvaluator(FIXTURE)
    seen: dict[int, BatchOutcome] = {}
    async for outcome in batch(PROGRAM, ({"n": n} for n in range(1, 41)), evaluator=evaluator,
                               config=HostConfig(max_concurrent_runs=2), concurrency=4):
        seen[outcome.line] = outcome
    assert sorted(seen) == list(range(1, 41))
    for n, outcome in seen.items():
        assert outcome.state == ("failed" if n % 7 == 0 else "completed")
    assert evaluator.calls == 40 - 5


def test_python_api_under_plain_asyncio_run() -> None:
    """Not only under anyio.run: a script's own `asyncio.run` works the same."""
    import asyncio

    async def main() -> list[BatchOutcome]:
        return [o async for o in batch(PROGRAM, ({"n": n} for n in range(1, 61)),
                                       evaluator=FixtureEvaluator(FIXTURE))]

    outcomes = asyncio.run(main())
    assert sorted(o.line for o in outcomes) == list(range(1, 61))
    for outcome in outcomes:
        assert outcome.state == ("failed" if outcome.line % 7 == 0 else "completed"), outcome


def test_an_interrupted_batch_writes_no_cancelled_line_and_resumes(files: dict[str, str]) -> None:
    proc = subprocess.Popen(batch_argv(files), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True, cwd=ROOT)
    assert proc.stderr is not None
    with proc.stderr:
        for _ in range(100):
            assert proc.stderr.readline().startswith("batch: [")
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
    assert proc.wait(30) == 130
    assert "batch summary (interrupted: rerun with --resume)" in rest
    first = records(files["out"])
    assert 100 <= len(first) < COUNT and all(r["state"] != "cancelled" for r in first)
    done = run_cli(files, "--resume", "--quiet")
    assert done.returncode == 1, done.stderr
    check_complete(records(files["out"]))


@pytest.mark.anyio
async def test_python_api_raises_a_bad_program_unwrapped() -> None:
    with pytest.raises(CompileError, match="does not compile"):
        async with aclosing(batch({**PROGRAM, "code": "return 1 +"}, [{"n": 1}, {"n": 2}],
                                  evaluator=FixtureEvaluator(FIXTURE))) as outcomes:
            async for _ in outcomes:
                pass


@pytest.mark.anyio
async def test_leaving_the_loop_early_cancels_the_rest() -> None:
    before = child_pids()
    async with aclosing(batch(PROGRAM, ({"n": n} for n in range(1, 1000)),
                              evaluator=FixtureEvaluator(FIXTURE))) as outcomes:
        async for outcome in outcomes:
            assert outcome.line >= 1
            break
    # The host closed and its workers are gone (a session Chromium's own new helpers aside).
    assert child_pids(apart_from=before) == set()


# ---------------------------------------------------------------- hostile files


def sparse_line(path: Path, before: str, length: int, after: str) -> None:
    """`before`, then one line of `length` NUL bytes without a newline of its own (a hole: no disk), then `after`."""
    with path.open("wb") as f:
        f.write(before.encode())
        f.seek(length, os.SEEK_CUR)
        f.write(b"\n" + after.encode())


def test_counting_and_reading_hold_a_long_line_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    sparse_line(path, '{"n": 1}\n\n', 256 << 20, '{"n": 3}\n  \n')
    tracemalloc.start()
    try:
        total = count_inputs(path)
        items = list(read_inputs(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == 3
    assert [(i.line, i.error) for i in items] == [
        (1, None), (3, "input line 3 is larger than 65536 bytes"), (4, None)]
    assert peak < 8 << 20  # a few blocks, never the 256 MiB line


def limited(memory: int = 0, file_size: int = 0) -> Any:
    def apply() -> None:
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if file_size:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    return apply


@pytest.mark.timeout(180)
def test_a_line_larger_than_memory_is_one_rejected_input(files: dict[str, str]) -> None:
    # 1.5 GiB without a newline, in a process allowed 1 GiB of address space.
    sparse_line(Path(files["inputs"]), '{"n": 1}\n', 3 << 29, '{"n": 2}\n')
    done = subprocess.run(batch_argv(files, "--quiet"), capture_output=True, text=True, timeout=170, cwd=ROOT,
                          preexec_fn=limited(memory=1 << 30))
    assert done.returncode == 1, done.stderr
    assert "internal error" not in done.stderr
    assert sorted((r["line"], r["state"], r.get("error")) for r in records(files["out"])) == [
        (1, "completed", None), (2, "rejected", "input line 2 is larger than 65536 bytes"), (3, "completed", None)]


TAMPERED = {
    "usage as a list": {"usage": [1, 2]},
    "usage as a string": {"usage": "lots"},
    "evaluations as a list": {"evaluations": [1]},
    "evaluations beyond any ceiling": {"evaluations": 10**400},
    "negative tokens": {"usage": {"input_tokens": -5, "output_tokens": 0}},
    "a boolean id": {"id": True},
    "a boolean line": {"line": True},
    "a result on a failed record": {"state": "failed", "result": 1},
    "an unknown field": {"extra": 1},
}


@pytest.mark.parametrize("change", TAMPERED.values(), ids=TAMPERED.keys())
def test_a_tampered_resume_file_is_refused_in_one_line(files: dict[str, str], change: dict[str, Any]) -> None:
    Path(files["inputs"]).write_text(input_line(1) + "\n")
    record = {**BatchOutcome(line=1, id=1, state="completed", result={"n": 1, "ok": 0.75}).to_json(), **change}
    text = json.dumps(record) + "\n"
    Path(files["out"]).write_text(text)
    done = run_cli(files, "--resume")
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"fabric-jev: output {files['out']} line 1 is not a batch record (")
    assert line.endswith("); not resuming")
    assert Path(files["out"]).read_text() == text


def test_out_must_be_a_regular_file(files: dict[str, str], tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for out, kind in (("/dev/full", "a character device"), (str(fifo), "a FIFO"), (str(tmp_path), "a directory")):
        # A FIFO with no reader used to block the open for ever: the subprocess timeout would fire.
        done = run_cli({**files, "out": out})
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"fabric-jev: output {out} is {kind}; --out must be a regular file "
            "(records are appended and read back by --resume)"]


def test_a_full_disk_stops_the_batch_in_one_line_and_resume_finishes_it(files: dict[str, str]) -> None:
    Path(files["inputs"]).write_text("".join(input_line(n) + "\n" for n in range(1, 21)))
    # Python ignores SIGXFSZ: past the size limit a write fails with EFBIG, as on a full disk with ENOSPC.
    done = subprocess.run(batch_argv(files, "--quiet"), capture_output=True, text=True, timeout=50, cwd=ROOT,
                          preexec_fn=limited(file_size=1000))
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last == (f"fabric-jev: cannot write output {files['out']}: File too large; the records so far "
                    "are kept, rerun with --resume")
    assert "Traceback" not in done.stderr
    written = Path(files["out"]).read_bytes()
    assert 0 < written.count(b"\n") < 20
    resumed = run_cli(files, "--resume", "--quiet")
    assert resumed.returncode == 1, resumed.stderr  # line 7 fails, as always
    lines = records(files["out"])
    assert sorted(r["line"] for r in lines) == list(range(1, 21))


def test_a_named_fifo_is_refused_at_once_and_a_pipe_on_standard_input_is_read_to_its_end(
        files: dict[str, str]) -> None:
    fifo = Path(files["inputs"]).with_name("inputs.fifo")
    os.mkfifo(fifo)
    # A FIFO used to be waited on for a writer (for ever, when none came): now it is refused, and
    # a stream is named as one, "-", for standard input.
    done = run_cli({**files, "inputs": str(fifo)}, "--quiet")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"fabric-jev: cannot read inputs {fifo}: it is a FIFO, "
                                                "not a regular file"]
    assert not Path(files["out"]).exists()
    piped = subprocess.run(batch_argv({**files, "inputs": "-"}, "--quiet"), input=input_line(1) + "\n" + input_line(2),
                           capture_output=True, text=True, timeout=50, cwd=ROOT)
    assert piped.returncode == 0, piped.stderr
    assert sorted((r["line"], r["state"]) for r in records(files["out"])) == [(1, "completed"), (2, "completed")]


@contextmanager
def reading_a_waiting_pipe(files: dict[str, str], first: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`fabric-jev batch` reading its inputs from a pipe on standard input that sends `first` and
    then waits (the test holds the pipe open until it ends); the process is ended if the test did not."""
    argv = [sys.executable, "-m", "fabric_jev.cli", "batch", files["program"], "--inputs", "-", *args]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.write(first + "\n")
        proc.stdin.flush()
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        for stream in (proc.stdin, proc.stderr):
            if stream is not None:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()


def test_a_pipe_that_waits_holds_back_neither_outcomes_nor_signals(files: dict[str, str]) -> None:
    with reading_a_waiting_pipe(files, input_line(1), "--out", files["out"], "--evaluator",
                                f"fixture:{files['fixture']}") as proc:
        assert proc.stderr is not None
        # Line 1's outcome is shown while the pipe waits for a line 2 that is not written yet...
        assert proc.stderr.readline().startswith("batch: [1/?] line 1 id 1: completed")
        # ... and a signal stops the batch at once instead of waiting for the writer.
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
        assert "interrupted" in proc.stderr.read()
    assert [r["line"] for r in records(files["out"])] == [1]


def test_a_dry_run_on_a_pipe_that_waits_still_hears_a_signal(files: dict[str, str]) -> None:
    # Line 1 is off-schema: the dry run reports it at once.
    with reading_a_waiting_pipe(files, input_line(50), "--dry-run") as proc:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("batch: line 1 id 1: ")
        # The dry run read its inputs on the event loop: waiting for line 2, it did not hear SIGINT.
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
