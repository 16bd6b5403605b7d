"""OpenTelemetry traces: the spans of real runs (QuickJS workers, the jevcompat mock server, an
approver), read from the SDK's in-memory exporter; what they hold, and that no secret does."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import SpanKind, StatusCode

from fabric_jev import CapabilityCall, CapabilityRegistry, FixtureEvaluator, HostConfig, JevHost
from fabric_jev.evaluators import TYPESAFE, AuthStore, CredentialResolver, HttpEvaluator
from fabric_jev.host.registry import CallContext
from fabric_jev.telemetry import CAPTURE_CONTENT_ENV, MAX_CONTENT_CHARS, run_error_type, shown
from tests.conftest import program
from tests.upstream import mock

pytestmark = pytest.mark.anyio

API_KEY = "sk-telemetry-0123456789abcdefghijklmnopqrstuv"  # the evaluator's key, from its environment
INPUT_TOKEN = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"  # a secret in the run's input
ARG_PASSWORD = "hunter2-correct-horse"  # a secret in a capability call's arguments
NOTE = "plain-input-note-4711"  # input that is no secret: recorded only with content capture on
QUESTION = "Is the release note about ticket 4711 ready?"  # question text: the same

CODE = """
const judged = await jev.evaluate({state: {note: input.note},
                                   questions: {ready: {type: 'noul', instructions: input.question}}});
const wrote = await tools.call({ref: 'demo.write', args: {n: 1, password: input.password, note: input.note}});
return {ready: judged.answers.ready.noul > 0.5, wrote: wrote.wrote};
"""
INPUT = {"note": NOTE, "question": QUESTION, "password": ARG_PASSWORD, "token": INPUT_TOKEN}
SECRETS = (API_KEY, INPUT_TOKEN, ARG_PASSWORD)


class Switch(Sampler):
    """Samples while a test of this file is on, and nothing otherwise: the rest of the suite,
    which shares this process's provider, makes no span."""

    on = False
    #: Told each span's name as it starts (a test's hook into the moment a span begins).
    starting: Callable[[str], None] | None = None

    def should_sample(self, parent_context: Context | None, trace_id: int, name: str,
                      kind: SpanKind | None = None, attributes: Any = None, links: Any = None,
                      trace_state: Any = None) -> SamplingResult:
        if Switch.on and Switch.starting is not None:
            Switch.starting(name)
        return SamplingResult(Decision.RECORD_AND_SAMPLE if Switch.on else Decision.DROP, attributes)

    def get_description(self) -> str:
        return "Switch"


EXPORTER = InMemorySpanExporter()


def _install() -> None:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider(sampler=Switch())
        trace.set_tracer_provider(provider)
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _install()
    EXPORTER.clear()
    Switch.on = True
    try:
        yield EXPORTER
    finally:
        Switch.on, Switch.starting = False, None
        EXPORTER.clear()


async def write(args: Any, ctx: CallContext) -> Any:
    with trace.get_tracer("test").start_as_current_span("handler's own"):
        return {"wrote": args["n"]}


def registry() -> CapabilityRegistry:
    reg = CapabilityRegistry()
    reg.register("demo.write", write, "write")
    return reg


def evaluator(url: str, tmp: Path, key: str = API_KEY) -> HttpEvaluator:
    env = {"TYPESAFE_API_KEY": key}
    return HttpEvaluator(TYPESAFE, base_urls={"typesafe": url}, environ=env,
                         credentials=CredentialResolver(TYPESAFE, store=AuthStore(tmp / "auth.json"), environ=env))


async def allow(call: CapabilityCall) -> str:
    with trace.get_tracer("test").start_as_current_span("approver's own"):
        return "allow"


def everything(found: Sequence[ReadableSpan]) -> str:
    """Every name, attribute, event and status a span holds, as one text to search."""
    parts = []
    for span in found:
        parts.append(span.name)
        parts.append(json.dumps(dict(span.attributes or {}), default=str))
        parts.append(span.status.description or "")
        for event in span.events:
            parts.append(event.name)
            parts.append(json.dumps(dict(event.attributes or {}), default=str))
    return "\n".join(parts)


def by_name(found: Sequence[ReadableSpan]) -> dict[str, ReadableSpan]:
    named = {span.name: span for span in found}
    assert len(named) == len(found), [span.name for span in found]
    return named


async def traced_run(tmp: Path, url: str) -> Any:
    async with JevHost(capabilities=registry(), evaluator=evaluator(url, tmp), approver=allow) as host:
        return await host.run(program(CODE, name="telemetry-demo", requires=["jev.evaluate", "demo.write"]),
                              INPUT)


