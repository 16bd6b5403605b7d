"""Models are snake_case with `datetime` timestamps in Python; their JSON is the contract's, byte for byte.

The golden strings below were written by the models as they were before their
attributes were renamed (camelCase attributes, timestamps as strings): the
JSON every command, tool and file shows must not move by one byte.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import re
import subprocess
import sys
import typing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pydantic
import pytest

from fabric_jev import (
    CapabilityRegistry,
    Envelope,
    HostConfig,
    JevHost,
    ProgramInvalid,
    ProgressEvent,
    RunState,
    RunSummary,
    Usage,
)
from fabric_jev.batch import BatchOutcome
from fabric_jev.contract import parse_program
from fabric_jev.contract.envelope import ApprovalCounts
from fabric_jev.contract.wire_model import utc_time, wire_time
from fabric_jev.errors import ConfigError, DictionaryInvalid
from fabric_jev.verification import Plan, parse_dictionary
from fabric_jev.verification.digest import canonical, dictionary_digest
from tests.conftest import program
from tests.test_public_types import PACKAGES

ROOT = Path(__file__).resolve().parent.parent
#: ISO 8601, UTC, milliseconds, Z: the contract's one timestamp format.
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def at(ms: int) -> datetime:
    return datetime(2025, 1, 31, 9, 30, tzinfo=UTC) + timedelta(milliseconds=ms)


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


OBSERVATION = {"events": ["input"], "received": 1, "consumed": 1, "dropped": 0, "queued": 0, "adviceDelivered": 1,
               "adviceSuppressed": 0}
APPROVAL = {"sequence": 1, "at": "2025-01-31T09:30:00.500Z", "ref": "tools.x", "risk": "read", "policy": "allow",
            "decidedBy": "policy", "allowed": True, "reason": "r"}
FULL = Envelope(
    id="run-1", name="triage", state=RunState.COMPLETED, background=True, started_at=at(7), ended_at=at(1250),
    result={"label": "bug"}, evaluations=2, tool_calls=3, usage=Usage(input_tokens=120, output_tokens=7),
    events=(ProgressEvent(sequence=4, at=at(120), value={"step": "fetched", "n": 2}),), next_sequence=5,
    logs=("hello",), observation=OBSERVATION, approvals=(APPROVAL,), approval_counts={"allowed": 1, "denied": 0},
    typecheck={"language": "typescript", "mode": "warn", "outcome": "clean"})
FULL_JSON = (
    '{"id":"run-1","name":"triage","state":"completed","background":true,"startedAt":"2025-01-31T09:30:00.007Z",'
    '"endedAt":"2025-01-31T09:30:01.250Z","result":{"label":"bug"},"evaluations":2,"toolCalls":3,'
    '"usage":{"input_tokens":120,"output_tokens":7},"events":[{"sequence":4,"at":"2025-01-31T09:30:00.120Z",'
    '"value":{"step":"fetched","n":2}}],"nextSequence":5,"logs":["hello"],"observation":{"events":["input"],'
    '"received":1,"consumed":1,"dropped":0,"queued":0,"adviceDelivered":1,"adviceSuppressed":0},'
    '"approvals":[{"sequence":1,"at":"2025-01-31T09:30:00.500Z","ref":"tools.x","risk":"read","policy":"allow",'
    '"decidedBy":"policy","allowed":true,"reason":"r"}],"approvalCounts":{"allowed":1,"denied":0},'
    '"typecheck":{"language":"typescript","mode":"warn","outcome":"clean"}}')
FAILED = Envelope(id="run-2", name="triage", state=RunState.FAILED, background=False, started_at=at(0), error="boom")
FAILED_JSON = (
    '{"id":"run-2","name":"triage","state":"failed","background":false,"startedAt":"2025-01-31T09:30:00.000Z",'
    '"error":"boom","evaluations":0,"toolCalls":0,"usage":{"input_tokens":0,"output_tokens":0},"events":[],'
    '"nextSequence":1,"logs":[]}')


# ---------------------------------------------------------------------------------------------- envelope


def test_envelope_json_is_the_contract_byte_for_byte() -> None:
    assert compact(FULL.to_json()) == FULL_JSON
    assert compact(FAILED.to_json()) == FAILED_JSON


def test_every_dump_of_an_envelope_writes_contract_keys() -> None:
    dumped = FULL.model_dump(mode="json", by_alias=True)
    assert dumped == FULL.model_dump(mode="json") == json.loads(FULL.model_dump_json())
    assert {key: value for key, value in dumped.items() if value is not None} == json.loads(FULL_JSON)


def test_envelope_attributes_are_snake_case_and_timestamps_utc_datetimes() -> None:
    assert FULL.started_at == at(7) and FULL.ended_at == at(1250) and FULL.events[0].at == at(120)
    assert FULL.started_at.tzinfo is UTC
    assert (FULL.tool_calls, FULL.next_sequence, FULL.approval_counts) == (3, 5, ApprovalCounts(allowed=1, denied=0))


def test_an_envelope_reads_back_from_its_json() -> None:
    assert Envelope.model_validate(json.loads(FULL_JSON)) == FULL
    assert Envelope.model_validate_json(FAILED_JSON) == FAILED


def test_either_name_constructs_the_same_envelope() -> None:
    by_alias = Envelope(id="run-2", name="triage", state=RunState.FAILED, background=False,
                        startedAt="2025-01-31T09:30:00.000Z", error="boom")
    assert by_alias == FAILED


def test_timestamps_are_utc_to_the_millisecond_and_never_naive() -> None:
    paris = timezone(timedelta(hours=1))
    event = ProgressEvent(sequence=1, at=datetime(2025, 1, 31, 10, 30, 0, 7_999, tzinfo=paris), value=None)
    assert event.at == at(7) and event.at.tzinfo is UTC
    assert event.model_dump(mode="json")["at"] == "2025-01-31T09:30:00.007Z"
    with pytest.raises(pydantic.ValidationError, match="timezone"):
        ProgressEvent(sequence=1, at=datetime(2025, 1, 31, 9, 30), value=None)
    assert wire_time(at(0)) == "2025-01-31T09:30:00.000Z"
    assert wire_time(datetime(2025, 1, 31, 10, 30, 0, 7_999, tzinfo=paris)) == "2025-01-31T09:30:00.007Z"
    assert utc_time(at(7).timestamp() + 0.000_9) == at(7)


@pytest.mark.anyio
async def test_a_real_run_has_datetimes_and_its_json_the_contract_format() -> None:
    registry = CapabilityRegistry()

    async def ping(args: Any, ctx: Any) -> str:
        return "pong"

    registry.register("tools.ping", ping, "read")
    before = datetime.now(UTC) - timedelta(milliseconds=1)
    code = "await program.emit(1); return await tools.call({ref: 'tools.ping', args: null})"
    async with JevHost(HostConfig(approvals={"read": "allow"}), capabilities=registry) as host:
        env = await host.run(program(code, requires=["tools.ping"]), None)
        summary = host.status().runs[0]
    assert env.state is RunState.COMPLETED and env.result == "pong", env.error
    assert env.ended_at is not None and before <= env.started_at <= env.ended_at <= datetime.now(UTC)
    assert env.events[0].at.tzinfo is UTC and env.tool_calls == 2 and env.next_sequence == 2  # emit and call
    data = env.to_json()
    stamps = [data["startedAt"], data["endedAt"], data["events"][0]["at"], data["approvals"][0]["at"]]
    assert all(TIMESTAMP.match(stamp) for stamp in stamps), stamps
    assert data["toolCalls"] == 2 and data["approvalCounts"] == {"allowed": 1, "denied": 0}
    assert Envelope.model_validate(data) == env
    assert summary.started_at == env.started_at and summary.to_json()["startedAt"] == data["startedAt"]


def test_the_cli_prints_the_contract_envelope(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(program("await program.emit(1); return 2")))
    done = subprocess.run([sys.executable, "-m", "fabric_jev.cli", "run", str(path)], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert list(data) == ["id", "name", "state", "background", "startedAt", "endedAt", "result", "evaluations",
                          "toolCalls", "usage", "events", "nextSequence", "logs", "typecheck"]
    assert TIMESTAMP.match(data["startedAt"]) and TIMESTAMP.match(data["events"][0]["at"])


# ------------------------------------------------------------------------------------ other models


def test_host_status_writes_its_start_time_in_the_contract_format() -> None:
    summary = RunSummary("r", "n", RunState.RUNNING, True, at(7), 1, 2)
    assert compact(summary.to_json()) == ('{"id":"r","name":"n","state":"running","background":true,'
                                          '"startedAt":"2025-01-31T09:30:00.007Z","approvals":{"allowed":1,"denied":2}}')


ARTIFACT = {"name": "p", "code": "return 1", "inputSchema": {"type": "object"}, "outputSchema": {},
            "requires": ["jev.evaluate"], "limits": {"maxToolCalls": 3, "timeoutMs": 100}}


def test_a_program_reads_and_writes_the_artifact_and_has_snake_case_attributes() -> None:
    parsed = parse_program(ARTIFACT)
    assert parsed.input_schema == {"type": "object"} and parsed.output_schema == {}
    assert parsed.limits is not None and (parsed.limits.max_tool_calls, parsed.limits.timeout_ms) == (3, 100)
    assert compact(parsed.to_json()) == ('{"name":"p","code":"return 1","inputSchema":{"type":"object"},'
                                         '"outputSchema":{},"requires":["jev.evaluate"],'
                                         '"limits":{"timeoutMs":100,"maxToolCalls":3}}')


def test_an_artifact_is_read_by_its_contract_keys_only() -> None:
    snake = {**{k: v for k, v in ARTIFACT.items() if k != "inputSchema"}, "input_schema": {}}
    with pytest.raises(ProgramInvalid, match=r"inputSchema: Field required.*input_schema: Extra inputs"):
        parse_program(snake)
    with pytest.raises(ProgramInvalid, match=r"limits\.max_tokens: Extra inputs"):
        parse_program({**ARTIFACT, "limits": {"max_tokens": 5}})


HOST_CONFIG_JSON = (
    '{"defaults":{"timeoutMs":5000,"maxEvaluations":100,"maxToolCalls":1000,"maxTokens":100000},'
    '"ceilings":{"timeoutMs":900000,"maxEvaluations":1000,"maxToolCalls":10000,"maxTokens":1000000},'
    '"maxConcurrentRuns":3,"maxQueuedRuns":1000,"maxRetainedRuns":64,"requestTimeoutMs":15000,"maxRequestBytes":131072,'
    '"memoryLimitBytes":67108864,"warmWorkers":2,"model":"jev-latest","autoApprovalThreshold":0.5,'
    '"approvals":{"read":"allow","write":"ask","execute":"ask","network":"ask","agent":"ask"},'
    '"approverTimeoutMs":120000,"allow":[],"deny":[],"evaluator":{},"rules":[],"defaultRules":true,"connectors":{},'
    '"typecheck":{"typescript":"error","javascript":"warn","timeoutMs":10000,"memoryLimitBytes":536870912,'
    '"requireChecker":true,"diskCache":true,"cacheDir":"/x"}}')


def test_a_host_config_file_keeps_its_keys_and_the_model_its_snake_case() -> None:
    config = HostConfig.parse({"maxConcurrentRuns": 3, "defaults": {"timeoutMs": 5000},
                               "typecheck": {"requireChecker": True, "cacheDir": "/x"}})
    assert (config.max_concurrent_runs, config.defaults.timeout_ms, config.typecheck.require_checker) == (3, 5000, True)
    assert compact(config.model_dump(mode="json")) == HOST_CONFIG_JSON
    assert HostConfig.parse(json.loads(HOST_CONFIG_JSON)) == config
    assert HostConfig(max_concurrent_runs=3) == HostConfig(maxConcurrentRuns=3)
    with pytest.raises(ConfigError, match="max_concurrent_runs: Extra inputs"):
        HostConfig.parse({"max_concurrent_runs": 3})
    with pytest.raises(ConfigError, match="maxConcurrentRuns must be a finite number"):
        HostConfig.parse({"maxConcurrentRuns": "many"})


def test_a_plan_and_a_batch_record_keep_their_contract_keys() -> None:
    plan = Plan("sha256:ab", "intent", ("a", "b"), {"a": 0.95})
    assert (plan.dictionary_digest, plan.check_ids, plan.schema_version) == ("sha256:ab", ("a", "b"), 1)
    assert compact(plan.to_json()) == ('{"schemaVersion":1,"dictionaryDigest":"sha256:ab","intent":"intent",'
                                       '"checkIds":["a","b"],"probabilities":{"a":0.95}}')
    line = {"line": 2, "id": "k", "state": "completed", "result": {"x": 1}, "evaluations": 1, "toolCalls": 4,
            "usage": {"input_tokens": 3, "output_tokens": 1}}
    record = BatchOutcome.from_json(line)
    assert record.tool_calls == 4 and compact(record.to_json()) == compact(line)


DICTIONARY = {"id": "d", "version": "1", "checks": [
    {"id": "a", "description": "see",
     "assertion": {"kind": "see", "target": {"testId": "x"}, "options": {"timeoutMs": 20}}},
    {"id": "b", "description": "not", "assertion": {"kind": "notSee", "target": "y"}},
    {"id": "c", "description": "obs", "assertion": {"kind": "observe", "observation": {"id": "o", "version": "1"},
                                                    "predicate": {"kind": "atLeast", "value": 2}}}]}


def test_a_dictionary_keeps_its_digest() -> None:
    parsed = parse_dictionary(DICTIONARY)
    see = parsed.checks[0].assertion
    assert see.kind == "see" and see.options.timeout_ms == 20 and not isinstance(see.target, str)
    assert see.target.test_id == "x"
    assert '"testId":"x"' in canonical(parsed) and '"timeoutMs":3000' in canonical(parsed)
    assert dictionary_digest(parsed) == "sha256:0e28d3bf81a19e6dda24f0c5175f50012eb4efbdef1d347e3fb4210b4682535e"
    with pytest.raises(DictionaryInvalid, match="test_id"):
        parse_dictionary({**DICTIONARY, "checks": [{**DICTIONARY["checks"][0], "assertion": {
            "kind": "see", "target": {"test_id": "x"}}}]})


# ------------------------------------------------------------------------------- every public model

CAMEL = re.compile(r"[a-z][A-Z]")


def _public_models() -> dict[str, type]:
    found: dict[str, type] = {}

    def visit(cls: type) -> None:
        name = f"{cls.__module__}.{cls.__qualname__}"
        if name in found:
            return
        if isinstance(cls, type) and issubclass(cls, pydantic.BaseModel):
            found[name] = cls
            for field in cls.model_fields.values():
                for arg in _classes(field.annotation):
                    visit(arg)
        elif dataclasses.is_dataclass(cls):
            found[name] = cls

    for package in PACKAGES:
        module = importlib.import_module(package)
        for export in getattr(module, "__all__", ()):
            obj = getattr(module, export)
            if inspect.isclass(obj):
                visit(obj)
    return found


def _classes(annotation: Any) -> list[type]:
    out = [annotation] if inspect.isclass(annotation) else []
    for arg in typing.get_args(annotation):
        out += _classes(arg)
    return out


def _fields(cls: type) -> dict[str, Any]:
    if issubclass(cls, pydantic.BaseModel):
        return {name: field.annotation for name, field in cls.model_fields.items()}
    return {field.name: field.type for field in dataclasses.fields(cls)}


def test_every_public_model_has_snake_case_attributes_and_datetime_timestamps() -> None:
    models = _public_models()
    assert {"fabric_jev.contract.envelope.Envelope", "fabric_jev.contract.config.TypecheckConfig",
            "fabric_jev.verification.dictionary.TargetSpec", "fabric_jev_browser.connector.BrowserConfig"} <= set(models)
    camel = [f"{name}.{field}" for name, cls in models.items() for field in _fields(cls) if CAMEL.search(field)]
    assert camel == []
    stamps = {f"{name}.{field}": str(kind) for name, cls in models.items() for field, kind in _fields(cls).items()
              if field == "at" or field.endswith("_at")}
    assert stamps and all(re.search(r"\b(datetime|AwareDatetime)\b", kind) for kind in stamps.values()), stamps


def test_to_json_is_the_one_serializer_and_omits_what_is_declared_omitted() -> None:
    from pydantic import Field

    from fabric_jev.contract.wire_model import UtcTime, WireModel, omit_none

    class Shape(WireModel):
        started_at: UtcTime
        note: str | None = Field(default=None, exclude_if=omit_none)
        kept: str | None = None
        parts: tuple[int, ...] = ()

    at = datetime(2025, 1, 31, 9, 30, 0, 123000, tzinfo=UTC)
    assert json.dumps(Shape(started_at=at, parts=(1, 2)).to_json()) == (
        '{"startedAt": "2025-01-31T09:30:00.123Z", "kept": null, "parts": [1, 2]}')
    assert list(Shape(started_at=at, note="n").to_json()) == ["startedAt", "note", "kept", "parts"]
