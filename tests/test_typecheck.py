"""Programs are type-checked against their own contract before they run (tsgo, real workers)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from fabric_jev import FixtureEvaluator, HostConfig, JevHost, RunState, TypeScriptError
from fabric_jev.contract.languages import Language
from fabric_jev.contract.program import parse_program
from fabric_jev.typecheck import cache, checker
from fabric_jev.typecheck.compiler import Compiler, locate
from tests.conftest import child_pids

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.anyio

INPUT = {"type": "object", "properties": {"ticket": {"type": "string"}, "priority": {"enum": ["low", "high"]}},
         "required": ["ticket"]}
OUTPUT = {"type": "object", "additionalProperties": False, "required": ["route", "p"],
          "properties": {"route": {"enum": ["billing", "technical"]}, "p": {"type": "number"}}}
REQUIRES = ["jev.evaluate", "kv.lookup"]
DONE = "return {route: 'billing', p: 0};"
ASK = ("const r = await jev.evaluate({state: input.ticket, questions: {\n"
       "  route: {type: 'choice', instructions: 'Which team?', criteria: {billing: 'Charges', technical: null}}}});\n")

# Every kind of mistake of issue 20's "Why", as JavaScript: (code, line, column, TS code, words of the message).
# The TypeScript twin of each adds an annotation on a line of its own at the top.
MISTAKES: dict[str, tuple[str, int, int, int, str]] = {
    "a misspelled input field": (
        f"const t = input.tickt;\n{DONE}", 1, 17, 2551, "Did you mean 'ticket'?"),
    "a question type that does not exist": (
        "const r = await jev.evaluate({state: input.ticket, questions: {\n"
        f"  ok: {{type: 'nul', instructions: 'Is it ok?'}}}}}});\n{DONE}", 2, 8, 2820, "Did you mean '\"noul\"'?"),
    "a choice compared with an option outside its criteria": (
        f"{ASK}if (r.answers.route.choice === 'sales') return {{route: 'billing', p: 1}};\n{DONE}", 3, 5, 2367,
        "have no overlap"),
    "a tool ref that is not in requires": (
        f"const found = await tools.call({{ref: 'kv.lookpu', args: {{key: 'a'}}}});\n{DONE}", 1, 33, 2820,
        "Did you mean '\"kv.lookup\"'?"),
    "a result whose shape breaks the output schema": (
        "const route = 'sales';\nreturn {route, p: 0};", 2, 9, 2322, "is not assignable to type '\"billing\" | \"technical\"'"),
    "a fetch the sandbox does not have": (
        f"const page = await fetch('https://example.com');\n{DONE}", 1, 20, 2304,
        "Cannot find name 'fetch'"),
    "a program.sleep of text": (
        f"await program.sleep('10');\n{DONE}", 1, 21, 2345, "not assignable to parameter of type 'number'"),
    "a program that can end without a result": (
        "const x = 1;", 1, 13, 2355, "must return null"),
}


def make(code: str, **extra: Any) -> dict[str, Any]:
    return {"name": "checked", "code": code, "inputSchema": INPUT, "outputSchema": OUTPUT,
            "requires": REQUIRES, **extra}


def as_typescript(code: str) -> str:
    return "type Route = 'billing' | 'technical';\n" + code


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without remembered verdicts and keeps its disk entries to itself."""
    monkeypatch.setenv("FABRIC_JEV_HOME", str(tmp_path / "home"))
    cache.forget_all()


@pytest.fixture
async def checked_host(fixture_evaluator: FixtureEvaluator) -> Any:
    from fabric_jev.host.registry import CapabilityRegistry

    registry = CapabilityRegistry()

    async def lookup(args: Any, ctx: Any) -> Any:
        return {"found": True}

    registry.register("kv.lookup", lookup, "read")
    async with JevHost(HostConfig(max_concurrent_runs=8), evaluator=fixture_evaluator,
                       capabilities=registry) as host:
        yield host