async def test_one_run_with_an_evaluation_and_an_approval_as_spans(spans: InMemorySpanExporter,
                                                                   tmp_path: Path) -> None:
    with mock(key=API_KEY) as url:
        env = await traced_run(tmp_path, url)
    assert env.state == "completed", env.error
    found = spans.get_finished_spans()
    assert sorted(span.name for span in found) == [
        "approve demo.write", "approver's own", "evaluate jev-latest", "execute_tool demo.write", "handler's own",
        "invoke_workflow telemetry-demo"]
    named = by_name(found)
    # The approver's and the handler's own spans sit below the approval and the call.
    assert named["approver's own"].parent.span_id == named["approve demo.write"].context.span_id  # type: ignore[union-attr]
    assert named["handler's own"].parent.span_id == named["execute_tool demo.write"].context.span_id  # type: ignore[union-attr]
    found = [span for span in found if not span.name.endswith("own")]
    run = named["invoke_workflow telemetry-demo"]
    evaluate, tool, approve = named["evaluate jev-latest"], named["execute_tool demo.write"], named["approve demo.write"]
    # The tree: one trace, the run at its root, the approval below the call it decided.
    assert run.parent is None
    assert {span.context.trace_id for span in found} == {run.context.trace_id}
    assert evaluate.parent is not None and evaluate.parent.span_id == run.context.span_id
    assert tool.parent is not None and tool.parent.span_id == run.context.span_id
    assert approve.parent is not None and approve.parent.span_id == tool.context.span_id
    assert all(span.attributes is not None and span.attributes["fabric_jev.run.id"] == env.id for span in found)
    # Each span lies within its parent's time, and the evaluation came before the tool call.
    assert run.start_time is not None and run.end_time is not None
    for child, parent in ((evaluate, run), (tool, run), (approve, tool)):
        assert parent.start_time <= child.start_time <= child.end_time <= parent.end_time  # type: ignore[operator]
    assert evaluate.end_time <= tool.start_time  # type: ignore[operator]

    assert dict(run.attributes or {}) == {
        "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "telemetry-demo",
        "fabric_jev.run.id": env.id, "fabric_jev.program.name": "telemetry-demo",
        "fabric_jev.program.digest": run.attributes and run.attributes["fabric_jev.program.digest"],
        "fabric_jev.run.background": False, "fabric_jev.run.state": "completed",
        "fabric_jev.run.evaluations": 1, "fabric_jev.run.tool_calls": env.tool_calls,
        "gen_ai.usage.input_tokens": env.usage.input_tokens, "gen_ai.usage.output_tokens": env.usage.output_tokens,
    }
    import hashlib

    assert run.attributes["fabric_jev.program.digest"] == \
        "sha256:" + hashlib.sha256(CODE.encode()).hexdigest()  # type: ignore[index]
    assert run.status.status_code is StatusCode.UNSET and run.kind is SpanKind.INTERNAL

    assert evaluate.kind is SpanKind.CLIENT
    assert dict(evaluate.attributes or {}) == {
        "fabric_jev.run.id": env.id, "fabric_jev.capability.ref": "jev.evaluate",
        "fabric_jev.capability.risk": "read", "gen_ai.operation.name": "evaluate", "gen_ai.system": "typesafe",
        "gen_ai.provider.name": "typesafe", "gen_ai.request.model": "jev-latest", "gen_ai.output.type": "json",
        "fabric_jev.evaluation.questions": 1, "fabric_jev.evaluation.question_types": ("noul",),
        "fabric_jev.approval.policy": "allow", "fabric_jev.approval.decided_by": "policy",
        "fabric_jev.approval.allowed": True,
        "gen_ai.usage.input_tokens": env.usage.input_tokens, "gen_ai.usage.output_tokens": env.usage.output_tokens,
        "gen_ai.response.model": "jevcompat-mock-0.1", "fabric_jev.evaluation.readout": "systemone",
        "fabric_jev.evaluation.route": "typesafe",
    }
    assert env.usage.input_tokens > 0 and env.usage.output_tokens > 0

    decision = {"fabric_jev.approval.policy": "ask", "fabric_jev.approval.decided_by": "approver",
                "fabric_jev.approval.allowed": True, "fabric_jev.approval.approver": "application"}
    assert dict(tool.attributes or {}) == {
        "fabric_jev.run.id": env.id, "fabric_jev.capability.ref": "demo.write", "fabric_jev.capability.risk": "write",
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "demo.write", "gen_ai.tool.type": "function",
        **decision}
    assert dict(approve.attributes or {}) == {"fabric_jev.run.id": env.id, "fabric_jev.capability.ref": "demo.write",
                                              **decision}
    assert all(span.status.status_code is StatusCode.UNSET for span in found)

    # Content capture is off: no secret, and neither the input nor the question's text.
    text = everything(found)
    for needle in (*SECRETS, NOTE, QUESTION, "4711"):
        assert needle not in text


