"""No false positives: every shipped example, every program in the docs and seed 001's programs check clean.

Also the generated declarations themselves compile (checked with the library's own checks on), for
schemas using every keyword of the subset and the `pattern`/`format` keywords soon to join it.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from fabric_jev.contract.program import Program, parse_program
from fabric_jev.typecheck import cache, checker
from fabric_jev.typecheck.compiler import Compiler, locate
from fabric_jev.typecheck.declarations import render, schema_type
from fabric_jev.typecheck.tsgo import run_compiler

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRIC_JEV_HOME", str(tmp_path / "home"))
    cache.forget_all()


def _examples() -> dict[str, tuple[dict[str, Any], bool]]:
    found = {str(p.relative_to(ROOT)): (json.loads(p.read_text()), False)
             for p in sorted((ROOT / "examples").glob("*/program.json"))}
    found["examples/observer-session/advisor.json"] = (
        json.loads((ROOT / "examples/observer-session/advisor.json").read_text()), True)
    seed = json.loads((ROOT / "tests/data/seed001_programs.json").read_text())
    found["seed 001 starter"] = (seed["starter"], False)
    found["seed 001 advisor"] = (seed["advisor"], True)
    return found


_CODE = re.compile(r"""["']code["']\s*:\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""")
_REQUIRES = re.compile(r"""["']requires["']\s*:\s*(\[[^\]]*\])""")


def _doc_programs() -> dict[str, dict[str, Any]]:
    """Programs in the docs' code blocks: JSON blocks that are programs, and program dicts in Python
    blocks (whole when the block parses, else their code and requires, with open schemas)."""
    found: dict[str, dict[str, Any]] = {}
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("examples/*/README.md"))]:
        text = doc.read_text()
        for n, (lang, block) in enumerate(re.findall(r"```(\w*)\n(.*?)```", text, re.S)):
            where = f"{doc.relative_to(ROOT)} block {n}"
            if lang == "json":
                try:
                    value = json.loads(block)
                except ValueError:
                    continue
                if isinstance(value, dict) and {"code", "inputSchema", "outputSchema"} <= set(value):
                    found[where] = value
            elif lang == "python":
                try:
                    tree = ast.parse(block)
                except SyntaxError:
                    tree = None
                dicts = [] if tree is None else [node for node in ast.walk(tree) if isinstance(node, ast.Dict)
                                                 and any(isinstance(k, ast.Constant) and k.value == "code"
                                                         for k in node.keys)]
                for i, node in enumerate(dicts):
                    found[f"{where} program {i}"] = {"name": "doc", **ast.literal_eval(node)}
                if tree is None:
                    for i, match in enumerate(_CODE.finditer(block)):
                        requires = _REQUIRES.search(block)
                        found[f"{where} snippet {i}"] = {
                            "name": "doc", "code": ast.literal_eval(match.group(1)), "inputSchema": {},
                            "outputSchema": {}, "requires": json.loads(requires.group(1).replace("'", '"'))
                            if requires else []}
    return found


EXAMPLES = _examples()
DOC_PROGRAMS = _doc_programs()


def test_the_docs_have_programs_to_check() -> None:
    assert any(where.startswith("README.md") for where in DOC_PROGRAMS)
    assert any(where.startswith("docs/programs.md") for where in DOC_PROGRAMS)


@pytest.mark.parametrize("where", EXAMPLES)
async def test_every_example_and_seed_program_checks_clean(where: str) -> None:
    raw, observed = EXAMPLES[where]
    verdict = await checker.check(parse_program(raw), observed=observed)
    assert verdict.clean, [d.text() for d in verdict.diagnostics]


@pytest.mark.parametrize("where", DOC_PROGRAMS)
async def test_every_program_in_the_docs_checks_clean(where: str) -> None:
    program = parse_program({"inputSchema": {}, "outputSchema": {}, **DOC_PROGRAMS[where]})
    verdict = await checker.check(program, observed="jev.advise" in program.requires)
    assert verdict.clean, [d.text() for d in verdict.diagnostics]


RICH = {
    "type": "object", "additionalProperties": False, "required": ["id", "when", "tags", "kind", "size"],
    "properties": {
        "id": {"type": "string", "format": "uuid", "description": "An id */ with a comment end"},
        "when": {"type": "string", "format": "date-time", "title": "When"},
        "email": {"type": "string", "pattern": "^[^@]+@[^@]+$", "maxLength": 200},
        "tags": {"type": "array", "items": {"enum": ["a", "b", 3, None, True]}, "maxItems": 4},
        "kind": {"const": {"k": [1, "two"]}},
        "size": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
        "either": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}]},
        "both": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}},
                           {"type": "object", "properties": {"b": {"type": "boolean"}}}]},
        "map": {"type": "object", "additionalProperties": {"type": "integer"}, "properties": {"n": {"type": "string"}}},
        "open": {"type": "object", "minProperties": 1},
        "closed": {"type": "object", "additionalProperties": False},
        "any": {},
        "weird key-1": {"type": "boolean"},
        "constructor": {"type": "string"},
    },
}


