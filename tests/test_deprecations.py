"""What 0.1.0 code calls still works for one minor release, each with a DeprecationWarning that
names its replacement (CHANGELOG.md, "Deprecated")."""

from __future__ import annotations

from datetime import datetime

import pytest

from fabric_jev import Envelope, FixtureEvaluator, HostConfig, JevHost, RunState
from fabric_jev.contract.program import parse_program
from tests.conftest import program

pytestmark = pytest.mark.anyio


async def test_status_with_an_id_is_the_envelope_with_a_warning(host: JevHost) -> None:
    done = await host.run(program("program.emit(1); program.emit(2); return 3"))
    with pytest.warns(DeprecationWarning, match=r"host\.status\(id\) is deprecated .*use host\.envelope\(id, after\)"):
        old = host.status(done.id, 1)
    assert old == host.envelope(done.id, 1) and [e.value for e in old.events] == [2]


async def test_host_status_as_a_dict_with_a_warning(host: JevHost) -> None:
    await host.run(program("return 1"))
    with pytest.warns(DeprecationWarning, match=r"host\.host_status\(\) is deprecated.*use host\.status\(\)"):
        old = host.host_status()
    assert old == host.status().to_json()
    with pytest.warns(DeprecationWarning, match=r"host\.status\(\)\['runs'\] is deprecated.*to_json\(\)\['runs'\]"):
        runs = host.status()["runs"]
    assert isinstance(runs, list) and runs[0]["state"] == "completed"


def test_evaluator_status_by_key_with_a_warning() -> None:
    evaluator = FixtureEvaluator({"answers": {}})
    with pytest.warns(DeprecationWarning, match=r"Evaluator\.status\(\)\['route'\] is deprecated"):
        assert evaluator.status()["route"] == evaluator.status().route


async def test_camel_case_envelope_attributes_read_with_a_warning(host: JevHost) -> None:
    env = await host.run(program("program.emit('x'); return 1"))
    olds = {"startedAt": "started_at", "endedAt": "ended_at", "toolCalls": "tool_calls",
            "nextSequence": "next_sequence", "approvalCounts": "approval_counts"}
    for old, new in olds.items():
        with pytest.warns(DeprecationWarning, match=rf"Envelope\.{old} is deprecated .*use \.{new}"):
            value = getattr(env, old)
        current = getattr(env, new)
        # Timestamps read as the strings 0.1.0 had; everything else as the attribute is.
        assert value == (env.to_json()[old] if isinstance(current, datetime) else current)
    assert env.state is RunState.COMPLETED


def test_camel_case_attributes_of_other_models_read_with_a_warning() -> None:
    parsed = parse_program(program("return 1", inputSchema={"type": "integer"}))
    with pytest.warns(DeprecationWarning, match=r"Program\.inputSchema is deprecated .*use \.input_schema"):
        assert parsed.inputSchema == {"type": "integer"}  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match=r"HostConfig\.maxConcurrentRuns .*use \.max_concurrent_runs"):
        assert HostConfig(max_concurrent_runs=3).maxConcurrentRuns == 3  # type: ignore[attr-defined]


def test_an_unknown_attribute_is_still_an_attribute_error() -> None:
    env = Envelope.model_validate({"id": "x", "name": "n", "state": "completed", "background": False,
                                   "startedAt": "2025-01-31T09:30:00.123Z"})
    with pytest.raises(AttributeError, match="startedAtt"):
        env.startedAtt  # type: ignore[attr-defined]  # noqa: B018


def test_redaction_read_through_its_old_contract_path_with_a_warning() -> None:
    import fabric_jev.redaction as redaction

    with pytest.warns(DeprecationWarning, match=r"fabric_jev\.contract\.redaction is deprecated .*"
                                                r"use fabric_jev\.redaction\.redact_text") as caught:
        from fabric_jev.contract.redaction import redact_text
    assert caught[0].filename == __file__  # the warning points at the line that imports the old name
    assert redact_text is redaction.redact_text
    text, kinds = redact_text("password=hunter22hunter")
    assert "hunter22hunter" not in text and kinds == ["secret assignment"]
    with pytest.raises(ImportError):
        from fabric_jev.contract.redaction import no_such_name  # type: ignore[attr-defined]  # noqa: F401


async def test_an_envelopes_parts_read_by_key_with_a_warning(host: JevHost) -> None:
    env = await host.run(program("const r = await jev.evaluate({state: 'x', questions: {q: {type: 'noul', "
                                 "instructions: 'OK?'}}}); return r.answers.q.noul", requires=["jev.evaluate"]))
    assert env.typecheck is not None and env.evaluator is not None
    parts = {"typecheck": (env.typecheck, "outcome", "outcome"), "evaluator": (env.evaluator, "readout", "readout"),
             "approvalCounts": (env.approval_counts, "allowed", "allowed")}
    for where, (part, key, attribute) in parts.items():
        with pytest.warns(DeprecationWarning, match=rf"\['{key}'\] is deprecated .*read \.{attribute}, or "
                                                    rf"to_json\(\)\['{key}'\]"):
            value = part[key]  # type: ignore[index]
        assert value == part.to_json()[key] == env.to_json().get(where, {key: value})[key]


def test_the_page_names_of_the_core_pytest_plugin_moved_with_a_warning() -> None:
    from pathlib import Path

    from fabric_jev_browser import pytest_plugin as browser

    import fabric_jev.testing.plugin as core

    with pytest.warns(DeprecationWarning, match=r"moved to fabric_jev_browser\.pytest_plugin\.MARKER"):
        assert core.MARKER == browser.MARKER
    with pytest.warns(DeprecationWarning, match=r"moved to fabric_jev_browser\.pytest_plugin\.output_path"):
        old = core.output_path
    settings = browser.PageSettings(Path("/tmp/out"), "on", (800, 600))
    nodeid = "tests/test_x.py::test_y[a b]"
    assert old(settings, nodeid) == browser.output_path(settings, nodeid) == Path("/tmp/out/tests-test_x.py-test_y-a-b")
    with pytest.raises(AttributeError):
        core.nothing_here  # noqa: B018