async def test_content_capture_records_content_redacted(spans: InMemorySpanExporter, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    with mock(key=API_KEY) as url:
        env = await traced_run(tmp_path, url)
    assert env.state == "completed", env.error
    named = by_name(spans.get_finished_spans())
    run, evaluate = named["invoke_workflow telemetry-demo"].attributes, named["evaluate jev-latest"].attributes
    tool, approve = named["execute_tool demo.write"].attributes, named["approve demo.write"].attributes
    assert run is not None and evaluate is not None and tool is not None and approve is not None
    shown_input = json.loads(str(run["fabric_jev.run.input"]))
    assert shown_input["note"] == NOTE and shown_input["question"] == QUESTION
    assert shown_input["password"] == "[redacted: password value]" and INPUT_TOKEN not in shown_input["token"]
    assert json.loads(str(run["fabric_jev.run.result"])) == env.result
    request = json.loads(str(evaluate["fabric_jev.evaluation.request"]))
    assert request["questions"]["ready"]["instructions"] == QUESTION and request["state"] == {"note": NOTE}
    assert set(json.loads(str(evaluate["fabric_jev.evaluation.answers"]))) == {"ready"}
    arguments = json.loads(str(tool["gen_ai.tool.call.arguments"]))
    assert arguments == {"n": 1, "password": "[redacted: password value]", "note": NOTE}
    assert json.loads(str(tool["gen_ai.tool.call.result"])) == {"wrote": 1}
    assert approve["fabric_jev.approval.reason"] == "the approver allowed it"
    text = everything(spans.get_finished_spans())
    for secret in SECRETS:
        assert secret not in text


async def test_failures_are_errors_named_by_their_class(spans: InMemorySpanExporter, tmp_path: Path) -> None:
    code = """
    try { await jev.evaluate({state: 's', questions: {q: {type: 'noul', instructions: input.question}}}); }
    catch (e) { }
    try { await tools.call({ref: 'demo.write', args: {n: 1}}); } catch (e) { }
    null.boom(input.note);
    """
    config = HostConfig(approvals={"write": "deny"})
    with mock(key=API_KEY) as url:  # the evaluator's key is wrong: the server refuses it
        async with JevHost(config, capabilities=registry(), evaluator=evaluator(url, tmp_path, "sk-wrong-key-4711")) \
                as host:
            env = await host.run(program(code, name="failing", requires=["jev.evaluate", "demo.write"]), INPUT)
    assert env.state == "failed" and env.error is not None and env.error.startswith("TypeError")
    named = by_name(spans.get_finished_spans())
    run, evaluate, tool = named["invoke_workflow failing"], named["evaluate jev-latest"], named["execute_tool demo.write"]
    assert run.status.status_code is StatusCode.ERROR and run.status.description is None
    assert run.attributes is not None and run.attributes["error.type"] == "TypeError"
    assert run.attributes["fabric_jev.run.state"] == "failed"
    assert evaluate.status.status_code is StatusCode.ERROR
    assert evaluate.attributes is not None and evaluate.attributes["error.type"] == "UpstreamError"
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes is not None and tool.attributes["error.type"] == "denied"
    assert tool.attributes["fabric_jev.approval.decided_by"] == "policy"
    assert tool.attributes["fabric_jev.approval.allowed"] is False
    assert "approve demo.write" not in named  # a deny policy decides at once: no approval span
    text = everything(spans.get_finished_spans())
    for needle in (*SECRETS, "sk-wrong-key-4711", NOTE, QUESTION):
        assert needle not in text


async def test_a_stopped_run_ends_its_waiting_approval(spans: InMemorySpanExporter) -> None:
    asked = anyio.Event()

    async def waiting(call: CapabilityCall) -> str:
        asked.set()
        await anyio.sleep_forever()
        return "allow"

    async with JevHost(capabilities=registry(), approver=waiting) as host:
        run = await host.spawn(program("await tools.call({ref: 'demo.write', args: {n: 1}});",
                                       name="stopped", requires=["demo.write"]), None)
        await asked.wait()
        env = await host.stop(run.id)
    assert env.state == "cancelled"
    named = by_name(spans.get_finished_spans())
    assert set(named) == {"invoke_workflow stopped", "execute_tool demo.write", "approve demo.write"}
    for name in ("execute_tool demo.write", "approve demo.write"):
        attributes = named[name].attributes
        assert attributes is not None and attributes["fabric_jev.cancelled"] is True
    run_span = named["invoke_workflow stopped"]
    assert run_span.status.status_code is StatusCode.UNSET  # cancelled is no error (contract §2)
    assert run_span.attributes is not None and run_span.attributes["fabric_jev.run.state"] == "cancelled"
    assert run_span.attributes["fabric_jev.run.background"] is True


async def test_the_callers_span_is_the_runs_parent_and_unsampled_runs_make_no_span(
        spans: InMemorySpanExporter) -> None:
    tracer = trace.get_tracer("test")
    async with JevHost(evaluator=FixtureEvaluator({"answers": {}})) as host:  # runs without evaluations
        with tracer.start_as_current_span("caller") as caller:
            env = await host.run(program("return 1;", name="child"), None)
        assert env.state == "completed"
        named = by_name(spans.get_finished_spans())
        child = named["invoke_workflow child"]
        assert child.parent is not None and child.parent.span_id == caller.get_span_context().span_id
        spans.clear()
        Switch.on = False  # sampling off: the run's span is not recorded, and neither is anything below
        env = await host.run(program("return 2;", name="unsampled"), None)
    assert env.state == "completed" and env.result == 2
    assert spans.get_finished_spans() == ()


def test_without_opentelemetry_imported_nothing_imports_it(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import sys
        import anyio
        from fabric_jev import FixtureEvaluator, JevHost
        from fabric_jev.testing import InProcessWorkers

        async def main():
            async with JevHost(evaluator=FixtureEvaluator({"answers": {}}), workers=InProcessWorkers()) as host:
                env = await host.run({"name": "p", "code": "return 1;", "inputSchema": {}, "outputSchema": {}}, None)
            assert env.state == "completed", env.error

        anyio.run(main)
        print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


ERROR_TYPES = {"timeout", "budget_exhausted", "host_error", "compile_error", "output_invalid", "failed", "Error", "TypeError",
               "RangeError", "ReferenceError", "SyntaxError", "EvalError", "URIError", "AggregateError",
               "InternalError"}


@settings(max_examples=40, deadline=None, derandomize=True)
@given(state=st.sampled_from(["failed", "timed_out"]), error=st.one_of(st.none(), st.text(max_size=80)),
       budget=st.one_of(st.none(), st.text(max_size=20)))
def test_a_runs_error_type_is_a_category_never_its_message(state: str, error: str | None,
                                                           budget: str | None) -> None:
    assert run_error_type(state, error, budget) in ERROR_TYPES


@pytest.mark.parametrize(("error", "expected"), [
    ("TypeError: cannot read property 'boom' of null (line 4, column 5)", "TypeError"),
    ("Error: sk-secret-in-a-message", "Error"),
    ("SecretTokenError: x", "failed"),  # a class of the guest's own: its name is the guest's text
    ("Jev host error: RuntimeError: x", "host_error"),
    ("Jev program does not compile: SyntaxError: unexpected token (line 1, column 2)", "compile_error"),
    ("output does not match its declared schema", "output_invalid"),
])
def test_run_error_types(error: str, expected: str) -> None:
    assert run_error_type("failed", error, None) == expected


async def test_a_batchs_runs_are_children_of_the_callers_span(spans: InMemorySpanExporter) -> None:
    from fabric_jev.batch import batch

    tracer = trace.get_tracer("test")
    evaluator = FixtureEvaluator({"answers": {"q": {"noul": 0.75}}, "usage": {"input_tokens": 3, "output_tokens": 1}})
    code = "return (await jev.evaluate({state: 's', questions: {q: {type: 'noul', instructions: 'q?'}}})).answers.q.noul;"
    with tracer.start_as_current_span("my batch") as parent:
        outcomes = [outcome async for outcome in batch(program(code, name="batched", requires=["jev.evaluate"]),
                                                        [1, 2, 3], evaluator=evaluator, concurrency=2)]
    assert sorted(outcome.state for outcome in outcomes) == ["completed"] * 3
    found = spans.get_finished_spans()
    runs = [span for span in found if span.name == "invoke_workflow batched"]
    evaluations = [span for span in found if span.name == "evaluate fixture"]
    assert len(runs) == 3 and len(evaluations) == 3
    assert all(run.parent is not None and run.parent.span_id == parent.get_span_context().span_id for run in runs)
    # Each evaluation is its own run's child, with that run's id.
    run_ids = {run.context.span_id: (run.attributes or {})["fabric_jev.run.id"] for run in runs}
    assert len(set(run_ids.values())) == 3
    for evaluation in evaluations:
        assert evaluation.parent is not None
        assert (evaluation.attributes or {})["fabric_jev.run.id"] == run_ids[evaluation.parent.span_id]
        assert (evaluation.attributes or {})["gen_ai.usage.input_tokens"] == 3


JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=40),
                    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
                    max_leaves=40)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(value=JSON, where=st.integers(0, 5), long=st.booleans())