@pytest.mark.parametrize("kind", MISTAKES)
async def test_each_mistake_in_typescript_is_refused_with_its_line(checked_host: JevHost, kind: str) -> None:
    code, line, column, ts_code, words = MISTAKES[kind]
    with pytest.raises(TypeScriptError) as refused:
        await checked_host.run(make(as_typescript(code)), {"ticket": "refund please"})
    message = str(refused.value)
    assert message.startswith("Jev program has type errors (TypeScript, 1 error): ")
    assert f"line {line + 1}, column {column}: " in message and f"(TS{ts_code})" in message, message
    assert words in message
    [diagnostic] = refused.value.diagnostics
    assert (diagnostic.line, diagnostic.column, diagnostic.code) == (line + 1, column, ts_code)
    assert checked_host.status().runs == ()  # refused at launch: no run was created


@pytest.mark.parametrize("kind", MISTAKES)
async def test_each_mistake_in_javascript_runs_and_is_reported(checked_host: JevHost, kind: str) -> None:
    code, line, column, ts_code, words = MISTAKES[kind]
    envelope = await checked_host.run(make(code), {"ticket": "refund please"})
    assert envelope.state is not RunState.RUNNING
    assert envelope.typecheck is not None
    report = envelope.typecheck.to_json()
    assert report["language"] == "javascript" and report["mode"] == "warn" and report["outcome"] == "errors"
    assert report["errors"] == 1
    [text] = report["diagnostics"]
    assert text.startswith(f"line {line}, column {column}: ") and text.endswith(f"(TS{ts_code})"), text
    assert words in text


async def test_a_clean_typescript_program_runs_as_before(checked_host: JevHost) -> None:
    code = ("interface Row { team: Route; score: number }\n"
            "type Route = 'billing' | 'technical';\n"
            "const rows = new Map<string, Row>();\n"
            "class Tally { #n = 0; add(): number { return ++this.#n; } }\n"
            "const tally = new Tally();\n"
            "const timer = setTimeout(() => tally.add(), 1); clearTimeout(timer);\n"
            "const r = await jev.evaluate({state: {text: input.ticket}, questions: {\n"
            "  route: {type: 'choice', instructions: 'Which team?', criteria: {billing: 'Charges', technical: null}},\n"
            "  refund: {type: 'noul', instructions: 'A refund?'},\n"
            "  urgency: {type: 'score', instructions: 'How urgent?', criteria: ['not', 'very']}}});\n"
            "const a = r.answers;\n"
            "rows.set(input.ticket, {team: a.route.choice, score: a.urgency.score + a.refund.noul});\n"
            "function first<T>(xs: T[]): T | undefined { return xs[0]; }\n"
            "const only = first([...rows.values()])!;\n"
            "await program.emit({seen: rows.size, tally: tally.add()});\n"
            "return {route: only.team, p: a.route.probabilities.billing};")
    evaluator = FixtureEvaluator({"answers": {
        "route": {"choice": "billing", "probabilities": {"billing": 0.9, "technical": 0.1}, "confidence": 0.9},
        "refund": {"noul": 0.8},
        "urgency": {"score": 1, "probabilities": {"0": 0.2, "1": 0.8}, "confidence": 0.7}},
        "usage": {"input_tokens": 3, "output_tokens": 1}})
    async with JevHost(evaluator=evaluator) as host:
        envelope = await host.run(make(code, requires=["jev.evaluate"]), {"ticket": "refund please"})
    assert envelope.state is RunState.COMPLETED, envelope.error
    assert envelope.result == {"route": "billing", "p": 0.9}
    report = envelope.to_json()["typecheck"]
    assert report["language"] == "typescript" and report["mode"] == "error" and report["outcome"] == "clean"
    assert report["errors"] == 0 and "diagnostics" not in report
    assert report["compiler"].startswith("tsgo ")


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[Language]:
    """The language of every compiler run from here on (the compiler still runs)."""
    seen: list[Language] = []
    real = checker._compile

    async def counted(program: Any, declarations: str, reading: checker.Reading, *rest: Any) -> Any:
        seen.append(reading.language)
        return await real(program, declarations, reading, *rest)

    monkeypatch.setattr(checker, "_compile", counted)
    return seen


