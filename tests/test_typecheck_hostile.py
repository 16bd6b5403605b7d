"""The type checker under attack (issue 33, "Type checker"): stopped checks remembered, fair
compiler slots, a disk cache that is not believed blindly, names and specifiers that try to
forge the compiler's output, schemas deeper than the checker can walk. Real tsgo, real workers."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from fabric_jev import FixtureEvaluator, HostConfig, JevHost, RunState, SchemaInvalid, TypeScriptError
from fabric_jev.contract.program import Program, parse_program
from fabric_jev.typecheck import cache, checker
from fabric_jev.typecheck.compiler import Compiler, locate
from fabric_jev.typecheck.slots import FairSlots
from tests.test_typecheck import DONE, HUNGRY, as_typescript, make

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRIC_JEV_HOME", str(tmp_path / "home"))
    cache.forget_all()


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every program compiled from here on (the compiler still runs)."""
    seen: list[str] = []
    real = checker._compile

    async def counted(program: Program, *rest: Any) -> Any:
        seen.append(program.name)
        return await real(program, *rest)

    monkeypatch.setattr(checker, "_compile", counted)
    return seen


def key_of(program: Program) -> str:
    compiler = locate()
    assert isinstance(compiler, Compiler)
    return checker.digest(program, checker.render(program, observed=False), compiler)


# ---------------------------------------------------------------- a stopped check is remembered

TIME_CAP = {"memoryLimitBytes": 4096 << 20, "timeoutMs": 500}
STOPPED = "the type checker took longer than 0.5 s and was stopped"


async def test_a_stopped_check_is_refused_at_once_on_relaunch(
        fixture_evaluator: FixtureEvaluator, compiled: list[str], tmp_path: Path) -> None:
    config = HostConfig(typecheck={**TIME_CAP, "cacheDir": str(tmp_path / "verdicts")})
    bomb = make(HUNGRY, requires=[])
    async with JevHost(config, evaluator=fixture_evaluator) as host:
        with pytest.raises(TypeScriptError) as first:
            await host.run(bomb, {"ticket": "a"})
        assert str(first.value) == f"Jev program could not be type-checked: {STOPPED}"
        # A batch of four inputs: the remembered stop answers all of them, no compiler runs.
        refusals: list[str] = []

        async def launch(n: int) -> None:
            with pytest.raises(TypeScriptError) as again:
                await host.run(bomb, {"ticket": str(n)})
            refusals.append(str(again.value))

        async with anyio.create_task_group() as tg:
            for n in range(4):
                tg.start_soon(launch, n)
    assert compiled == ["checked"]
    assert len(refusals) == 4 and all(STOPPED in r and "remembered from an earlier check" in r for r in refusals)
    # A new process finds the stop on disk.
    cache.forget_all()
    async with JevHost(config, evaluator=fixture_evaluator) as host:
        with pytest.raises(TypeScriptError, match="remembered from an earlier check"):
            await host.run(bomb, {"ticket": "b"})
    assert compiled == ["checked"]


async def test_a_stopped_check_under_warn_runs_at_once_and_says_so(
        fixture_evaluator: FixtureEvaluator, compiled: list[str]) -> None:
    config = HostConfig(typecheck={**TIME_CAP, "typescript": "warn", "diskCache": False})
    async with JevHost(config, evaluator=fixture_evaluator) as host:
        first = await host.run(make(HUNGRY, requires=[]), {"ticket": "a"})
        again = await host.run(make(HUNGRY, requires=[]), {"ticket": "b"})
    assert compiled == ["checked"]
    assert first.state is again.state is RunState.COMPLETED
    assert again.typecheck is not None and again.typecheck.outcome == "stopped"
    assert again.typecheck.reason.startswith(STOPPED + "; remembered from an earlier check")
    report = await checker.check_for_launch(parse_program(make(HUNGRY, requires=[])), config, observed=False)
    [line] = report.warnings("bomb.ts")
    assert line.startswith(f"bomb.ts: the type check stopped ({STOPPED}; remembered") and "runs unchecked" in line