def test_content_as_a_span_holds_it_is_redacted_and_bounded(value: Any, where: int, long: bool) -> None:
    # A secret planted in a random input, which may be far past the cut.
    planted: Any = {"note": "x" * (5_000 if long else 3), "value": value}
    planted[f"k{where}"] = f"token {INPUT_TOKEN} here"
    text = shown(planted)
    assert len(text) <= MAX_CONTENT_CHARS
    assert INPUT_TOKEN not in text
    if not long and len(text) < MAX_CONTENT_CHARS:
        assert json.loads(text)["note"] == "xxx"  # whole JSON when it fits


async def test_a_run_launched_by_a_capability_call_is_its_child(spans: InMemorySpanExporter) -> None:
    hosts: list[JevHost] = []

    async def launch(args: Any, ctx: CallContext) -> Any:
        env = await hosts[0].run(program("return 7;", name="nested"), None)
        return env.result

    reg = CapabilityRegistry()
    reg.register("demo.launch", launch, "read")
    async with JevHost(HostConfig(max_concurrent_runs=2, approvals={"agent": "allow"}), capabilities=reg,
                       evaluator=FixtureEvaluator({"answers": {}})) as host:
        hosts.append(host)
        env = await host.run(program("return await tools.call({ref: 'demo.launch'});", name="outer",
                                     requires=["demo.launch"]), None)
    assert env.state == "completed" and env.result == 7, env.error
    named = by_name(spans.get_finished_spans())
    nested, call = named["invoke_workflow nested"], named["execute_tool demo.launch"]
    assert nested.parent is not None and nested.parent.span_id == call.context.span_id
    assert (nested.attributes or {})["fabric_jev.run.id"] != (call.attributes or {})["fabric_jev.run.id"] == env.id