async def test_a_relaunch_in_the_same_host_uses_the_verdict(checked_host: JevHost, compiles: list[Language]) -> None:
    prog = make(as_typescript(DONE))
    first = await checked_host.run(prog, {"ticket": "a"})
    again = await checked_host.run(prog, {"ticket": "b"})
    assert first.typecheck is not None and again.typecheck is not None
    assert (first.typecheck.cached, again.typecheck.cached) == (False, True)
    assert again.typecheck.outcome == "clean" and compiles == [Language.TYPESCRIPT]
    # Anything the declarations are made from is part of the digest: another output schema is a new check.
    changed = make(as_typescript(DONE), outputSchema={**OUTPUT, "properties": {**OUTPUT["properties"], "q": {}}})
    third = await checked_host.run(changed, {"ticket": "c"})
    assert third.typecheck is not None and third.typecheck.cached is False and len(compiles) == 2


async def test_concurrent_launches_of_one_new_program_compile_it_once(
        checked_host: JevHost, compiles: list[Language]) -> None:
    envelopes: list[Any] = []

    async def launch(n: int) -> None:
        envelopes.append(await checked_host.run(make(DONE), {"ticket": str(n)}))

    async with anyio.create_task_group() as tg:
        for n in range(4):
            tg.start_soon(launch, n)
    assert compiles == [Language.JAVASCRIPT]
    assert sorted(e.typecheck.cached for e in envelopes) == [False, True, True, True]


def test_the_digest_covers_the_compiler_version_code_and_contract() -> None:
    program = parse_program(make(DONE))
    found = locate()
    assert isinstance(found, Compiler)
    other = Compiler(found.path, found.version + ".next", found.source)
    declarations = checker.render(program, observed=False)
    base = checker.digest(program, declarations, found)
    assert checker.digest(program, declarations, found) == base
    assert checker.digest(program, declarations, other) != base
    assert checker.digest(parse_program(make(DONE + " ")), declarations, found) != base
    assert checker.digest(program, checker.render(program, observed=True), found) != base


async def test_verdicts_survive_the_process_on_disk(tmp_path: Path) -> None:
    config = HostConfig(typecheck={"cacheDir": str(tmp_path / "verdicts")})
    program = parse_program(make(as_typescript("const t = input.tickt;\n" + DONE)))
    first = await checker.check(program, config=config.typecheck)
    [entry] = (tmp_path / "verdicts").glob("*" + cache.SUFFIX)
    cache.forget_all()  # as a new process would start
    with pytest.raises(TypeScriptError) as refused:
        await checker.check_for_launch(program, config, observed=False)
    assert refused.value.diagnostics == first.diagnostics
    # The erased code kept with the verdict is what runs: an entry whose erased code is not a
    # blanking of this program's code is not believed.
    stored = json.loads(entry.read_text())
    assert stored["verdict"]["erased"] == first.erased and first.erased is not None
    forged = first.erased.replace("input.tickt", "input.other")
    entry.write_text(json.dumps({**stored, "verdict": {**stored["verdict"], "erased": forged}}))
    cache.forget_all()
    assert await checker.check(program, config=config.typecheck) == first
    assert json.loads(entry.read_text())["verdict"]["erased"] == first.erased  # compiled and written again
    # A damaged entry is a miss: compiled again and written whole.
    entry.write_text('{"digest": "x", "verdict": {"language": "typ')
    cache.forget_all()
    again = await checker.check(program, config=config.typecheck)
    assert again == first and json.loads(entry.read_text())["verdict"]["language"] == "typescript"