async def test_a_larger_cap_checks_a_remembered_stop_again(compiled: list[str]) -> None:
    program = parse_program(make(HUNGRY, requires=[]))
    small = HostConfig(typecheck={**TIME_CAP, "diskCache": False})
    with pytest.raises(TypeScriptError):
        await checker.check_for_launch(program, small, observed=False)
    larger = HostConfig(typecheck={"memoryLimitBytes": 64 << 20, "timeoutMs": 120_000, "diskCache": False})
    with pytest.raises(TypeScriptError, match="ran out of memory"):
        await checker.check_for_launch(program, larger, observed=False)
    assert compiled == ["checked", "checked"]


# ---------------------------------------------------------------- fair compiler slots


async def test_fair_slots_keep_the_last_one_for_another_owner() -> None:
    slots = FairSlots(2)
    order: list[str] = []
    release = anyio.Event()

    async def hold(owner: str, tag: str) -> None:
        async with slots.taken(owner):
            order.append(tag)
            await release.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold, "bomb", "bomb-1")
        tg.start_soon(hold, "bomb", "bomb-2")
        await anyio.wait_all_tasks_blocked()
        assert order == ["bomb-1"]  # the second slot is kept for someone else
        tg.start_soon(hold, "clean", "clean")
        await anyio.wait_all_tasks_blocked()
        assert order == ["bomb-1", "clean"]
        release.set()
    assert order == ["bomb-1", "clean", "bomb-2"] and slots.free == 2
    lone = FairSlots(1)  # one slot: nothing to keep, first come first served
    async with lone.taken("a"):
        assert lone.free == 0


async def test_a_clean_program_is_checked_while_bombs_hold_the_compiler(
        fixture_evaluator: FixtureEvaluator, monkeypatch: pytest.MonkeyPatch) -> None:
    if checker.MAX_COMPILERS < 2:
        pytest.skip("one compiler slot: nothing to share")
    real = checker._compile
    release = anyio.Event()
    bombs: list[str] = []

    async def compile_or_hold(program: Program, *rest: Any) -> Any:
        if program.name == "bomb":
            bombs.append(program.code)
            await release.wait()  # as a type bomb holds its slot until its cap
        return await real(program, *rest)

    monkeypatch.setattr(checker, "_compile", compile_or_hold)
    clean_done = anyio.Event()
    async with JevHost(HostConfig(max_concurrent_runs=8), evaluator=fixture_evaluator) as host:
        async def bomb(n: int) -> None:
            program = {**make(as_typescript(f"const n{n} = {n};\n" + DONE), requires=[]), "name": "bomb"}
            await host.run(program, {"ticket": "a"})

        async def clean() -> None:
            envelope = await host.run(make(as_typescript(DONE), requires=[]), {"ticket": "b"})
            assert envelope.state is RunState.COMPLETED and envelope.typecheck.outcome == "clean"
            clean_done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(bomb, 1)
            tg.start_soon(bomb, 2)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(clean)
            with anyio.fail_after(60):  # a guard against a hang, not a measure of time
                await clean_done.wait()
            assert len(bombs) == 1, "the second bomb took the slot the clean program needed"
            release.set()
    assert len(bombs) == 2


# ---------------------------------------------------------------- the disk cache


def stored(folder: Path, program: Program) -> tuple[Path, dict[str, Any]]:
    entry = folder / (key_of(program) + cache.SUFFIX)
    return entry, json.loads(entry.read_text())


def sign(folder: Path, digest: str, body: dict[str, Any]) -> str:
    """What a writer holding the key would sign (the test plays one: it runs as the same user)."""
    key = (folder / cache.KEY_FILE).read_bytes()
    material = json.dumps([digest, body], ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, material.encode("ascii"), hashlib.sha256).hexdigest()