async def test_a_launch_that_does_not_compile_ends_its_runs_span(spans: InMemorySpanExporter) -> None:
    from fabric_jev import CompileError

    async with JevHost() as host:
        with pytest.raises(CompileError):
            await host.run(program("return (;", name="broken"), None)
    named = by_name(spans.get_finished_spans())
    assert set(named) == {"invoke_workflow broken"}  # ended, not left open
    run = named["invoke_workflow broken"]
    assert run.status.status_code is StatusCode.ERROR and run.status.description is None
    assert run.attributes is not None and run.attributes["fabric_jev.run.state"] == "failed"


async def test_a_failing_status_does_not_fail_a_traced_run(spans: InMemorySpanExporter) -> None:
    from tests.test_host_errors import ASK, StatusRaises

    async with JevHost(HostConfig(), evaluator=StatusRaises()) as host:
        env = await host.run(ASK, None)
    assert env.state == "completed" and env.error is None and env.result == 0.25
    evaluate = next(s for s in spans.get_finished_spans() if s.name.startswith("evaluate"))
    assert evaluate.attributes is not None and evaluate.attributes["gen_ai.request.model"] == "unknown"


async def test_a_launch_cancelled_by_its_caller_ends_its_span_cancelled(spans: InMemorySpanExporter) -> None:
    # Cancelled as its run's span starts: the launch, taking a worker, sees it. A cancelled run is no error.
    async with JevHost() as host:
        with anyio.CancelScope() as scope:
            Switch.starting = lambda name: scope.cancel() if name.startswith("invoke_workflow") else None
            await host.run(program("return 1", name="cancelled"), None)
        assert scope.cancelled_caught
    named = by_name(spans.get_finished_spans())
    assert set(named) == {"invoke_workflow cancelled"}  # ended, not left open
    run = named["invoke_workflow cancelled"]
    assert run.attributes is not None and run.attributes["fabric_jev.run.state"] == "cancelled"
    assert run.status.status_code is StatusCode.UNSET and "error.type" not in run.attributes