async def test_modes_per_language(fixture_evaluator: FixtureEvaluator) -> None:
    bad = "const t = input.tickt;\n" + DONE
    strict = HostConfig(typecheck={"javascript": "error"})
    lenient = HostConfig(typecheck={"typescript": "warn"})
    off = HostConfig(typecheck={"typescript": "off", "javascript": "off"})
    async with JevHost(strict, evaluator=fixture_evaluator) as host:
        with pytest.raises(TypeScriptError, match=r"\(JavaScript, checked by TypeScript, 1 error\): line 1, "
                                                  r"column 17: .*\(TS2551\)"):
            await host.run(make(bad, requires=[]), {"ticket": "a"})
    async with JevHost(lenient, evaluator=fixture_evaluator) as host:
        warned = await host.run(make(as_typescript(bad), requires=[]), {"ticket": "a"})
        assert warned.state is RunState.COMPLETED and warned.typecheck is not None
        assert warned.typecheck.outcome == "errors" and warned.typecheck.mode == "warn"
    async with JevHost(off, evaluator=fixture_evaluator) as host:
        unchecked = await host.run(make(as_typescript(bad), requires=[]), {"ticket": "a"})
        assert unchecked.state is RunState.COMPLETED
        assert unchecked.typecheck is not None and unchecked.typecheck.to_json() == {"language": None, "mode": "off", "outcome": "off"}


