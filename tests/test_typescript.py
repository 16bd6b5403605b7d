"""TypeScript annotations are erased (not compiled) before execution (contract §3)."""

from __future__ import annotations

import re

import anyio
import pytest

from fabric_jev import CompileError, FixtureEvaluator, HostConfig, JevHost, RunState, TypeScriptError
from fabric_jev.typecheck.erasure import strip_types
from tests.conftest import program

pytestmark = pytest.mark.anyio


def squash(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


@pytest.mark.parametrize(("ts", "js"), [
    ("const x: number = input.n as number;", "const x = input.n ;"),
    ("let a: string, b: number[];", "let a , b ;"),
    ("const {a, b}: {a: string; b: number} = input;", "const {a, b} = input;"),
    ("function f<T extends object = {}>(a: T, b?: string, ...rest: number[]): Promise<T> { return a!; }",
     "function f (a , b , ...rest ) { return a ; }"),
    ("const g = async (x: number, y?: {z: string}): Promise<void> => { await program.sleep(x); };",
     "const g = async (x , y ) => { await program.sleep(x); };"),
    ("interface Foo { a: string; b: (x: number) => void }\nconst foo = 1;", "const foo = 1;"),
    ("type T = {b: number} | string;\ntype U<K> = K[];\nconst t = 2;", "const t = 2;"),
    ("const r = f({state: 'x'} satisfies object);", "const r = f({state: 'x'} );"),
    ("const arr = [1, 2] as const;", "const arr = [1, 2] ;"),
    ("const n = f<number>(3);", "const n = f (3);"),
    ("const o = { method(a: number): number { return a; }, k: 1 };", "const o = { method(a ) { return a; }, k: 1 };"),
    ("class A implements B { private x: number = 1; readonly y?: string; m(a: number): void {} }",
     "class A { x = 1; y ; m(a ) {} }"),
    ("let q!: number;", "let q ;"),
    ("const map = new Map<string, number>();", "const map = new Map ();"),
    ("declare const foo: number;\nconst bar = 1;", "const bar = 1;"),
    ("const t = `a ${x as number} b ${`in ${y!} er`} c`;", "const t = `a ${x } b ${`in ${y } er`} c`;"),
    # A default value holding an arrow with its own annotations.
    ("const h = (a = (x: number) => x) => a;", "const h = (a = (x ) => x) => a;"),
    ("const k = (a: number = ((y: string): number => 1)('')): void => {};",
     "const k = (a = ((y ) => 1)('')) => {};"),
    ("function m(this: Window, a: number) { return a; }", "function m( a ) { return a; }"),
    ("function isS(x: unknown): x is string { return typeof x === 'string'; }",
     "function isS(x ) { return typeof x === 'string'; }"),
    ("function f(a: string): void;\nfunction f(a) {}", "function f(a) {}"),
    ("abstract class A { abstract m(): void; declare d: number; protected override n?(): void {} [k: string]: any; }",
     "class A { ; ; n () {} ; }"),
    ("class C<T> extends Base<T> { static x: T[] = []; }", "class C extends Base { static x = []; }"),
    ("const v = <any>w; const g = f<string>;", "const v = w; const g = f ;"),
    ("declare namespace N { const z: number }\nconst y = 1;", "const y = 1;"),
    ("for (const x of (y as number[])!) {}", "for (const x of (y ) ) {}"),
])
def test_erasure(ts: str, js: str) -> None:
    out = strip_types(ts)
    assert squash(out) == js
    assert out.count("\n") == ts.count("\n") and len(out) == len(ts)  # positions are kept


def test_positions_are_kept_in_characters_not_bytes() -> None:
    ts = "const é: Map<string, 'ü'> = new Map();\nthrow new Error('ß');"
    out = strip_types(ts)
    assert len(out) == len(ts) and out.index("throw") == ts.index("throw")
    assert squash(out) == "const é = new Map(); throw new Error('ß');"


@pytest.mark.parametrize("js", [
    "const c = cond ? (a) : b;",
    "if (a < b && c > d) { x(); }",
    "const re = /a:b/g; const s = 'x: number'; const t = `${a}: ${b}`;",
    "const o = {a: 1, b: [2, 3], c: {d: 'e'}}; label: for (;;) { break label; }",
    "switch (k) { case 1: y(); break; default: z(); }",
])
def test_plain_javascript_is_left_alone(js: str) -> None:
    assert strip_types(js) == js


@pytest.mark.parametrize(("ts", "needle"), [
    ("enum Color { Red }", "enum declarations are not supported"),
    ("namespace N { }", "namespace declarations are not supported"),
    ("class A { constructor(private x: number) {} }", "parameter properties"),
    ("@dec class A {}", "decorators"),
    ("module M { }", "module declarations are not supported"),
    ("class A { constructor(readonly x: number) {} }", "parameter properties"),
    ("class A { constructor(public x?: number) {} }", "parameter properties"),
])
def test_unsupported_typescript_is_refused(ts: str, needle: str) -> None:
    with pytest.raises(TypeScriptError, match=needle):
        strip_types(ts)


TS_PROGRAM = """
interface Ticket { text: string; urgent?: boolean }
type Summary = { count: number; urgent: number };
const tickets: Ticket[] = input.tickets as Ticket[];
function isUrgent(t: Ticket): boolean { return t.urgent === true; }
const summarise = (ts: Ticket[]): Summary => ({ count: ts.length, urgent: ts.filter(isUrgent).length });
await program.emit({ seen: tickets.length } satisfies object);
return summarise(tickets)!;
"""


async def test_a_typescript_program_runs(host: JevHost) -> None:
    env = await host.run(program(TS_PROGRAM, inputSchema={"type": "object"}),
                         {"tickets": [{"text": "a", "urgent": True}, {"text": "b"}]})
    assert env.state is RunState.COMPLETED, env.error
    assert env.result == {"count": 2, "urgent": 1}


async def test_typescript_errors_are_reported_at_launch(host: JevHost) -> None:
    with pytest.raises(CompileError, match="enum declarations are not supported"):
        await host.run(program("enum Color { Red }\nreturn Color.Red;"), None)
    # Syntax and other errors the compiler sees come from the type check, with their place.
    with pytest.raises(TypeScriptError, match=r"line 2, column 19: Expression expected. \(TS1109\)"):
        await host.run(program("const a: number = 1;\nconst x: number = ;"), None)
    with pytest.raises(TypeScriptError, match=r"line 1, column 28: Cannot redeclare block-scoped variable 'x'"):
        await host.run(program("const x: number = 1; const x = 2;"), None)
    assert host.status().runs == ()


async def test_erasure_errors_without_the_type_check(fixture_evaluator: FixtureEvaluator) -> None:
    config = HostConfig(typecheck={"typescript": "off", "javascript": "off"})
    async with JevHost(config, evaluator=fixture_evaluator) as host:
        with pytest.raises(CompileError, match=r"TypeScript: syntax error at line 2, column \d+"):
            await host.run(program("const a: number = 1;\nconst x: number = ;"), None)
        with pytest.raises(CompileError, match="as TypeScript, after erasing annotations"):
            await host.run(program("const x: number = 1; const x = 2;"), None)
        assert host.status().runs == ()


async def test_javascript_syntax_errors_stay_javascript_errors(host: JevHost) -> None:
    with pytest.raises(CompileError) as err:
        await host.run(program("return 1 +"), None)
    assert "TypeScript" not in str(err.value)


async def test_errors_point_into_the_authors_lines(host: JevHost) -> None:
    env = await host.run(program("const a: number = 1;\nconst b: string = 'x';\nthrow new Error(`line ${3}`);"),
                         None)
    assert env.state is RunState.FAILED and env.error == "Error: line 3 (line 3, column 11)"


# Nested brackets that do not compile as JavaScript: the old hand-written stripper took
# seconds (minutes at the 64 KiB cap) on the event loop for this.
PATHOLOGICAL = "(" * 6000 + ")" * 6000


def test_a_parse_over_the_time_cap_is_refused() -> None:
    with pytest.raises(TypeScriptError, match=r"parsing took longer than 0 s and was stopped"):
        strip_types("const x: number = 1;\n" + PATHOLOGICAL, cap_s=0)


async def test_a_launch_over_the_time_cap_is_rejected(host: JevHost, monkeypatch: pytest.MonkeyPatch) -> None:
    import fabric_jev.typecheck.erasure as typescript

    monkeypatch.setattr(typescript, "PARSE_CAP_S", 0.0)
    with pytest.raises(CompileError, match="TypeScript: parsing took longer than 0 s"):
        await host.run(program("const x: number = 1;\n" + PATHOLOGICAL), None)
    assert host.status().runs == ()


async def test_pathological_code_does_not_stall_an_unrelated_run(host: JevHost) -> None:
    """The other run awaits timers on the event loop while the bad program is parsed."""
    outcome: list[object] = []

    async def launch_bad() -> None:
        with pytest.raises(CompileError) as err:
            await host.run(program(PATHOLOGICAL), None)
        outcome.append(err.value)

    async with anyio.create_task_group() as tg:
        tg.start_soon(launch_bad)
        env = await host.run(program(
            "for (let i = 0; i < 20; i++) await program.sleep(1); return 'done';",
            limits={"timeoutMs": 2000}), None)
    assert env.state is RunState.COMPLETED and env.result == "done", env.error
    assert len(outcome) == 1