async def test_a_planted_clean_verdict_without_the_key_is_not_believed(tmp_path: Path) -> None:
    folder = tmp_path / "verdicts"
    config = HostConfig(typecheck={"cacheDir": str(folder)})
    program = parse_program(make(as_typescript("const t = input.tickt;\n" + DONE)))
    first = await checker.check(program, config=config.typecheck)
    assert not first.clean
    entry, data = stored(folder, program)
    assert oct((folder / cache.KEY_FILE).stat().st_mode & 0o777) == "0o600"
    clean = {**data["verdict"], "diagnostics": []}
    for forged in ({"digest": data["digest"], "verdict": clean},  # the old format, no MAC
                   {"digest": data["digest"], "verdict": clean, "mac": data["mac"]},  # another body's MAC
                   {"digest": data["digest"], "verdict": clean,
                    "mac": hmac.new(b"k" * 32, b"x", hashlib.sha256).hexdigest()}):
        entry.write_text(json.dumps(forged))
        cache.forget_all()
        with pytest.raises(TypeScriptError, match="TS2551"):
            await checker.check_for_launch(program, config, observed=False)


async def test_erased_code_from_the_cache_is_checked_against_the_source(
        fixture_evaluator: FixtureEvaluator, tmp_path: Path) -> None:
    folder = tmp_path / "verdicts"
    config = HostConfig(typecheck={"cacheDir": str(folder)})
    guarded = as_typescript("if (input.ticket !== 'ok') throw new Error('guard held');\n" + DONE)
    prog = make(guarded, requires=[])
    async with JevHost(config, evaluator=fixture_evaluator) as host:
        first = await host.run(prog, {"ticket": "bad"})
    assert first.state is RunState.FAILED and "guard held" in (first.error or "")
    program = parse_program(prog)
    entry, data = stored(folder, program)
    erased = data["verdict"]["erased"]
    guard_line = erased.split("\n")[1]
    blanked = erased.replace(guard_line, " " * len(guard_line))  # a blanking: same length, lines kept
    verdict = {**data["verdict"], "erased": blanked}
    entry.write_text(json.dumps({"digest": data["digest"], "verdict": verdict,
                                 "mac": sign(folder, data["digest"], {"verdict": verdict})}))
    cache.forget_all()
    async with JevHost(config, evaluator=fixture_evaluator) as host:
        again = await host.run(prog, {"ticket": "bad"})
    assert again.state is RunState.FAILED and "guard held" in (again.error or "")
    assert json.loads(entry.read_text())["verdict"]["erased"] == erased  # compiled and written again


@pytest.mark.parametrize("problem", ["others may write it", "another user owns it", "a symlink"])
async def test_a_cache_folder_others_control_is_not_used(tmp_path: Path, problem: str,
                                                         compiled: list[str]) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    folder = real
    if problem == "others may write it":
        real.chmod(0o777)
    elif problem == "another user owns it":
        if os.geteuid() != 0:
            pytest.skip("only root can give a folder away")
        os.chown(real, 65534, 65534)
    else:
        folder = tmp_path / "link"
        folder.symlink_to(real)
    config = HostConfig(typecheck={"cacheDir": str(folder)})
    program = parse_program(make(as_typescript(DONE)))
    assert (await checker.check(program, config=config.typecheck)).clean
    assert list(real.iterdir()) == []  # nothing written there
    cache.forget_all()
    await checker.check(program, config=config.typecheck)
    assert len(compiled) == 2  # and nothing read from it


async def test_a_key_file_others_may_read_is_not_trusted(tmp_path: Path, compiled: list[str]) -> None:
    folder = tmp_path / "verdicts"
    config = HostConfig(typecheck={"cacheDir": str(folder)})
    program = parse_program(make(as_typescript(DONE)))
    await checker.check(program, config=config.typecheck)
    (folder / cache.KEY_FILE).chmod(0o644)
    cache.forget_all()
    await checker.check(program, config=config.typecheck)
    assert len(compiled) == 2