async def test_without_a_compiler_programs_run_unchecked_and_say_so(
        fixture_evaluator: FixtureEvaluator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FABRIC_JEV_TSGO", str(tmp_path / "no-tsgo"))
    bad = as_typescript("const t: number = input.tickt;\n" + DONE)
    async with JevHost(evaluator=fixture_evaluator) as host:
        envelope = await host.run(make(bad, requires=[]), {"ticket": "a"})
        status = host.status().typecheck
    assert envelope.state is RunState.COMPLETED  # erased and run, as before the checker existed
    assert envelope.typecheck is not None and envelope.typecheck.outcome == "unavailable"
    assert "no-tsgo is not an executable file" in envelope.typecheck.reason
    assert status is not None and status.available is False and "FABRIC_JEV_TSGO" in str(status.reason)
    required = HostConfig(typecheck={"requireChecker": True})
    async with JevHost(required, evaluator=fixture_evaluator) as host:
        with pytest.raises(TypeScriptError, match=r"cannot be type-checked: FABRIC_JEV_TSGO=.*\(typecheck\.requireChecker is set\)"):
            await host.run(make(bad, requires=[]), {"ticket": "a"})


async def test_host_status_names_the_compiler(checked_host: JevHost) -> None:
    status = checked_host.status().typecheck
    found = locate()
    assert isinstance(found, Compiler)
    assert status is not None
    assert status.to_json() == {"typescript": "error", "javascript": "warn", "available": True, "compiler": found.name}


# A program whose check needs far more memory and time than the smallest caps (every four-digit
# text, crossed with itself in a mapped type); as JavaScript it has no type syntax and checks in a blink.
HUNGRY = ("type D = '0' | '1' | '2' | '3' | '4' | '5' | '6' | '7' | '8' | '9';\n"
          "type N = `${D}${D}${D}${D}`;\n"
          "type Pairs = { [A in N]: { [B in N]: [A, B] } };\n"
          "type All = Pairs[N][N];\n"
          "const all: All[] = [];\n"
          "return {route: 'billing', p: all.length};")


@pytest.mark.parametrize(("caps", "stopped"), [
    ({"memoryLimitBytes": 64 << 20, "timeoutMs": 120_000}, "the type checker ran out of memory (its cap is 64 MiB)"),
    ({"memoryLimitBytes": 4096 << 20, "timeoutMs": 500}, "the type checker took longer than 0.5 s and was stopped"),
], ids=["memory", "time"])
async def test_a_program_that_exhausts_the_checker_is_refused_clearly(
        fixture_evaluator: FixtureEvaluator, caps: dict[str, int], stopped: str) -> None:
    before = child_pids()
    async with JevHost(HostConfig(typecheck={**caps, "diskCache": False}), evaluator=fixture_evaluator) as host:
        with pytest.raises(TypeScriptError) as refused:
            await host.run(make(HUNGRY, requires=[]), {"ticket": "a"})
        assert str(refused.value) == f"Jev program could not be type-checked: {stopped}"
        assert host.status().runs == ()
    assert child_pids() - before == set(), "the compiler (or a worker) was left running"
    # Under warn, the program runs (erased) and its envelope says why it was not checked. (Forgotten
    # first: the stop is remembered, and a relaunch says so; test_typecheck_hostile.py.)
    cache.forget_all()
    warned = HostConfig(typecheck={**caps, "typescript": "warn", "diskCache": False})
    async with JevHost(warned, evaluator=fixture_evaluator) as host:
        envelope = await host.run(make(HUNGRY, requires=[]), {"ticket": "a"})
    assert envelope.state is RunState.COMPLETED and envelope.result == {"route": "billing", "p": 0}
    assert envelope.typecheck is not None
    assert envelope.typecheck.to_json() == {"language": "typescript", "mode": "warn", "outcome": "stopped",
                                            "compiler": envelope.typecheck.compiler, "cached": False,
                                            "reason": stopped}


@pytest.mark.parametrize(("code", "requires", "observed", "expected"), [
    ("const r = await jev.evaluate({state: 'x', questions: {}});\nreturn null;", [], False,
     "line 1, column 21: Property 'evaluate' does not exist on type 'Jev'. "
     "(jev.evaluate needs \"jev.evaluate\" in requires) (TS2339)"),
    ("await program.advise({eventId: 'e', message: 'm'});\nreturn null;", ["jev.evaluate"], True,
     "line 1, column 15: Property 'advise' does not exist on type 'JevProgram'. "
     "(program.advise needs \"jev.advise\" in requires (and a spawn with observe)) (TS2339)"),
    ("const e = await program.nextEvent();\nreturn null;", [], False,
     "line 1, column 25: Property 'nextEvent' does not exist on type 'JevProgram'. "
     "(program.nextEvent exists only in a run spawned with observe) (TS2339)"),
    ("const x = process.env.KEY ?? require('fs');\nreturn null;", [], False,
     "line 1, column 11: Cannot find name 'process'. (the sandbox has no fetch, process, require, DOM or Node: "
     "reach the outside through a capability with tools.call) (TS2591)"),
    # Not the compiler's advice to add the DOM to `lib`: the sandbox has none.
    ("const title = document.title;\nreturn null;", [], False,
     "line 1, column 15: Cannot find name 'document'. (the sandbox has no fetch, process, require, DOM or Node: "
     "reach the outside through a capability with tools.call) (TS2584)"),
], ids=["evaluate without requires", "advise without jev.advise", "nextEvent without observe", "process",
        "document"])
async def test_what_the_program_may_not_use_is_named(code: str, requires: list[str], observed: bool,
                                                     expected: str) -> None:
    program = parse_program({"name": "p", "code": code, "inputSchema": {}, "outputSchema": {},
                             "requires": requires})
    verdict = await checker.check(program, observed=observed)
    assert verdict.diagnostics[0].text() == expected


# ---------------------------------------------------------------- what the compiler may see of the host


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder the compiler's project folders are made in (as TMPDIR would say)."""
    import tempfile

    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


async def test_a_package_json_above_the_project_folder_is_never_read(scratch: Path) -> None:
    # Anyone who can write the folder above (/tmp/package.json is world-writable ground) could
    # otherwise make every check read an endless file and fail, or change how the program is read.
    (scratch / "package.json").symlink_to("/dev/zero")
    program = parse_program(make(as_typescript(DONE)))
    config = HostConfig(typecheck={"memoryLimitBytes": 64 << 20, "diskCache": False}).typecheck
    verdict = await checker.check(program, config=config)
    assert verdict.clean and verdict.language is Language.TYPESCRIPT


@pytest.mark.parametrize("language", [Language.TYPESCRIPT, Language.JAVASCRIPT])
async def test_an_import_names_no_file_of_the_host_and_finds_none(scratch: Path, language: Language) -> None:
    # A package in a node_modules above the project folder, a file beside the program, a path
    # that exists and one that does not: each is "Cannot find module", so a diagnostic tells
    # nothing about the host's files (not even whether one exists) and names none of its paths.
    package = scratch / "node_modules" / "foo"
    package.mkdir(parents=True)
    (package / "package.json").write_text('{"name": "foo", "main": "index.js"}')
    (package / "index.js").write_text("module.exports = 1;\n")
    specs = ["foo", "./jev.d.ts", "./program", str(package), str(package / "index.js"), "not-there"]
    if language is Language.TYPESCRIPT:
        lines = [f"type T{n} = typeof import({json.dumps(s)});" for n, s in enumerate(specs)]
    else:
        lines = [f"const m{n} = await import({json.dumps(s)});" for n, s in enumerate(specs)]
    program = parse_program(make("\n".join(lines) + "\n" + DONE, requires=[]))
    verdict = await checker.check(program, config=HostConfig(typecheck={"diskCache": False}).typecheck)
    assert verdict.language is language
    assert [(d.line, d.code) for d in verdict.diagnostics] == [(n + 1, 2307) for n in range(len(specs))]
    for spec, diagnostic in zip(specs, verdict.diagnostics, strict=True):
        assert diagnostic.message.startswith(f"Cannot find module '{spec}' or its corresponding type "
                                             "declarations. "), diagnostic.message
        assert str(scratch) not in diagnostic.message.replace(spec, "")


async def test_a_check_cancelled_while_its_files_are_written_leaves_no_folder(
        scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = checker._write_project
    written: list[Path] = []

    def write_then_cancel(*args: Any) -> Any:
        found = real(*args)
        written.append(found[1])
        anyio.from_thread.run_sync(scope.cancel)  # the caller goes away while this thread works
        return found

    monkeypatch.setattr(checker, "_write_project", write_then_cancel)
    program = parse_program(make(as_typescript(DONE)))
    with anyio.CancelScope() as scope:
        await checker.check(program, config=HostConfig(typecheck={"diskCache": False}).typecheck)
    assert scope.cancelled_caught and len(written) == 1
    assert list(scratch.iterdir()) == [], "the program's code was left in the temporary folder"


async def test_a_check_cancelled_while_the_compiler_runs_kills_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from fabric_jev.typecheck import tsgo

    real = tsgo._cap
    started: list[int] = []

    def cap_then_cancel(pid: int, *args: Any) -> None:
        real(pid, *args)
        started.append(pid)
        scope.cancel()  # the compiler is running: the caller goes away

    monkeypatch.setattr(tsgo, "_cap", cap_then_cancel)
    before = child_pids()
    program = parse_program(make(HUNGRY, requires=[]))
    with anyio.CancelScope() as scope:
        await checker.check(program, config=HostConfig(typecheck={"diskCache": False}).typecheck)
    assert scope.cancelled_caught and len(started) == 1
    assert child_pids() - before == set()
    with pytest.raises(ProcessLookupError):
        os.killpg(started[0], 0)  # its whole group is gone (and reaped)


async def test_a_disk_verdict_whose_erased_code_blanks_a_line_break_is_not_believed(tmp_path: Path) -> None:
    # Erasure keeps every line break. Blanking one would change what the program does (`return`
    # then a value on the next line returns the value), so such an entry was not written by us.
    config = HostConfig(typecheck={"cacheDir": str(tmp_path / "verdicts")})
    program = parse_program(make(as_typescript("if (input.ticket) return null as any\n" + DONE)))
    first = await checker.check(program, config=config.typecheck)
    assert first.erased is not None and "\n" in first.erased
    [entry] = (tmp_path / "verdicts").glob("*" + cache.SUFFIX)
    stored = json.loads(entry.read_text())
    forged = first.erased.replace("\n", " ", 2)
    assert len(forged) == len(program.code)
    entry.write_text(json.dumps({**stored, "verdict": {**stored["verdict"], "erased": forged}}))
    cache.forget_all()
    assert await checker.check(program, config=config.typecheck) == first
    assert json.loads(entry.read_text())["verdict"]["erased"] == first.erased  # compiled and written again