def test_strings_with_pattern_or_format_are_strings() -> None:
    assert schema_type({"type": "string", "format": "email"}, "input") == "string"
    assert schema_type({"type": "string", "pattern": "^a"}, "output") == "string"
    assert schema_type({}, "input") == "unknown"
    assert schema_type({"enum": ["a", "b"]}, "input") == '"a" | "b"'
    assert schema_type({"type": "array", "items": {"enum": [1, 2]}}, "output") == "readonly (1 | 2)[]"


async def test_the_declarations_compile_with_the_library_checks_on(tmp_path: Path) -> None:
    program = Program(name="rich", code="return null", input_schema=RICH, output_schema=RICH,
                      requires=("jev.evaluate", "jev.advise", "kv.lookup", "a.b$c"))
    compiler = locate()
    assert isinstance(compiler, Compiler)
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    try:
        (folder / "jev.d.ts").write_text(render(program, observed=True))
        options = {**checker.OPTIONS[checker.Language.TYPESCRIPT], "skipLibCheck": False}
        (folder / "tsconfig.json").write_text(json.dumps({"compilerOptions": options, "files": ["jev.d.ts"]}))
        run = await run_compiler(compiler, ["-p", "tsconfig.json"], folder, timeout_s=60, memory_bytes=1 << 30)
    finally:
        shutil.rmtree(folder)
    assert run.returncode == 0 and run.output.strip() == "", run.output


async def test_the_declarations_type_what_the_program_reads_and_returns() -> None:
    code = ("const id: string = input.id; const when: string = input.when;\n"
            "const size: number | null = input.size; const tag = input.tags[0];\n"
            "const n: string | undefined = input.map?.n; const k = input.kind.k[1];\n"
            "const w: boolean | undefined = input['weird key-1'];\n"
            "return {id, when, tags: [tag], kind: {k: [1, k]}, size, map: {n: 'x', m: 3}, closed: {}};")
    program = Program(name="rich", code=code, input_schema=RICH, output_schema=RICH, requires=())
    verdict = await checker.check(program)
    assert verdict.clean, [d.text() for d in verdict.diagnostics]
    wrong = Program(name="rich", code=code.replace("closed: {}", "closed: {x: 1}"), input_schema=RICH,
                    output_schema=RICH, requires=())
    [error] = (await checker.check(wrong)).diagnostics
    assert (error.line, error.code) == (5, 2322)  # a key where the schema allows none


@pytest.mark.parametrize("code", [
    # Built at run time: each answer may have any of the three shapes (docs/programs.md).
    "const qs: Record<string, JevQuestion> = {};\n"
    "for (const id of ['a', 'b']) qs[id] = {type: 'noul', instructions: `Is ${id} done?`};\n"
    "const r = await jev.evaluate({state: 'x', questions: qs});\n"
    "const yes: number = r.answers.a.noul; const pick: string = r.answers.b.choice;\n"
    "const level: number = r.answers.a.score; const sure: number = r.answers.b.confidence;\n"
    "const kind: 'choice' | 'score' | 'noul' = r.answers.a.type;\n"
    "return yes + level + sure + pick.length + kind.length;",
    # Questions in a variable first: `satisfies` (or `as const`) keeps their literal types.
    "const questions = {route: {type: 'choice', instructions: 'Which?', criteria: {a: null, b: 'B'}}} "
    "satisfies JevQuestions;\n"
    "const r = await jev.evaluate({state: 'x', questions});\n"
    "const route: 'a' | 'b' = r.answers.route.choice;\nreturn route;",
    "const questions = {ok: {type: 'noul', instructions: 'OK?'}} as const;\n"
    "const r = await jev.evaluate({state: 'x', questions});\nreturn r.answers.ok.noul;",
], ids=["built at run time", "satisfies", "as const"])
async def test_questions_not_written_inline_check_clean(code: str) -> None:
    program = Program(name="q", code=code, input_schema={}, output_schema={}, requires=("jev.evaluate",))
    verdict = await checker.check(program)
    assert verdict.clean, [d.text() for d in verdict.diagnostics]