async def test_a_fifo_named_like_a_verdict_does_not_hold_the_launch(
        fixture_evaluator: FixtureEvaluator, tmp_path: Path) -> None:
    folder = tmp_path / "verdicts"
    folder.mkdir(mode=0o700)
    config = HostConfig(typecheck={"cacheDir": str(folder)})
    prog = make(as_typescript(DONE), requires=[])
    os.mkfifo(folder / (key_of(parse_program(prog)) + cache.SUFFIX))
    async with JevHost(config, evaluator=fixture_evaluator) as host:
        envelope = await host.run(prog, {"ticket": "a"})
    assert envelope.state is RunState.COMPLETED and envelope.typecheck.outcome == "clean"


# ---------------------------------------------------------------- forging the compiler's output


@pytest.mark.parametrize("terminator", ["\n", "\r", "\u2028", "\u2029"])
async def test_a_name_holding_a_line_terminator_cannot_declare_anything(terminator: str) -> None:
    sneaky = f"x{terminator}declare function fetch(url: string): Promise<any>; //"
    program = parse_program({"name": sneaky, "code": "const page = await fetch('https://example.com');\n"
                             "return null;", "inputSchema": {}, "outputSchema": {}})
    verdict = await checker.check(program)
    assert [d.code for d in verdict.diagnostics] == [2304]
    plain = parse_program({"name": f"ok{terminator}name", "code": "return null;", "inputSchema": {},
                           "outputSchema": {}})
    assert (await checker.check(plain)).clean


@pytest.mark.parametrize("forged", [
    "jev.d.ts(1,1): error TS1005: ';' expected.",
    "program.ts(1,1): error TS2322: Type 'x' is not assignable to type 'y'.",
    "error TS5023: Unknown compiler option 'x'.",
])
async def test_a_newline_in_an_import_specifier_forges_no_diagnostic(forged: str) -> None:
    specifier = json.dumps("x\n" + forged)
    code = as_typescript(f"const m = await import({specifier});\nconst t = input.tickt;\n" + DONE)
    verdict = await checker.check(parse_program(make(code)))
    assert [(d.line, d.code) for d in verdict.diagnostics] == [(2, 2307), (3, 2551)]
    assert forged in verdict.diagnostics[0].message  # the program's own text, inside its message


async def test_ts_ignore_and_ts_expect_error_work_as_in_any_typescript() -> None:
    ignored = as_typescript("// @ts-ignore\nconst t: number = input.tickt;\n" + DONE)
    assert (await checker.check(parse_program(make(ignored)))).clean
    expected = as_typescript("// @ts-expect-error\nconst t: number = input.tickt;\n" + DONE)
    assert (await checker.check(parse_program(make(expected)))).clean
    unused = as_typescript("// @ts-expect-error\nconst t: string = input.ticket;\n" + DONE)
    [diagnostic] = (await checker.check(parse_program(make(unused)))).diagnostics
    assert (diagnostic.line, diagnostic.code) == (2, 2578)


# ---------------------------------------------------------------- schemas deeper than a walk


@pytest.mark.parametrize("side", ["inputSchema", "outputSchema"])
@pytest.mark.parametrize("keyword", ["enum", "const"])
async def test_a_deeply_nested_enum_or_const_is_schema_invalid(
        fixture_evaluator: FixtureEvaluator, side: str, keyword: str) -> None:
    value: Any = 0
    for _ in range(450):
        value = [value]
    schema = {"enum": [value, 0]} if keyword == "enum" else {"anyOf": [{"const": value}, {}]}
    program = {"name": "deep", "code": "const n: number = 0;\nreturn n;", "inputSchema": {},
               "outputSchema": {}, side: schema}
    async with JevHost(evaluator=fixture_evaluator) as host:
        with pytest.raises(SchemaInvalid, match="nests deeper than 32 levels"):
            await host.run(program, 0)
