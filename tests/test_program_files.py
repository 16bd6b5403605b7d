"""Programs as files: one .ts/.js file carries its contract; `new`, `pack`, and `run`/`batch` on
files; `run --result` and `--input-json`. The real command in child processes, real workers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabric_jev import ProgramInvalid
from fabric_jev.contract.program import parse_program
from fabric_jev.program_files import load_program
from fabric_jev.program_files.header import program_from_source
from tests.cli_support import cli

HEADER = """/* @program
{
  "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
  "outputSchema": {"type": "integer"},
  "limits": {"timeoutMs": 5000}
}
*/
"""


def write_text(tmp: Path, name: str, text: str) -> str:
    path = tmp / name
    path.write_text(text)
    return str(path)


FIXTURE = {"answers": {"topic": {"choice": "billing", "probabilities": {"billing": 0.8, "technical": 0.1,
                                                                        "other": 0.1}, "confidence": 0.8},
                       "urgent": {"noul": 0.2}},
           "usage": {"input_tokens": 30, "output_tokens": 3}}


# ---------------------------------------------------------------- the file form


def test_a_source_file_becomes_the_artifact_with_its_lines_in_place(tmp_path: Path) -> None:
    path = write_text(tmp_path, "double.ts", HEADER + "const n: number = input.n;\nreturn n * 2;\n")
    artifact = load_program(path)
    assert artifact["name"] == "double"  # the file's stem when the comment names none
    assert artifact["limits"] == {"timeoutMs": 5000} and "code" not in json.dumps(artifact["inputSchema"])
    code_lines = artifact["code"].split("\n")
    file_lines = Path(path).read_text().split("\n")
    assert code_lines[7:] == file_lines[7:] and not "".join(code_lines[:7]).strip()
    parse_program(artifact)


def test_code_on_the_closing_line_keeps_its_column() -> None:
    header = '/* @program {"name": "x", "inputSchema": {}, "outputSchema": {}} */'
    artifact = program_from_source(header + " return 1", what="x.js")
    assert artifact["code"] == " " * len(header) + " return 1"


@pytest.mark.parametrize(("text", "message"), [
    ("return 1", "x.js: a program file starts with its contract in a comment: /* @program"),
    ("// @program\nreturn 1", "a program file starts with its contract"),
    ("/* @program {\"inputSchema\": {}} return 1", "the @program comment opened at line 1, column 1 is never closed"),
    ("\n/* @program\n{\"inputSchema\": {},}\n*/ return 1",
     "x.js: the @program comment is not valid JSON: Expecting property name enclosed in double quotes (line 3, column 20)"),
    ('/* @program {"description": "a */ b"} */ return 1', "a */ inside a JSON string ends the comment: write it as *\\/"),
    ("/* @program [1] */ return 1", "must hold a JSON object"),
    ('/* @program {"code": "return 2"} */ return 1', "must not hold \"code\""),
    ('/* @program {"inputSchema": {}, "outputSchema": {}} */\n\n', "there is no code after the @program comment"),
])
def test_a_bad_file_is_one_line_naming_the_file_and_the_place(text: str, message: str) -> None:
    with pytest.raises(ProgramInvalid) as err:
        program_from_source(text, what="x.js", default_name="x")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_loader_reads_json_and_source_and_refuses_unreadable_files(tmp_path: Path) -> None:
    artifact = {"name": "j", "code": "return 1", "inputSchema": {}, "outputSchema": {}}
    assert load_program(write_text(tmp_path, "j.json", json.dumps(artifact))) == artifact
    # Without a telling suffix, a file that opens with the comment is source.
    assert load_program(write_text(tmp_path, "plain", HEADER + "return 1"))["code"].endswith("return 1")
    with pytest.raises(ProgramInvalid, match="is not valid JSON"):
        load_program(write_text(tmp_path, "other", "return 1"))
    with pytest.raises(ProgramInvalid, match="a program is a JSON object"):
        load_program(write_text(tmp_path, "list.json", "[1]"))
    with pytest.raises(ProgramInvalid, match="No such file or directory"):
        load_program(tmp_path / "missing.ts")
    (tmp_path / "big.js").write_bytes(b"/" * (1 << 20 | 1))
    with pytest.raises(ProgramInvalid, match="is larger than 1048576 bytes"):
        load_program(tmp_path / "big.js")
    (tmp_path / "latin.js").write_bytes(HEADER.encode() + b"return '\xe9'")
    with pytest.raises(ProgramInvalid, match="is not UTF-8"):
        load_program(tmp_path / "latin.js")


# ---------------------------------------------------------------- run and pack on files


def test_run_a_typescript_file_and_errors_name_the_files_line(tmp_path: Path) -> None:
    good = write_text(tmp_path, "double.ts", HEADER + "const n: number = input.n;\nreturn n * 2;\n")
    done = cli("run", good, "--input-json", '{"n": 21}', "--result")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == 42 and done.stderr == ""
    # JavaScript: the type check reports an undeclared ref in a .js file but does not refuse it.
    bad = write_text(tmp_path, "bad.js", HEADER + "const n = input.n;\n\nawait tools.call({ref: 'kv.get'});\nreturn n;\n")
    done = cli("run", bad, "--input-json", '{"n": 1}', "--result")
    assert done.returncode == 1 and done.stdout == ""
    # Line 10 of the file: the comment's seven lines count. The type error is said before the run.
    assert done.stderr == (f"{bad}:10:19: warning TS2322: Type 'string' is not assignable to type 'never'.\n"
                           f"{bad}: 1 error (JavaScript, checked by TypeScript); typecheck.javascript is warn, "
                           "so it runs anyway\n"
                           "fabric-jev: the run ended failed: Error: Capability not granted to Jev program: kv.get "
                           "(line 10, column 13)\n")


def test_run_without_result_prints_the_envelope_and_a_summary_line(tmp_path: Path) -> None:
    path = write_text(tmp_path, "slow.js", HEADER.replace('"timeoutMs": 5000', '"timeoutMs": 300')
                      + "for (;;) await program.sleep(100);")
    done = cli("run", path, "--input-json", '{"n": 1}')
    assert done.returncode == 1
    assert json.loads(done.stdout)["state"] == "timed_out"
    assert done.stderr == "fabric-jev: the run ended timed_out: Jev deadline of 300 ms exceeded\n"


def test_the_programs_text_on_standard_error_cannot_steer_a_terminal(tmp_path: Path) -> None:
    # Standard error may be a terminal when standard input is not (no question is asked then):
    # the progress lines and the failure summary are the program's text, and JSON leaves the
    # one-byte CSI (U+009B) and bidi overrides as they are.
    path = write_text(tmp_path, "steer.js", HEADER + "program.emit('\\u009b8m\\u202e'); "
                      "throw new Error('x\\u009b8m\\u202ey')")
    done = cli("run", path, "--input-json", '{"n": 1}')
    assert done.returncode == 1
    assert "\x9b" not in done.stderr and "\u202e" not in done.stderr
    assert '[1] "\\u009b8m\\u202e"' in done.stderr
    assert "x\\u009b8m\\u202ey" in done.stderr.splitlines()[-1]
    assert "\u202e" in json.loads(done.stdout)["error"]  # the envelope keeps the text as it was


def test_run_input_json_is_checked_and_exclusive_with_input(tmp_path: Path) -> None:
    path = write_text(tmp_path, "d.js", HEADER + "return input.n")
    done = cli("run", path, "--input-json", '{"n": ')
    assert done.returncode == 2 and done.stderr.startswith("fabric-jev: launch rejected: --input-json is not valid JSON")
    done = cli("run", path, "--input-json", '{"n": "x"}')
    assert done.returncode == 2 and "input does not match its declared schema" in done.stderr
    done = cli("run", path, "--input-json", "1", "--input", "x.json")
    assert done.returncode == 2 and "not allowed with argument" in done.stderr


def test_run_quiet_leaves_progress_out(tmp_path: Path) -> None:
    path = write_text(tmp_path, "e.js", HEADER + "await program.emit({step: 1}); return input.n")
    loud = cli("run", path, "--input-json", '{"n": 3}', "--result")
    quiet = cli("run", path, "--input-json", '{"n": 3}', "--result", "--quiet")
    assert loud.stderr == '[1] {"step": 1}\n' and quiet.stderr == ""
    assert loud.stdout == quiet.stdout == "3\n"


def test_pack_prints_the_artifact_run_accepts(tmp_path: Path) -> None:
    source = write_text(tmp_path, "double.ts", HEADER + "return input.n * 2;\n")
    done = cli("pack", source)
    assert done.returncode == 0, done.stderr
    artifact = json.loads(done.stdout)
    assert artifact == parse_program(load_program(source)).to_json()
    packed = write_text(tmp_path, "double.json", done.stdout)
    done = cli("run", packed, "--input-json", '{"n": 4}', "--result")
    assert done.stdout == "8\n"


def test_pack_refuses_an_invalid_program_in_one_line(tmp_path: Path) -> None:
    source = write_text(tmp_path, "bad.js", HEADER.replace('"integer"}', '"integer", "format": "phone"}', 1)
                        + "return 1")
    done = cli("pack", source)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("fabric-jev: inputSchema at $.properties.n.format: format must be one of")
    assert "launch rejected" not in done.stderr and len(done.stderr.splitlines()) == 1


# ---------------------------------------------------------------- new


@pytest.mark.parametrize("ts", [False, True])
def test_new_writes_a_program_that_runs_and_batches(tmp_path: Path, ts: bool) -> None:
    fixture = write_text(tmp_path, "fixture.json", json.dumps(FIXTURE))
    folder = tmp_path / "triage"
    done = cli("new", "triage", "--dir", str(folder), *(["--ts"] if ts else []))
    assert done.returncode == 0, done.stderr
    program = folder / ("triage.ts" if ts else "triage.js")
    assert sorted(p.name for p in folder.iterdir()) == sorted([program.name, "input.json", "inputs.jsonl"])
    assert f"fabric-jev run {program} --input {folder / 'input.json'}" in done.stderr
    done = cli("run", str(program), "--input", str(folder / "input.json"), "--evaluator", f"fixture:{fixture}",
               "--result")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"topic": "billing", "confidence": 0.8, "urgent": False}
    out = tmp_path / "results.jsonl"
    done = cli("batch", str(program), "--inputs", str(folder / "inputs.jsonl"), "--out", str(out),
               "--evaluator", f"fixture:{fixture}")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["state"] for line in out.read_text().splitlines()] == ["completed"] * 3


def test_new_overwrites_nothing_and_checks_the_name(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    assert cli("new", "t", "--dir", str(folder)).returncode == 0
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    done = cli("new", "t", "--dir", str(folder))
    assert done.returncode == 2 and done.stderr.startswith("fabric-jev: not overwriting ")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    done = cli("new", "../escape", "--dir", str(tmp_path / "e"))
    assert done.returncode == 2 and "is not a usable program name" in done.stderr
    assert not (tmp_path / "e").exists()


# ---------------------------------------------------------------- batch on files


def batch_files(tmp: Path, count: int) -> dict[str, Any]:
    program = write_text(tmp, "half.ts", HEADER + "await program.sleep(1);\nreturn input.n;\n")
    inputs = write_text(tmp, "in.jsonl", "".join(json.dumps({"n": n}) + "\n" for n in range(1, count + 1)))
    return {"program": program, "inputs": inputs, "out": str(tmp / "out.jsonl")}


def test_batch_limit_runs_the_first_n_and_resume_counts_what_is_done(tmp_path: Path) -> None:
    f = batch_files(tmp_path, 10)
    done = cli("batch", f["program"], "--inputs", f["inputs"], "--out", f["out"], "--limit", "4")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["line"] for line in Path(f["out"]).read_text().splitlines()] == [1, 2, 3, 4] or \
        sorted(json.loads(line)["line"] for line in Path(f["out"]).read_text().splitlines()) == [1, 2, 3, 4]
    assert "batch: [4/4]" in done.stderr
    done = cli("batch", f["program"], "--inputs", f["inputs"], "--out", f["out"], "--resume")
    assert done.returncode == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("batch: [")]
    # The bar counts the four done earlier: it runs from 5/10 to 10/10, never 6/6 or 6/10 at the end.
    assert progress[0].startswith("batch: [5/10]") and progress[-1].startswith("batch: [10/10]")
    assert "resuming; 4 inputs already in the output are skipped" in done.stderr
    assert sorted(json.loads(line)["line"] for line in Path(f["out"]).read_text().splitlines()) == list(range(1, 11))


def test_batch_dry_run_checks_everything_and_runs_nothing(tmp_path: Path) -> None:
    f = batch_files(tmp_path, 3)
    Path(f["inputs"]).write_text('{"n": 1}\n{"n": "two"}\nnot json\n{"n": 4}\n')
    done = cli("batch", f["program"], "--inputs", f["inputs"], "--dry-run")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "batch: line 2 id 2: input does not match its declared schema: 'two' is not of type 'integer' at $.n",
        "batch: line 3 id 3: input line 3 is not valid JSON: Expecting value (line 1, column 1)",
        "batch: dry run of half: the program is valid; 2 of 4 inputs match its inputSchema; nothing was run"]
    assert not Path(f["out"]).exists()
    done = cli("batch", f["program"], "--inputs", f["inputs"], "--dry-run", "--limit", "1")
    assert done.returncode == 0 and "1 of 1 inputs match" in done.stderr
    broken = write_text(tmp_path, "broken.js", HEADER + "return (1 +;")
    done = cli("batch", broken, "--inputs", f["inputs"], "--dry-run")
    assert done.returncode == 2
    assert done.stderr.startswith("fabric-jev: launch rejected: Jev program does not compile: TypeScript: syntax error "
                                  "at line 8")


def test_batch_dry_run_type_checks_the_program_as_a_launch_would(tmp_path: Path) -> None:
    f = batch_files(tmp_path, 2)
    # TypeScript (mode error by default): a misspelled input field refuses the batch, as each run would be.
    typo = write_text(tmp_path, "typo.ts", HEADER + "const n: number = input.nn;\nreturn n * 2;")
    done = cli("batch", typo, "--inputs", f["inputs"], "--dry-run")
    assert done.returncode == 2, done.stderr
    assert "Jev program has type errors (TypeScript, 1 error): line 8, column 25:" in done.stderr
    assert "Property 'nn' does not exist on type 'JevInput'. (TS2339)" in done.stderr
    # JavaScript (mode warn by default): the same mistake is reported and the inputs are still checked.
    typo_js = write_text(tmp_path, "typo.js", HEADER + "return input.nn * 2;")
    done = cli("batch", typo_js, "--inputs", f["inputs"], "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0].startswith("batch: type check (warn): line 8, column 14:")
    assert "2 of 2 inputs match" in done.stderr.splitlines()[-1]


def test_batch_needs_out_unless_dry_run_and_profile_is_the_local_evaluators(tmp_path: Path) -> None:
    f = batch_files(tmp_path, 1)
    done = cli("batch", f["program"], "--inputs", f["inputs"])
    assert done.returncode == 2 and "batch needs --out FILE" in done.stderr
    fixture = write_text(tmp_path, "fixture.json", json.dumps(FIXTURE))
    done = cli("batch", f["program"], "--inputs", f["inputs"], "--out", f["out"], "--evaluator",
               f"fixture:{fixture}", "--profile", str(tmp_path / "p.json"))
    assert done.returncode == 2 and "a profile adapts the local evaluator or a model route (openai, ollama, anthropic, gguf), not 'fixture'" in done.stderr


def test_check_reads_a_program_file_and_reports_the_files_lines(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    assert cli("new", "t", "--ts", "--dir", str(folder)).returncode == 0
    program = folder / "t.ts"
    done = cli("check", str(program))
    assert done.returncode == 0, done.stdout + done.stderr
    text = program.read_text().replace("const triage: Triage = {", "const oops: number = input.mesage;\nconst triage: Triage = {")
    program.write_text(text)
    line = text.splitlines().index("const oops: number = input.mesage;") + 1
    done = cli("check", str(program))
    assert done.returncode == 1
    assert f"{program}:{line}:28: Property 'mesage' does not exist" in done.stdout
