"""Hostile guest strings and builtins, and where guest errors point.

Lone UTF-16 surrogates cross as U+FFFD (envelopes stay printable); a guest
that rewrites builtins changes nothing the host receives; errors carry the
line and column of the program's own source.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric_jev import CapabilityRegistry, CompileError, FixtureEvaluator, JevHost, RunState
from tests.conftest import program
from tests.test_cli import cli, write

pytestmark = pytest.mark.anyio


def _printable(env: object) -> str:
    text = env.model_dump_json()  # type: ignore[attr-defined]
    text.encode("utf-8")
    assert "0x" not in text, "a heap address reached the envelope"
    return text


# ---------------------------------------------------------------- lone surrogates


async def test_a_thrown_lone_surrogate_fails_the_run_printably(host: JevHost) -> None:
    env = await host.run(program("throw new Error('\\ud800')"), None)
    _printable(env)
    assert env.state is RunState.FAILED and env.error == "Error: \ufffd (line 1, column 11)"
    env = await host.run(program("throw '\\udfff'"), None)
    _printable(env)
    assert env.error == "\ufffd"


async def test_a_logged_lone_surrogate_is_printable(host: JevHost) -> None:
    env = await host.run(program("console.log('\\udc00', 'a\\ud800b'); return 1"), None)
    _printable(env)
    assert env.state is RunState.COMPLETED and env.logs == ("\ufffd a\ufffdb",)


async def test_lone_surrogates_in_emitted_and_returned_values_are_printable(host: JevHost) -> None:
    env = await host.run(program(
        "await program.emit({['k\\ud800']: '\\udc00x'}); return ['\\ud800']"), None)
    _printable(env)
    assert env.events[0].value == {"k\ufffd": "\ufffdx"} and env.result == ["\ufffd"]


async def test_a_lone_surrogate_in_a_tool_ref_is_a_catchable_guest_error(
        fixture_evaluator: FixtureEvaluator) -> None:
    registry = CapabilityRegistry()

    async def echo(args: object, ctx: object) -> object:
        return args

    registry.register("t.echo", echo, "read")  # a read: allowed by the default approvals
    async with JevHost(capabilities=registry, evaluator=fixture_evaluator) as host:
        env = await host.run(program("""
          const out = [];
          for (const ref of ['t.\\ud800', '\\udc00']) {
            try { await tools.call({ref}); } catch (e) { out.push(e.message); }
          }
          out.push(await tools.call({ref: 't.echo', args: 'x\\ud800'}));
          return out;
        """, requires=["t.echo"]), None)
    _printable(env)
    assert env.state is RunState.COMPLETED, env.error
    assert env.result == ["Capability not granted to Jev program: t.\ufffd (line 4, column 31)",
                          "Capability not granted to Jev program: \ufffd (line 4, column 31)", "x\ufffd"]


DEEP_SURROGATE = "let v = '\\ud800'; for (let i = 0; i < 600; i++) v = [v];"


async def test_a_deep_value_holding_a_lone_surrogate_gives_catchable_errors(host: JevHost) -> None:
    # 600 levels once made the wire decoder's recursive scrub hit the recursion limit
    # ("Jev host error: ExceptionGroup…"), which no guest could catch.
    env = await host.run(program(DEEP_SURROGATE + """
      const out = [];
      try { await program.emit(v); } catch (e) { out.push(e.message); }
      try {
        await jev.evaluate({state: v, questions: {q: {type: 'noul', instructions: 'x'}}});
      } catch (e) { out.push(e.message); }
      return out;
    """, requires=["jev.evaluate"]), None)
    _printable(env)
    assert env.state is RunState.COMPLETED, env.error
    # Each message ends with the line and column of its call.
    assert [m.rsplit(" (line ", 1)[0] for m in env.result] == ["program.emit value is nested too deeply",
                                                              "jev.evaluate request is nested deeper than 32 levels"]


async def test_a_deep_result_holding_a_lone_surrogate_fails_the_run_cleanly(host: JevHost) -> None:
    env = await host.run(program(DEEP_SURROGATE + "return v;"), None)
    _printable(env)
    assert env.state is RunState.FAILED and env.error == "output is nested too deeply"


def test_the_cli_prints_a_surrogate_error_envelope(tmp_path: Path) -> None:
    done = cli("run", write(tmp_path, "p.json", program("throw new Error('\\ud800')")))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads(done.stdout)["error"] == "Error: \ufffd (line 1, column 11)"


# ---------------------------------------------------------------- captured builtins


async def test_a_rewritten_string_slice_does_not_reach_the_log_cap(host: JevHost) -> None:
    env = await host.run(program("""
      String.prototype.slice = function () { return 'FORGED'; };
      console.log('x'.repeat(5000));
      return 1;
    """), None)
    assert env.logs == ("x" * 4096, "[logs truncated]")


async def test_a_rewritten_promise_reject_does_not_hide_a_refusal(host: JevHost) -> None:
    env = await host.run(program("""
      Promise.reject = function () { return Promise.resolve('FORGED'); };
      try { return await program.sleep(-1); } catch (e) { return 'refused: ' + e.message; }
    """), None)
    assert env.result == "refused: Invalid program.sleep duration (line 3, column 34)"


async def test_a_rewritten_error_has_instance_does_not_hide_the_error(host: JevHost) -> None:
    env = await host.run(program("""
      Object.defineProperty(Error, Symbol.hasInstance, {value: () => false});
      throw new Error('real');
    """), None)
    assert env.state is RunState.FAILED and env.error == "Error: real (line 3, column 17)"


async def test_rewritten_json_reflect_and_object_change_nothing_the_host_receives(
        host: JevHost) -> None:
    env = await host.run(program("""
      JSON.stringify = () => '{"forged":true}';
      JSON.parse = () => ({forged: true});
      Reflect.apply = () => 'FORGED';
      Object.defineProperty = () => { throw new Error('FORGED'); };
      Object.freeze = (o) => o;
      Array.prototype.push = function () { throw new Error('FORGED'); };
      String.prototype.indexOf = () => -1;
      String.prototype.repeat = () => '';
      String.prototype.charCodeAt = () => 48;
      Function.prototype.apply = () => 'FORGED';
      await program.emit({real: 1});
      console.log('real line');
      const slept = await program.sleep(0);
      return {slept, input};
    """), {"n": 1})
    assert env.state is RunState.COMPLETED, env.error
    assert env.result == {"slept": None, "input": {"n": 1}}
    assert [e.value for e in env.events] == [{"real": 1}] and env.logs == ("real line",)


# ---------------------------------------------------------------- positions


async def test_runtime_errors_carry_the_programs_line_and_column(host: JevHost) -> None:
    env = await host.run(program("const a = 1;\n\nfunction f() {\n  return a.b.c;\n}\nf();"), None)
    assert env.error is not None
    assert env.error.endswith("(line 4, column 10)"), env.error
    assert env.error.startswith("TypeError: ")


async def test_errors_after_an_await_keep_their_position(host: JevHost) -> None:
    env = await host.run(program("await program.sleep(0);\n  null.x;"), None)
    assert env.error is not None and env.error.endswith("(line 2, column 3)"), env.error


async def test_syntax_errors_carry_the_programs_line_and_column(host: JevHost) -> None:
    with pytest.raises(CompileError) as err:
        await host.run(program("const a = 1;\nconst b = 2;\n  return a +* b;"), None)
    assert str(err.value).startswith("Jev program does not compile: SyntaxError: ")
    assert "(line 3, column 13)" in str(err.value), err.value


async def test_a_thrown_non_error_has_no_position(host: JevHost) -> None:
    env = await host.run(program("\n\nthrow {code: 7}"), None)
    assert env.error == '{"code":7}'
