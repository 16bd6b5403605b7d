"""The guest API is written once: runtime_js/jev.d.ts declares what the prelude and the engine define.

The globals a guest really has are read from a program run in a real worker; the engine's own
from a fresh QuickJS context; what the ES library declares, and whether the declarations
match the guest, is the compiler's (tsgo) judgment: the names compared are not written here.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from fabric_jev import JevHost, RunState
from fabric_jev.contract.program import Program
from fabric_jev.protocol import runtime_js
from fabric_jev.typecheck import checker
from fabric_jev.typecheck.compiler import Compiler, locate
from fabric_jev.typecheck.declarations import render
from fabric_jev.typecheck.tsgo import run_compiler

pytestmark = pytest.mark.anyio

#: Everything the guest API can hold: every optional part present.
FULL = Program(name="full", code="return null", input_schema={}, output_schema={},
               requires=("jev.evaluate", "jev.advise", "kv.get"))

# Run in a real worker: every global, its kind, and for what the prelude added (or the
# declarations name) its members, own and inherited up to the prototypes every object shares.
GLOBALS = """\
const engine = new Set(input.engine);
const wanted = new Set(input.declared);
const seen = {};
for (const name of Object.getOwnPropertyNames(globalThis)) {
  const value = globalThis[name];
  const kind = value === null ? "null" : typeof value;
  const members = [];
  if ((kind === "object" || kind === "function") && (!engine.has(name) || wanted.has(name))) {
    for (let o = value; o !== null && o !== Object.prototype && o !== Function.prototype;
         o = Object.getPrototypeOf(o)) {
      members.push(...Object.getOwnPropertyNames(o));
    }
  }
  seen[name] = {kind, members};
}
return seen;
"""


def _engine_globals() -> list[str]:
    """The globals of a fresh QuickJS context, before any prelude: the engine's own."""
    import _quickjs

    names: list[str] = json.loads(_quickjs.Context().eval("JSON.stringify(Object.getOwnPropertyNames(globalThis))"))
    return names


def _declared_globals(declarations: str) -> set[str]:
    """The values the declarations put in the global scope, read by the TypeScript grammar."""
    import tree_sitter
    import tree_sitter_typescript

    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_typescript.language_typescript()))
    root = parser.parse(declarations.encode("utf-8")).root_node
    assert not root.has_error
    found: set[str] = set()
    for node in root.named_children:
        if node.type in ("comment", "interface_declaration", "type_alias_declaration"):
            continue  # types only: no value in the global scope
        # Anything else in a declarations file must be `declare ...`: a value, named here.
        assert node.type == "ambient_declaration", node.text
        [declared] = node.named_children
        if declared.type in ("lexical_declaration", "variable_declaration"):
            names = [d.child_by_field_name("name") for d in declared.named_children if d.type == "variable_declarator"]
        else:
            assert declared.type in ("function_signature", "class_declaration"), declared.text
            names = [declared.child_by_field_name("name")]
        found.update(name.text.decode() for name in names if name is not None and name.text is not None)
    return found


async def _compile(files: dict[str, str]) -> str:
    """tsgo's output for these files under the checker's TypeScript options, the library's checks on."""
    compiler = locate()
    assert isinstance(compiler, Compiler)
    folder = Path(tempfile.mkdtemp())
    try:
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
        options = {**checker.OPTIONS[checker.Language.TYPESCRIPT], "skipLibCheck": False}
        (folder / "tsconfig.json").write_text(json.dumps({"compilerOptions": options, "files": list(files)}))
        run = await run_compiler(compiler, ["-p", "tsconfig.json"], folder, timeout_s=60, memory_bytes=1 << 30)
    finally:
        shutil.rmtree(folder)
    return run.output


async def _beyond_the_library(names: list[str]) -> set[str]:
    """Which of `names` the ES library the checker uses does not declare (the compiler says)."""
    output = await _compile({"probe.ts": "".join(f"{name};\n" for name in names)})
    missing: set[str] = set()
    for line in output.splitlines():
        if line.startswith("probe.ts(") and "error TS2304: Cannot find name" in line:
            missing.add(names[int(line[len("probe.ts("):line.index(",")]) - 1])
        else:
            assert line.startswith(" "), output  # nothing else is expected of a bare name
    return missing


