"""Errors that point at the program: host-call errors name the call's line and column, stacks
show only the program's frames, budget and deadline errors state their limit, and the advice for
an endless loop works when followed. Real hosts and workers throughout."""

from __future__ import annotations

import re

import pytest

from fabric_jev import JevHost, RunState
from tests.conftest import program

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("code", "requires", "message"), [
    ("await jev.evaluate({state: 'x', questions: {}})", [],
     "Capability not granted to Jev program: jev.evaluate (line 3, column 24)"),
    ("await tools.call({ref: 'kv.get'})", [],
     "Capability not granted to Jev program: kv.get (line 3, column 26)"),
    ("await tools.call('kv.get')", [], "tools.call expects {ref, args?} (line 3, column 26)"),
    ("await jev.evaluate({state: 'x', questions: {q: {type: 'text', instructions: 'say'}}})",
     ["jev.evaluate"], "(line 3, column 24)"),
    ("await program.sleep(-5)", [], "Invalid program.sleep duration (line 3, column 28)"),
    ("await program.sleep(1e9)", [], "Invalid program.sleep duration (line 3, column 28)"),
    ("await program.emit(1n)", [], "(line 3, column 28)"),
    ("await program.nextEvent()", [], "program.nextEvent needs spawn with observe (line 3, column 28)"),
    ("await program.advise({eventId: 'e', message: 'm'})", [],
     "Capability not granted to Jev program: jev.advise (line 3, column 28)"),
])
async def test_every_host_call_error_names_the_line_and_column_of_the_call(
        host: JevHost, code: str, requires: list[str], message: str) -> None:
    env = await host.run(program(f"const first = 1;\n// the call:\nlet e; try {{ {code} }} catch (x) {{ e = x; }}\n"
                                 "return {message: e.message, stack: e.stack}",
                                 requires=requires, limits={"timeoutMs": 1000}), None)
    assert env.state is RunState.COMPLETED, env.error
    assert env.result["message"].endswith(message), env.result
    assert env.result["stack"] == f"    at anonymous (<program>:3:{message.rsplit(' ', 1)[1][:-1]})\n"


async def test_an_uncaught_host_call_error_fails_the_run_with_its_position_once(host: JevHost) -> None:
    env = await host.run(program("\n\n  await tools.call({ref: 'kv.get'});"), None)
    assert env.state is RunState.FAILED
    assert env.error == "Error: Capability not granted to Jev program: kv.get (line 3, column 15)"


async def test_a_call_made_deep_in_the_program_shows_the_programs_frames_only(host: JevHost) -> None:
    env = await host.run(program("""
      async function fetchIt(ref) {
        return await tools.call({ref});
      }
      const wrap = async () => fetchIt('kv.get');
      try { await wrap(); } catch (e) { return e.stack; }
    """), None)
    assert env.state is RunState.COMPLETED, env.error
    assert env.result == "    at fetchIt (<program>:3:28)\n    at wrap (<program>:5:32)\n" \
                         "    at anonymous (<program>:6:19)\n"


async def test_a_guests_own_errors_have_no_prelude_frame_and_program_numbers(host: JevHost) -> None:
    env = await host.run(program("""function fail() { throw new TypeError('no'); }
try { [1].map(() => fail()); } catch (e) { return e.stack; }"""), None)
    assert env.state is RunState.COMPLETED, env.error
    # The built-in the program called stays; the bridge that started the program does not.
    assert env.result == ("    at fail (<program>:1:29)\n    at <anonymous> (<program>:2:21)\n"
                          "    at map (native)\n    at anonymous (<program>:2:11)\n")


async def test_columns_count_characters_not_bytes(host: JevHost) -> None:
    env = await host.run(program("const café = '日本'; await program.sleep(-1);"), None)
    assert env.error == "Error: Invalid program.sleep duration (line 1, column 34)"


async def test_the_guest_cannot_install_a_stack_formatter_to_reach_the_bridge(host: JevHost) -> None:
    # Call-site objects would hand out the prelude's functions (getFunction): the hook stays unset.
    env = await host.run(program("""
      let assigned;
      try { Error.prepareStackTrace = (e, sites) => sites; assigned = 'assigned'; }
      catch (e) { assigned = e.message; }
      const fromTimer = await new Promise((resolve) => setTimeout(() => resolve(typeof new Error().stack), 0));
      return [assigned, Error.prepareStackTrace === undefined, fromTimer];
    """), None)
    assert env.state is RunState.COMPLETED, env.error
    assert env.result in (["assigned", True, "string"], ["'prepareStackTrace' is read-only", True, "string"])


async def test_a_guest_assigned_stack_does_not_move_the_reported_position(host: JevHost) -> None:
    env = await host.run(program("const e = new Error('x');\ne.stack = 'at nowhere (<input>:999:1)';\nthrow e;"),
                         None)
    assert env.error == "Error: x (line 1, column 15)"


async def test_budget_errors_state_their_limit(host: JevHost) -> None:
    env = await host.run(program("for (;;) await program.emit(1);", limits={"maxToolCalls": 64}), None)
    assert env.state is RunState.FAILED
    # The guest let it escape: the run's error is the budget's, with the call's position.
    assert env.error == "Jev tool-call budget of 64 exhausted (line 1, column 24)"
    env = await host.run(program("for (;;) await program.sleep(50);", limits={"timeoutMs": 200}), None)
    assert env.state is RunState.TIMED_OUT and env.error == "Jev deadline of 200 ms exceeded"


async def test_the_endless_loop_advice_works_when_followed(host: JevHost) -> None:
    spin = "let n = 0; for (;;) { n++; }"
    env = await host.run(program(spin), None)
    assert env.state is RunState.TIMED_OUT
    advice = re.search(r"`([^`]+)`", env.error or "")
    assert advice is not None, env.error
    # Followed: about half a second of CPU in 5 ms chunks, with a budget of one host call.
    followed = f"""
      let n = 0;
      const end = Date.now() + 500;
      while (Date.now() < end) {{
        const chunk = Date.now() + 5;
        while (Date.now() < chunk) n++;
        {advice.group(1)};
      }}
      return n > 0;
    """
    env = await host.run(program(followed, limits={"maxToolCalls": 1}), None)
    assert env.state is RunState.COMPLETED, env.error
    assert env.result is True and env.tool_calls == 0
