"""Runs, envelopes, budgets and history (contract §2 and §5 "In a program")."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from fabric_jev import (
    CapabilityError,
    CapabilityRegistry,
    Envelope,
    FixtureEvaluator,
    HostClosed,
    HostConfig,
    InputInvalid,
    JevHost,
    ProgramInvalid,
    RunState,
    SchemaInvalid,
    UnknownRun,
)
from tests.conftest import program

pytestmark = pytest.mark.anyio

EVALUATE = "return await jev.evaluate({state: 'x', questions: {q: {type: 'noul', instructions: 'Yes?'}}});"


async def test_run_returns_the_terminal_envelope(host: JevHost) -> None:
    env = await host.run(program("return input.a + 1",
                                 inputSchema={"type": "object"},
                                 outputSchema={"type": "integer"}), {"a": 41})
    assert env.state is RunState.COMPLETED and env.result == 42
    assert env.background is False and env.ended_at is not None
    assert uuid.UUID(env.id) and env.next_sequence == 1 and env.error is None
    data = env.to_json()
    assert set(data) == {"id", "name", "state", "background", "startedAt", "endedAt", "result",
                         "evaluations", "toolCalls", "usage", "events", "nextSequence", "logs", "typecheck"}


async def test_undefined_result_fails_and_null_completes(host: JevHost) -> None:
    env = await host.run(program("const x = 1;"), None)
    assert env.state is RunState.FAILED
    assert env.error == "Error: output is undefined; use null for no value"
    assert (await host.run(program("return null"), None)).result is None


async def test_output_not_matching_schema_fails(host: JevHost) -> None:
    env = await host.run(program("return 'x'", outputSchema={"type": "integer"}), None)
    assert env.state is RunState.FAILED
    assert env.error is not None
    assert env.error.startswith("output does not match its declared schema")
    assert "result" not in env.to_json()


async def test_non_finite_output_fails(host: JevHost) -> None:
    env = await host.run(program("return {n: NaN}"), None)
    assert env.state is RunState.FAILED
    assert env.error == "Error: output is not serialisable as JSON: " \
        "Error: output is not finite JSON (NaN or Infinity)"


async def test_output_over_32768_bytes_fails(host: JevHost) -> None:
    env = await host.run(program("return 'é'.repeat(16384)"), None)
    assert env.state is RunState.FAILED and env.error == "output exceeds 32768 bytes"


async def test_spawn_returns_running_before_the_first_tick(host: JevHost) -> None:
    env = await host.spawn(program("await program.emit('tick'); return 1"), None)
    assert env.state is RunState.RUNNING and env.background is True
    assert env.events == () and env.tool_calls == 0
    done = await host.wait(env.id)
    assert done.state is RunState.COMPLETED and done.events[0].value == "tick"


async def test_join_is_an_alias_of_wait(host: JevHost) -> None:
    # Seed 001: "wait is canonical: jev.join({id}) aliases jev.wait({id})" — one method, two names.
    assert JevHost.join is JevHost.wait
    env = await host.spawn(program("return 3"), None)
    assert (await host.join(env.id)).result == 3
    with pytest.raises(UnknownRun):
        await host.join("no-such-run")
    # The same semantics: cancelling a join leaves the run running, as cancelling a wait does.
    slow = await host.spawn(program("await program.emit('started'); await program.sleep(60000); return 1"), None)
    await host.progress(slow.id)
    with anyio.move_on_after(0.01) as scope:
        await host.join(slow.id)
    assert scope.cancelled_caught
    assert host.envelope(slow.id).state is RunState.RUNNING
    assert (await host.stop(slow.id)).state is RunState.CANCELLED


async def test_80_emits_leave_64_events_starting_at_17(host: JevHost) -> None:
    env = await host.run(program("for (let i = 1; i <= 80; i++) await program.emit(i); return null"),
                         None)
    assert len(env.events) == 64
    assert env.events[0].sequence == 17 and env.events[0].value == 17
    assert env.events[-1].sequence == 80 and env.next_sequence == 81


async def test_status_after_returns_only_newer_events(host: JevHost) -> None:
    env = await host.run(program("for (let i = 1; i <= 5; i++) await program.emit(i); return 0"),
                         None)
    later = host.envelope(env.id, after=3)
    assert [e.sequence for e in later.events] == [4, 5]


async def test_emit_over_4096_bytes_is_refused_catchably(host: JevHost) -> None:
    env = await host.run(program(
        "try { await program.emit('x'.repeat(5000)); } catch (e) { return e.message; }"), None)
    assert env.result == "emit argument exceeds 4096 bytes (line 1, column 30)"
    env = await host.run(program(
        "try { await program.emit('é'.repeat(2048)); } catch (e) { return e.message; }"), None)
    # The column counts characters, not the engine's UTF-8 bytes ('é' is two).
    assert env.result == "program.emit value exceeds 4096 bytes (line 1, column 30)"


async def test_logs_are_capped_with_one_marker(host: JevHost) -> None:
    env = await host.run(program(
        "for (let i = 0; i < 100; i++) console.log('x'.repeat(100)); console.warn('w'); return 0"),
        None)
    assert env.logs[-1] == "[logs truncated]"
    assert sum(len(line) for line in env.logs[:-1]) == 4096
    assert env.logs.count("[logs truncated]") == 1


async def test_console_formats_values(host: JevHost) -> None:
    env = await host.run(program("console.log('a', 1, {b: 2}); console.error('e'); return 0"), None)
    assert env.logs == ("a 1 {\"b\":2}", "[error] e")


@pytest.mark.parametrize("ms", ["-1", "NaN", "Infinity", "'5'", "61000"])
async def test_invalid_sleep_durations(host: JevHost, ms: str) -> None:
    env = await host.run(program(
        f"try {{ await program.sleep({ms}); return 'slept'; }} catch (e) {{ return e.message; }}",
        limits={"timeoutMs": 60_000}), None)
    assert env.result.startswith("Invalid program.sleep duration (line 1, column ")


async def test_deadline_ends_timed_out(host: JevHost) -> None:
    env = await host.run(program("for (;;) await program.sleep(100);", limits={"timeoutMs": 150}), None)
    assert env.state is RunState.TIMED_OUT and env.error == "Jev deadline of 150 ms exceeded"


async def test_stop_is_idempotent_and_cancels(host: JevHost) -> None:
    env = await host.spawn(program("await program.sleep(10000); return 1"), None)
    first = await host.stop(env.id)
    second = await host.stop(env.id)
    assert first.state is RunState.CANCELLED and first.error is None
    assert second.model_dump() == first.model_dump()


async def test_cancelled_wait_leaves_the_run_running(host: JevHost) -> None:
    env = await host.spawn(program("await program.sleep(200); return 'done'"), None)
    with anyio.move_on_after(0.01):
        await host.wait(env.id)
    assert host.envelope(env.id).state is RunState.RUNNING
    assert (await host.wait(env.id)).result == "done"


async def test_cancelled_foreground_run_cancels_the_run(host: JevHost) -> None:
    # Cancelled once the run has certainly started (its first event), however slow the launch.
    with anyio.CancelScope() as scope:
        await host.run(program("await program.emit('started'); await program.sleep(10000); return 1"),
                       None, on_event=lambda event: scope.cancel())
    assert scope.cancelled_caught
    [summary] = host.status().runs
    assert host.envelope(summary.id).state is RunState.CANCELLED


async def test_launch_by_an_already_cancelled_caller_is_rejected(host: JevHost) -> None:
    with anyio.CancelScope() as scope:
        scope.cancel()
        await host.spawn(program("return 1"), None)
    assert host.status().runs == ()


async def test_pruned_ids_give_the_expired_error() -> None:
    async with JevHost(HostConfig(max_retained_runs=2)) as host:
        ids = [(await host.run(program(f"return {i}"), None)).id for i in range(3)]
        with pytest.raises(UnknownRun, match="Unknown or expired Jev run ID"):
            host.envelope(ids[0])
        assert host.envelope(ids[2]).result == 2
        with pytest.raises(UnknownRun, match="Unknown or expired Jev run ID"):
            await host.wait(str(uuid.uuid4()))


async def test_close_cancels_running_runs_and_clears_history() -> None:
    host = JevHost()
    ended: list[Envelope] = []

    async def watch(id: str) -> None:
        ended.append(await host.wait(id))

    async with anyio.create_task_group() as tg, host:
        env = await host.spawn(program("await program.sleep(10000)"), None)
        tg.start_soon(watch, env.id)
        await anyio.wait_all_tasks_blocked()  # the watcher is now waiting on the run, however slow its start
    assert ended[0].state is RunState.CANCELLED
    with pytest.raises(UnknownRun):
        host.envelope(env.id)
    with pytest.raises(HostClosed):
        await host.spawn(program("return 1"), None)


@pytest.mark.parametrize(("raw", "error", "needle"), [
    (program("return 1", extra=1), ProgramInvalid, "extra"),
    (program("return 1", inputSchema={"$ref": "#"}), SchemaInvalid, "inputSchema"),
    (program("return 1", requires=["jev.run"]), CapabilityError, "lifecycle"),
    (program("return 1", requires=["jev.spawn"]), CapabilityError, "recursive"),
    (program("return 1", requires=["jev.advise"]), CapabilityError, "observe"),
    (program("return 1", requires=["browser.cdp"]), CapabilityError, "Missing capability"),
])
async def test_launch_rejections(host: JevHost, raw: dict[str, Any], error: type[Exception],
                                 needle: str) -> None:
    with pytest.raises(error, match=needle):
        await host.spawn(raw, None)
    assert host.status().runs == ()


async def test_input_must_match_its_schema(host: JevHost) -> None:
    with pytest.raises(InputInvalid, match="input does not match its declared schema"):
        await host.run(program("return 1", inputSchema={"type": "string"}), 5)
    with pytest.raises(InputInvalid, match="input exceeds 32768 bytes"):
        await host.run(program("return 1"), "x" * 40_000)
    with pytest.raises(InputInvalid, match="input is not finite JSON"):
        await host.run(program("return 1"), float("nan"))


async def test_observe_on_run_is_rejected(host: JevHost) -> None:
    # `run` takes no `observe`; the launch check that every launch passes refuses it for a
    # foreground run all the same (checked here with the host's own registry, gate and config).
    from fabric_jev.host.launch import admit

    with pytest.raises(ProgramInvalid, match="observe"):
        await admit(program("return 1"), None, background=False, observe={"events": []}, intent=None,
                    grant=None, capabilities=host.capabilities, gate=host.policy, session_bound=False,
                    config=host.config)


# ---------------------------------------------------------------- budgets


async def test_tool_call_budget_and_rethrow(host: JevHost) -> None:
    env = await host.run(program("""
      const errors = [];
      for (let i = 0; i < 5; i++) {
        try { await program.emit(i); } catch (e) { errors.push(e.message); }
      }
      return errors;
    """, limits={"maxToolCalls": 2}), None)
    assert env.state is RunState.FAILED
    assert env.error == "Jev tool-call budget of 2 exhausted"
    assert env.result is None
    assert env.tool_calls == 2 and len(env.events) == 2


async def test_caught_budget_error_and_retry_still_fails(host: JevHost) -> None:
    env = await host.run(program("""
      const req = {state: 'x', questions: {q: {type: 'noul', instructions: 'Yes?'}}};
      let caught = 0;
      for (let i = 0; i < 3; i++) {
        try { await jev.evaluate(req); } catch (e) { caught++; }
      }
      try { await program.sleep(1); } catch (e) { caught++; }
      return caught;
    """, requires=["jev.evaluate"], limits={"maxEvaluations": 1}), None)
    assert env.state is RunState.FAILED
    assert env.error == "Jev inference budget of 1 exhausted"
    assert env.evaluations == 1


async def test_zero_evaluations_allowed_means_none(host: JevHost) -> None:
    env = await host.run(program(EVALUATE, requires=["jev.evaluate"],
                                 limits={"maxEvaluations": 0}), None)
    # Not caught: the run's error is the guest's, which also says where the call was.
    assert env.state is RunState.FAILED and env.error == "Jev inference budget of 0 exhausted (line 1, column 18)"
    assert env.evaluations == 0


async def test_evaluate_returns_validated_answers_and_usage(host: JevHost) -> None:
    env = await host.run(program(EVALUATE, requires=["jev.evaluate"]), None)
    assert env.state is RunState.COMPLETED, env.error
    assert env.result["answers"] == {"q": {"type": "noul", "noul": 0.75}}
    assert env.evaluations == 1 and env.usage.input_tokens == 10 and env.usage.output_tokens == 2


async def test_token_budget_withholds_the_answer(host: JevHost) -> None:
    env = await host.run(program(f"""
      try {{ {EVALUATE} }} catch (e) {{ return 'withheld: ' + e.message; }}
    """, requires=["jev.evaluate"], limits={"maxTokens": 11}), None)
    assert env.state is RunState.FAILED
    assert env.error == "Jev reported-token budget of 11 exhausted"
    assert env.usage.input_tokens == 10 and env.usage.output_tokens == 2


async def test_one_evaluation_in_flight(host: JevHost) -> None:
    evaluator = host.evaluator
    assert isinstance(evaluator, FixtureEvaluator)
    env = await host.run(program("""
      const req = {state: 'x', questions: {q: {type: 'noul', instructions: 'Yes?'}}};
      const first = jev.evaluate(req);
      let second = 'sent';
      try { await jev.evaluate(req); } catch (e) { second = e.message; }
      await first;
      return second;
    """, requires=["jev.evaluate"]), None)
    assert env.state is RunState.COMPLETED, env.error
    assert env.result.startswith("Only one jev.evaluate may be in flight")
    assert evaluator.calls == 1 and env.evaluations == 1


async def test_evaluate_needs_the_grant(host: JevHost) -> None:
    env = await host.run(program(f"try {{ {EVALUATE} }} catch (e) {{ return e.message; }}"), None)
    assert env.result == "Capability not granted to Jev program: jev.evaluate (line 1, column 24)"


async def test_invalid_evaluate_request_is_a_catchable_error(host: JevHost) -> None:
    env = await host.run(program("""
      try { await jev.evaluate({state: 'x', questions: {q: {type: 'text', instructions: 'Say'}}}); }
      catch (e) { return e.message; }
    """, requires=["jev.evaluate"]), None)
    assert "choice, score and noul only" in env.result


# ---------------------------------------------------------------- capabilities


async def test_tools_call_reaches_exactly_the_declared_ref() -> None:
    registry = CapabilityRegistry()
    seen: list[Any] = []

    async def echo(args: Any, ctx: Any) -> Any:
        seen.append((args, ctx.ref))
        return {"echo": args}

    registry.register("demo.echo", echo, "read")
    registry.register("demo.other", echo, "read")
    async with JevHost(capabilities=registry) as host:
        env = await host.run(program("""
          const a = await tools.call({ref: 'demo.echo', args: {n: 1}});
          let b;
          try { await tools.call({ref: 'demo.other', args: {}}); } catch (e) { b = e.message; }
          return {a, b};
        """, requires=["demo.echo"]), None)
    assert env.result == {"a": {"echo": {"n": 1}},
                          "b": "Capability not granted to Jev program: demo.other (line 4, column 29)"}
    assert seen == [({"n": 1}, "demo.echo")]


async def test_failing_handler_gives_a_message_not_a_trace() -> None:
    registry = CapabilityRegistry()

    async def broken(args: Any, ctx: Any) -> Any:
        raise RuntimeError("disk on fire")

    registry.register("demo.broken", broken, "read")
    async with JevHost(capabilities=registry) as host:
        env = await host.run(program(
            "try { await tools.call({ref: 'demo.broken'}); } catch (e) { return e.message; }",
            requires=["demo.broken"]), None)
    assert env.result == "demo.broken failed: disk on fire (line 1, column 19)"


async def test_registry_refuses_reserved_and_duplicate_refs() -> None:
    registry = CapabilityRegistry()

    async def h(args: Any, ctx: Any) -> Any:
        return None

    with pytest.raises(CapabilityError, match="reserved"):
        registry.register("jev.evaluate", h)
    registry.register("a.b", h)
    with pytest.raises(CapabilityError, match="already registered"):
        registry.register("a.b", h)


# ---------------------------------------------------------------- scale


async def test_64_concurrent_background_runs_complete() -> None:
    code = "let s = 0; for (let i = 0; i < 5; i++) { await program.sleep(5); s += i; } return s;"
    async with (JevHost(HostConfig(max_concurrent_runs=16, warm_workers=4)) as a,
                JevHost(HostConfig(max_concurrent_runs=16, warm_workers=4)) as b,
                JevHost(HostConfig(max_concurrent_runs=16, warm_workers=4)) as c,
                JevHost(HostConfig(max_concurrent_runs=16, warm_workers=4)) as d):
        spawned = [(h, await h.spawn(program(code), None)) for h in (a, b, c, d) for _ in range(16)]
        assert all(env.state is RunState.RUNNING for _, env in spawned)
        results = [await h.wait(env.id) for h, env in spawned]
    assert len(results) == 64
    assert all(r.state is RunState.COMPLETED and r.result == 10 for r in results)
