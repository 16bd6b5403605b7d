"""Names, refs and program files that try to slip past validation (issue 33, "Program files and names").

`^…$` read with `re.match` lets a final newline through; a JSON object that gives a key
twice is read as its last by Python and as its first by others; a file's stem becomes a
program name. Each is refused (or made harmless) where it enters."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric_jev import ProgramInvalid
from fabric_jev.contract.policy import check_override_target
from fabric_jev.contract.program import parse_program
from fabric_jev.errors import CapabilityError
from fabric_jev.host.registry import CapabilityRegistry
from fabric_jev.program_files import load_program
from tests.cli_support import cli

PROGRAM = {"name": "p", "code": "return null;", "inputSchema": {}, "outputSchema": {}}


@pytest.mark.parametrize("ref", ["kv.get\n", "jev.evaluate\n", "kv.get\r", "kv.get\u2028"])
def test_a_ref_with_a_trailing_line_break_is_refused_in_a_program(ref: str) -> None:
    with pytest.raises(ProgramInvalid, match=r"must look like 'connector\.capability'"):
        parse_program({**PROGRAM, "requires": [ref]})


def test_a_ref_with_a_trailing_newline_is_refused_by_the_registry_and_the_policy() -> None:
    async def handler(args: object, ctx: object) -> None:
        return None

    with pytest.raises(CapabilityError, match="invalid capability ref"):
        CapabilityRegistry().register("kv.get\n", handler)
    with pytest.raises(ValueError, match="neither a risk"):
        check_override_target("kv.get\n")
    assert check_override_target("kv.get") == "kv.get"


def test_new_refuses_a_name_with_a_trailing_newline(tmp_path: Path) -> None:
    done = cli("new", "demo\n", "--dir", str(tmp_path / "d"))
    assert done.returncode == 2 and "is not a usable program name" in done.stderr
    assert not (tmp_path / "d").exists()


def test_a_browser_method_with_a_trailing_newline_is_refused() -> None:
    from fabric_jev_browser.connector import BrowserConnector

    from fabric_jev.errors import ConfigError

    with pytest.raises(ConfigError, match="exact method names"):
        BrowserConnector({"wsUrl": "ws://127.0.0.1:9/devtools/browser/x",
                          "allowedMethods": ["Runtime.evaluate\n"]})


def test_no_validation_regex_of_the_package_is_anchored_with_a_dollar_and_read_with_match() -> None:
    """The audit as a test: a module-level pattern ending in `$` (no MULTILINE) that some code
    reads with `.match(` lets a final newline through; such patterns are read with fullmatch."""
    import re

    root = Path(__file__).resolve().parent.parent
    offenders = []
    for path in [*root.joinpath("fabric_jev").rglob("*.py"), *root.joinpath("connectors").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        for name in re.findall(r"^(\w+) = re\.compile\(r[\"'][^\n]*\$[\"']\)", text, re.M):
            if re.search(rf"\b{name}\.match\(", text):
                offenders.append(f"{path.relative_to(root)}: {name}")
    assert offenders == []


@pytest.mark.parametrize(("name", "text"), [
    ("p.json", '{"name": "a", "code": "return null;", "inputSchema": {}, "outputSchema": {}, "name": "b"}'),
    ("p.json", '{"name": "a", "code": "return null;", "inputSchema": {"type": "object", "properties": '
               '{"x": {"type": "string"}, "x": {"type": "integer"}}}, "outputSchema": {}}'),
    ("p.ts", '/* @program {"inputSchema": {}, "outputSchema": {}, "outputSchema": {"type": "string"}} */\n'
             "return null;"),
])
def test_a_key_given_twice_in_an_artifact_or_header_is_refused(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ProgramInvalid, match=r"gives the key \"(name|x|outputSchema)\" twice in one object"):
        load_program(path)


def test_run_refuses_a_program_file_with_a_duplicate_key_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "dup.json"
    path.write_text('{"name": "a", "code": "return 1;", "code": "return 2;", "inputSchema": {}, '
                    '"outputSchema": {}}')
    done = cli("run", str(path), "--input", "null")
    assert done.returncode != 0 and done.stdout == ""
    assert 'gives the key "code" twice in one object' in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("terminator", ["\u2028", "\u2029"])
async def test_a_ts_file_whose_stem_holds_a_line_terminator_checks(tmp_path: Path, terminator: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from fabric_jev.typecheck import cache, checker

    monkeypatch.setenv("FABRIC_JEV_HOME", str(tmp_path / "home"))
    cache.forget_all()
    path = tmp_path / f"ok{terminator}name.ts"
    path.write_text('/* @program {"inputSchema": {}, "outputSchema": {"type": "integer"}} */\n'
                    "const n: number = 1;\nreturn n;\n")
    program = parse_program(load_program(path))
    assert program.name == f"ok{terminator}name"
    verdict = await checker.check(program)
    assert verdict.clean, verdict.diagnostics
