"""`wire_plain.plain_dump` writes what pydantic's `model_dump(mode="json")` writes, or declines
(None) and leaves it to pydantic: envelopes of real runs, JSON values of every kind, and the values
it must decline (docs/performance.md, "Start-up of run")."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from fabric_jev import CapabilityRegistry, HostConfig, JevHost
from fabric_jev.contract.envelope import ApprovalCounts, Envelope, ProgressEvent, RunState, Usage
from fabric_jev.contract.wire_model import WireModel, utc_now
from fabric_jev.contract.wire_plain import plain_dump
from fabric_jev.evaluators.fixture import FixtureEvaluator
from tests.conftest import program

pytestmark = pytest.mark.anyio


def same_as_pydantic(model: BaseModel) -> dict[str, Any]:
    plain = plain_dump(model)
    assert plain is not None, f"{type(model).__name__} was left to pydantic"
    written = model.model_dump(mode="json")
    assert plain == written
    # Equal as values and as bytes: the key order and every number's type are pydantic's.
    assert json.dumps(plain, ensure_ascii=False) == json.dumps(written, ensure_ascii=False)
    return plain


PROGRAMS = {
    "completed": program(
        "console.log('héllo', 2); program.emit({step: 1, note: 'ü ✓'}); program.emit([1, 2.5, null, true]);"
        "const a = await jev.evaluate({state: 'x', questions: {q: {type: 'noul', instructions: 'ok?'}}}); console.log(JSON.stringify(a));"
        "await tools.call({ref: 'demo.read', args: {}});"
        "return {a: a.answers.q.noul, list: [1, -2.5, 'z', null, false, {}], nested: {'': [[]]}, big: 9007199254740991, float: 0.1}",
        requires=["jev.evaluate", "demo.read"]),
    "failed": program("program.emit('before'); throw new Error('boom ✗')"),
    "null result": program("return null"),
    "limits": program("return 'x'.repeat(3)", limits={"timeoutMs": 5000, "maxEvaluations": 0}),
}


async def test_envelopes_of_real_runs_are_written_as_pydantic_writes_them() -> None:
    registry = CapabilityRegistry()

    async def read(args: Any, ctx: Any) -> dict[str, Any]:
        return {"ok": True}

    registry.register("demo.read", read, "read")
    evaluator = FixtureEvaluator({"answers": {"q": {"noul": 0.75}}, "usage": {"input_tokens": 10, "output_tokens": 2}})
    async with JevHost(HostConfig(max_concurrent_runs=8), evaluator=evaluator, capabilities=registry) as host:
        written = {}
        for name, artifact in PROGRAMS.items():
            env = await host.run(artifact, None)
            written[name] = same_as_pydantic(env)
            same_as_pydantic(host.envelope(env.id, after=1))
        sleeper = await host.spawn(program("await program.sleep(10000); return 1"), None)
        same_as_pydantic(sleeper)  # running: no endedAt, no result
        await host.stop(sleeper.id)
        same_as_pydantic(host.envelope(sleeper.id))
    # The envelope's own rules were applied, not only copied: what each run shows and leaves out.
    assert written["completed"]["result"]["big"] == 9007199254740991 and written["completed"]["result"]["float"] == 0.1
    assert written["completed"]["approvals"] and "approvalCounts" in written["completed"]
    assert written["completed"]["evaluator"]["route"] == "fixture"
    assert "result" not in written["failed"] and written["failed"]["error"].startswith("Error: boom ✗")
    assert written["null result"]["result"] is None and "approvalCounts" not in written["null result"]


def _envelope(**values: Any) -> Envelope:
    base: dict[str, Any] = {"id": "r1", "name": "n", "state": RunState.COMPLETED, "background": False,
                            "started_at": utc_now()}
    return Envelope.model_construct(**{**base, **values})


JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(
    alphabet=st.characters(codec=None, categories=None), max_size=8)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(alphabet=st.characters(codec=None, categories=None), max_size=4), inner, max_size=4),
    max_leaves=12)


def _utf8(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (UnicodeEncodeError, ValueError):
        return False
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(result=JSON_VALUES, event=JSON_VALUES, log=st.text(alphabet=st.characters(codec=None, categories=None)))
@example(result="\ud800", event=1, log="")
@example(result=float("nan"), event=1, log="")
@example(result={"k": float("inf")}, event=1, log="")
@example(result=1, event=1, log="a\udfffb")
def test_json_values_are_written_as_pydantic_writes_them_or_left_to_it(result: Any, event: Any, log: str) -> None:
    env = _envelope(result=result, logs=(log,),
                    events=(ProgressEvent.model_construct(sequence=1, at=utc_now(), value=event),))
    plain = plain_dump(env)
    try:
        written = env.model_dump(mode="json")
    except PydanticSerializationError:
        assert plain is None  # a value pydantic refuses is refused by pydantic, in its words
        return
    if _utf8([result, event, log]):
        assert plain == written
        assert json.dumps(plain) == json.dumps(written)
    else:
        assert plain is None  # NaN, Infinity, a lone surrogate: pydantic's own handling, not a copy


def test_times_are_written_in_utc_to_the_millisecond() -> None:
    at = datetime(2026, 1, 31, 9, 30, 0, 123000, tzinfo=timezone(timedelta(hours=2)))
    env = _envelope(started_at=at, ended_at=at.astimezone(UTC))
    assert same_as_pydantic(env)["startedAt"] == "2026-01-31T07:30:00.123Z"


@pytest.mark.parametrize("values", [
    {"state": "completed"},  # a str where the field holds a RunState
    {"evaluations": True},  # a bool where it holds an int
    {"events": [ProgressEvent.model_construct(sequence=1, at=utc_now(), value=1)]},  # a list, not a tuple
    {"usage": {"input_tokens": 1, "output_tokens": 2}},  # a dict, not the model
    {"started_at": datetime(2026, 1, 1)},  # naive
    {"approval_counts": type("Counts", (ApprovalCounts,), {})(allowed=1, denied=0)},  # a subclass
], ids=["str-state", "bool-int", "list-tuple", "dict-model", "naive-time", "subclass"])
def test_a_value_of_another_type_than_its_field_is_left_to_pydantic(values: dict[str, Any]) -> None:
    assert plain_dump(_envelope(**values)) is None


def test_a_model_with_a_field_serializer_or_extra_fields_is_left_to_pydantic() -> None:
    from pydantic import ConfigDict, field_serializer

    class Sorted(WireModel):
        items: list[str]

        @field_serializer("items")
        def _sorted(self, items: list[str]) -> list[str]:
            return sorted(items)

    class Open(WireModel):
        model_config = ConfigDict(extra="allow")
        a: int = 0

    assert plain_dump(Sorted(items=["b", "a"])) is None
    assert plain_dump(Open.model_validate({"a": 1, "b": 2})) is None
    assert plain_dump(Usage(input_tokens=1, output_tokens=2)) == {"input_tokens": 1, "output_tokens": 2}


async def test_to_json_of_a_model_not_yet_built_builds_no_schema() -> None:
    # In a fresh process: this one's Envelope may have been built by an earlier test.
    code = "\n".join([
        "from fabric_jev.contract.envelope import Envelope, RunState",
        "from fabric_jev.contract.wire_model import utc_now",
        "env = Envelope.model_construct(id='r', name='n', state=RunState.FAILED, background=True,",
        "                               started_at=utc_now(), error='e', logs=('x',))",
        "out = env.to_json()",
        "print(Envelope.__pydantic_complete__, sorted(out), out['error'])",
    ])
    import sys

    done = await anyio.run_process([sys.executable, "-c", code], check=True)
    shown = done.stdout.decode().split()
    assert shown[0] == "False"
    assert "result" not in shown and "'state'," in shown and shown[-1] == "e"


def _public_models() -> list[BaseModel]:
    from fabric_jev import EvaluatorStatus
    from fabric_jev.contract.program import parse_program
    from fabric_jev.contract.provenance import Provenance
    from fabric_jev.evaluators.base import CredentialStatus, ProfileStatus
    from fabric_jev.evaluators.select import select

    config = HostConfig.model_validate(
        {"maxConcurrentRuns": 3, "defaults": {"timeoutMs": 500}, "allow": ["demo.read"], "evaluator": {"kind": "local"},
         "connectors": {"browser": {"wsUrl": "ws://x", "allowedMethods": ["Runtime.evaluate"]}}}, by_alias=True)
    return [
        HostConfig(), config,
        parse_program({"name": "p", "code": "return 1", "inputSchema": {"type": "object"}, "outputSchema": {},
                       "requires": ["jev.evaluate"], "limits": {"maxTokens": 3}, "language": "typescript"}),
        EvaluatorStatus("local", "m", CredentialStatus(configured=True, source="environment"), problem="no",
                        profile=ProfileStatus(name="p", signatures=1, examples=2), mode="online"),
        Provenance(route="r", model="m", readout="mixed", answerers=(
            Provenance(route="a", model="b", readout="logprobs", temperatures={"q": 1.5}, valid_mass={"q": 0.9},
                       low_mass=("q",)),)),
        select(None, HostConfig()), select("ollama:qwen3:8b", HostConfig()),
    ]


def test_the_other_wire_shapes_are_written_as_pydantic_writes_them_or_left_to_it() -> None:
    written = 0
    for model in _public_models():
        plain = plain_dump(model)
        if plain is not None:
            assert json.dumps(plain) == json.dumps(model.model_dump(mode="json")), type(model).__name__
            written += 1
    assert written >= 4  # the program, both provenances' model, the selections
