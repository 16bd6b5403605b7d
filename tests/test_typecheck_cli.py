"""`fabric-jev check`, `fabric-jev types` and `fabric-jev run` as real processes, and the MCP tool jev_check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli_support import cli

BAD_TS = {"name": "triage", "inputSchema": {"type": "object", "properties": {"ticket": {"type": "string"}},
                                            "required": ["ticket"]},
          "outputSchema": {"type": "string"}, "requires": [],
          "code": "type Ticket = { ticket: string };\nconst t: string = input.tickt;\nreturn t;"}
GOOD_TS = {**BAD_TS, "code": "type Ticket = { ticket: string };\nconst t: string = input.ticket;\nreturn t;"}
BAD_JS = {**BAD_TS, "code": "const t = input.tickt;\nreturn t ?? 'none';"}


def write(folder: Path, name: str, value: Any) -> str:
    path = folder / name
    path.write_text(json.dumps(value))
    return str(path)


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    return {"FABRIC_JEV_HOME": str(tmp_path / "home")}


def test_check_exit_codes_and_lines(tmp_path: Path, home: dict[str, str]) -> None:
    bad, good, js = (write(tmp_path, f"{n}.json", p) for n, p in (("bad", BAD_TS), ("good", GOOD_TS), ("js", BAD_JS)))
    done = cli("check", bad, env=home)
    assert done.returncode == 1
    assert done.stdout == (f"{bad}:2:25: Property 'tickt' does not exist on type 'JevInput'. "
                           "Did you mean 'ticket'? (TS2551)\n")
    assert done.stderr.startswith(f"fabric-jev: {bad}: 1 error (TypeScript, tsgo ")
    clean = cli("check", good, env=home)
    assert clean.returncode == 0 and clean.stdout == ""
    assert clean.stderr.startswith(f"fabric-jev: {good}: clean (TypeScript, tsgo ")
    # JavaScript is checked the same way (checkJs); `check` reports whatever the language.
    report = cli("check", js, "--json", env=home)
    assert report.returncode == 1
    data = json.loads(report.stdout)
    assert data["file"] == js and data["language"] == "javascript" and data["clean"] is False
    assert data["diagnostics"] == [{"line": 1, "column": 17, "code": "TS2551",
                                    "message": "Property 'tickt' does not exist on type 'JevInput'. "
                                               "Did you mean 'ticket'?"}]


def test_check_bad_input_is_exit_2(tmp_path: Path, home: dict[str, str]) -> None:
    missing = cli("check", str(tmp_path / "none.json"), env=home)
    assert missing.returncode == 2 and "cannot read program" in missing.stderr
    invalid = cli("check", write(tmp_path, "bad.json", {**GOOD_TS, "extra": 1}), env=home)
    assert invalid.returncode == 2 and "Invalid Jev program" in invalid.stderr
    schema = cli("check", write(tmp_path, "schema.json", {**GOOD_TS, "inputSchema": {"$ref": "#"}}), env=home)
    assert schema.returncode == 2 and "keyword '$ref' is not supported" in schema.stderr
    no_compiler = cli("check", write(tmp_path, "good.json", GOOD_TS),
                      env={**home, "FABRIC_JEV_TSGO": str(tmp_path / "no-tsgo")})
    assert no_compiler.returncode == 2
    assert no_compiler.stderr == (f"fabric-jev: the type checker is not available: FABRIC_JEV_TSGO="
                                  f"{tmp_path / 'no-tsgo'} is not an executable file\n")


def test_check_stopped_by_a_cap_is_exit_1_with_the_documented_json(tmp_path: Path, home: dict[str, str]) -> None:
    from tests.test_typecheck import HUNGRY

    hungry = write(tmp_path, "hungry.json", {**BAD_TS, "outputSchema": {}, "code": HUNGRY})
    config = write(tmp_path, "config.json", {"typecheck": {"memoryLimitBytes": 64 << 20, "diskCache": False}})
    stopped = "the type checker ran out of memory (its cap is 64 MiB)"
    done = cli("check", hungry, "--config", config, env=home)
    assert done.returncode == 1 and done.stdout == f"{hungry}: {stopped}\n"
    report = cli("check", hungry, "--config", config, "--json", env=home)
    assert report.returncode == 1
    data = json.loads(report.stdout)
    # The keys docs/programs.md lists for --json, plus why the check stopped.
    assert set(data) == {"file", "name", "clean", "language", "compiler", "errors", "cut", "diagnostics", "stopped"}
    assert (data["clean"], data["language"], data["errors"], data["cut"], data["diagnostics"], data["stopped"]) == (
        False, "typescript", 0, False, [], stopped)
    assert data["compiler"].startswith("tsgo ")


def test_types_prints_the_declarations(tmp_path: Path) -> None:
    done = cli("types", write(tmp_path, "p.json", {**GOOD_TS, "requires": ["jev.evaluate", "kv.get"]}))
    assert done.returncode == 0
    assert "type JevInput = {\n  ticket: string;\n};" in done.stdout
    assert "type JevOutput = string;" in done.stdout
    assert 'interface JevTools extends JevToolsOf<"jev.evaluate" | "kv.get"> {}' in done.stdout
    assert "interface Jev extends JevEvaluating {}" in done.stdout
    # The guest API (runtime_js/jev.d.ts) comes first; the program's own parts pick from it.
    assert done.stdout.index("interface JevObserving {") < done.stdout.index("\ntype JevInput = ")
    assert "interface JevProgram extends JevProgramCore {}" in done.stdout
    assert "interface JevProgram extends JevProgramCore, JevObserving {}" in cli(
        "types", write(tmp_path, "p.json", GOOD_TS), "--observe").stdout


def test_run_refuses_typescript_with_type_errors(tmp_path: Path, home: dict[str, str]) -> None:
    done = cli("run", write(tmp_path, "bad.json", BAD_TS), "--input", write(tmp_path, "in.json", {"ticket": "a"}),
               env=home)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("fabric-jev: launch rejected: Jev program has type errors (TypeScript, 1 error): "
                           "line 2, column 25: Property 'tickt' does not exist on type 'JevInput'. "
                           "Did you mean 'ticket'? (TS2551)\n")


def test_run_of_a_clean_program_says_what_was_checked(tmp_path: Path, home: dict[str, str]) -> None:
    program, given = write(tmp_path, "good.json", GOOD_TS), write(tmp_path, "in.json", {"ticket": "a"})
    first = cli("run", program, "--input", given, env=home)
    assert first.returncode == 0, first.stderr
    envelope = json.loads(first.stdout)
    assert envelope["state"] == "completed" and envelope["result"] == "a"
    checked = envelope["typecheck"]
    # `run` checks the program itself before the launch, to say warn-mode errors before the run
    # starts: the launch then finds that verdict cached.
    assert checked["language"] == "typescript" and checked["outcome"] == "clean" and checked["cached"] is True
    assert first.stderr == ""
    # The verdict was kept on disk: the next process runs the program without compiling it again.
    again = json.loads(cli("run", program, "--input", given, env=home).stdout)
    assert again["typecheck"] == checked
    # JavaScript with a type error runs (mode warn) and its envelope carries the error.
    js = json.loads(cli("run", write(tmp_path, "js.json", BAD_JS), "--input", given, env=home).stdout)
    assert js["state"] == "completed" and js["result"] == "none"
    assert js["typecheck"]["outcome"] == "errors" and js["typecheck"]["diagnostics"] == [
        "line 1, column 17: Property 'tickt' does not exist on type 'JevInput'. Did you mean 'ticket'? (TS2551)"]


def test_run_with_a_config_that_turns_checking_off(tmp_path: Path, home: dict[str, str]) -> None:
    config = write(tmp_path, "config.json", {"typecheck": {"typescript": "off", "javascript": "off"}})
    unchecked = {**BAD_TS, "outputSchema": {}, "code": "const t: string = input.tickt;\nreturn t ?? null;"}
    done = cli("run", write(tmp_path, "bad.json", unchecked), "--input",
               write(tmp_path, "in.json", {"ticket": "a"}), "--config", config, env=home)
    envelope = json.loads(done.stdout)
    assert done.returncode == 0 and envelope["state"] == "completed" and envelope["result"] is None
    assert envelope["typecheck"] == {"language": None, "mode": "off", "outcome": "off"}


def test_status_says_whether_there_is_a_compiler(tmp_path: Path, home: dict[str, str]) -> None:
    present = json.loads(cli("status", "--json", env=home).stdout)["typecheck"]
    assert present["available"] is True and present["compiler"].startswith("tsgo ")
    assert (present["typescript"], present["javascript"]) == ("error", "warn")
    missing = json.loads(cli("status", "--json", env={**home, "FABRIC_JEV_TSGO": str(tmp_path / "none")}).stdout)["typecheck"]
    assert missing["available"] is False and missing["reason"].endswith("is not an executable file")
