from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic.alias_generators import to_snake

from fabric_jev import ConfigError, HostConfig, ProgramLimits


def test_defaults_match_the_contract() -> None:
    c = HostConfig()
    assert (c.defaults.timeout_ms, c.defaults.max_evaluations, c.defaults.max_tool_calls,
            c.defaults.max_tokens) == (60_000, 100, 1_000, 100_000)
    assert (c.ceilings.timeout_ms, c.ceilings.max_evaluations, c.ceilings.max_tool_calls,
            c.ceilings.max_tokens) == (900_000, 1_000, 10_000, 1_000_000)
    assert (c.max_concurrent_runs, c.max_retained_runs, c.request_timeout_ms, c.max_request_bytes) == \
        (4, 64, 15_000, 131_072)
    assert c.model == "jev-latest" and c.auto_approval_threshold == 0.5


@pytest.mark.parametrize(("key", "given", "expected"), [
    ("maxConcurrentRuns", 99, 16), ("maxConcurrentRuns", 0, 1), ("maxConcurrentRuns", 3.9, 3),
    ("maxRetainedRuns", 1000, 256), ("requestTimeoutMs", 5, 100),
    ("maxRequestBytes", 10**9, 1_048_576), ("autoApprovalThreshold", 7, 1.0),
])
def test_config_values_are_floored_and_clamped(key: str, given: float, expected: float) -> None:
    # The file's key is camelCase, the attribute its snake_case.
    assert getattr(HostConfig.parse({key: given}), to_snake(key)) == expected


def test_limit_ranges_clamp() -> None:
    c = HostConfig.parse({"ceilings": {"timeoutMs": 10**12, "maxEvaluations": 0},
                          "defaults": {"timeoutMs": 1}})
    assert c.ceilings.timeout_ms == 86_400_000 and c.ceilings.max_evaluations == 1
    assert c.defaults.timeout_ms == 100


def test_program_limits_are_clamped_to_ceilings() -> None:
    c = HostConfig.parse({"ceilings": {"timeoutMs": 5_000, "maxToolCalls": 10}})
    eff = c.effective_limits(ProgramLimits(timeout_ms=10_000, max_tool_calls=5))
    assert eff.timeout_ms == 5_000 and eff.max_tool_calls == 5
    # An absent limit takes the default, itself capped by the ceiling.
    assert c.effective_limits(None).timeout_ms == 5_000
    assert c.effective_limits(None).max_evaluations == 100


@pytest.mark.parametrize("bad", [
    {"unknown": 1}, {"maxConcurrentRuns": "4"}, {"maxConcurrentRuns": float("nan")},
    {"defaults": {"bogus": 1}}, {"autoApprovalThreshold": True},
])
def test_invalid_config_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="Invalid fabric-jev config"):
        HostConfig.parse(bad)


def test_config_loads_from_json_file(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"maxConcurrentRuns": 2, "defaults": {"maxTokens": 5}}))
    c = HostConfig.load(path)
    assert c.max_concurrent_runs == 2 and c.defaults.max_tokens == 5


def test_config_file_errors_are_specific(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        HostConfig.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(ConfigError, match="not valid JSON"):
        HostConfig.load(bad)


def test_the_default_config_made_without_validating_is_the_validated_one() -> None:
    from fabric_jev.contract.config import default_config

    made, validated = default_config(), HostConfig()
    assert made == validated
    assert made.model_fields_set == validated.model_fields_set == set()
    assert made.model_dump() == validated.model_dump()
    assert made.typecheck == validated.typecheck and made.typecheck.model_dump() == validated.typecheck.model_dump()
    assert made.effective_limits(None) == validated.effective_limits(None)