async def _guest_globals(host: JevHost, engine: list[str], declared: set[str]) -> dict[str, Any]:
    program = {"name": "globals", "code": GLOBALS, "inputSchema": {}, "outputSchema": {}}
    envelope = await host.run(program, {"engine": engine, "declared": sorted(declared)})
    assert envelope.state is RunState.COMPLETED, envelope.error
    seen: dict[str, Any] = envelope.result
    return seen


async def test_the_declarations_name_every_global_the_guest_has_beyond_the_library(host: JevHost) -> None:
    declarations = render(FULL, observed=True)
    declared = _declared_globals(declarations)
    engine = _engine_globals()
    guest = await _guest_globals(host, engine, declared)
    from_prelude = set(guest) - set(engine)
    from_engine = await _beyond_the_library(engine)
    assert {"program", "jev", "tools", "console", "setTimeout", "input"} <= from_prelude  # the probe sees them
    assert declared - from_prelude - from_engine == set(), "declared, but the guest has no such global"
    assert from_prelude - declared == set(), "the prelude defines it, the declarations do not"
    assert from_engine - declared == set(), "the engine adds it beyond the ES library, undeclared"


def _quoted(names: list[str]) -> str:
    return " | ".join(json.dumps(n) for n in sorted(set(names))) or "never"


async def test_the_declarations_type_each_global_as_the_guest_has_it(host: JevHost) -> None:
    """Kinds and members, judged by the compiler: a member the prelude defines and the declarations
    lack is an excess property, one declared but not defined a missing one."""
    declarations = render(FULL, observed=True)
    declared = _declared_globals(declarations)
    engine = _engine_globals()
    guest = await _guest_globals(host, engine, declared)
    from_prelude = set(guest) - set(engine)
    probe = []
    # `input` is the program's own: its type comes from the inputSchema, whatever the value.
    for name in sorted((from_prelude | declared) - {"input"}):
        kind, members = guest[name]["kind"], guest[name]["members"]
        assert kind in ("object", "function"), (name, kind)
        probe.append(f"const kind_{name}: {json.dumps(kind)} = null! as (typeof {name} extends Function ? "
                     f"\"function\" : \"object\");")
        probe.append(f"type Unknown_{name} = Exclude<keyof typeof {name}, {_quoted(members)}>;")
        probe.append(f"const known_{name}: [Unknown_{name}] extends [never] ? true : Unknown_{name} = true;")
        if name in from_prelude and kind == "object":
            listed = ", ".join(f"{json.dumps(m)}: 0" for m in members)
            probe.append(f"const members_{name}: {{ [K in keyof typeof {name}]-?: 0 }} = {{ {listed} }};")
    output = await _compile({"jev.d.ts": declarations, "probe.ts": "\n".join(probe) + "\n"})
    assert output == "", output


async def test_the_declarations_compile_and_are_the_guest_api_file_verbatim() -> None:
    declarations = render(FULL, observed=True)
    assert runtime_js("jev.d.ts") in declarations
    assert await _compile({"jev.d.ts": declarations}) == ""


def test_the_verdict_digest_covers_the_guest_api_file() -> None:
    """A verdict is keyed by the declarations it was made against, jev.d.ts included: a changed
    file is a new digest, so no verdict made against the old one is reused."""
    compiler = locate()
    assert isinstance(compiler, Compiler)
    program = Program(name="p", code="return null", input_schema={}, output_schema={}, requires=())
    declarations = render(program, observed=False)
    api = runtime_js("jev.d.ts")
    changed = declarations.replace(api, api.replace("sleep(ms: number)", "sleep(ms: number | string)"))
    assert changed != declarations
    assert checker.digest(program, changed, compiler) != checker.digest(program, declarations, compiler)
