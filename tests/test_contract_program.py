from __future__ import annotations

from typing import Any

import pytest

from fabric_jev import ProgramInvalid, SchemaInvalid
from fabric_jev.contract import parse_program
from tests.conftest import program


def test_minimal_program_parses() -> None:
    p = parse_program(program("return 1", requires=["jev.evaluate"]))
    assert p.name == "test" and p.requires == ("jev.evaluate",)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 129}, "name"),
        ({"code": ""}, "code"),
        ({"code": "x" * 65_537}, "code"),
        ({"requires": ["ab"]}, "3-256"),
        ({"requires": ["a." + "b" * 255]}, "3-256"),
        ({"requires": ["Browser.cdp"]}, "connector.capability"),
        ({"requires": ["nodot"]}, "connector.capability"),
        ({"requires": ["a.b", "a.b"]}, "twice"),
        ({"requires": [f"c.r{i}" for i in range(65)]}, "requires"),
        ({"limits": {"timeoutMs": 0}}, "timeoutMs"),
        ({"limits": {"maxToolCalls": 1.5}}, "maxToolCalls"),
        ({"limits": {"maxTokens": True}}, "maxTokens"),
        ({"limits": {"other": 1}}, "other"),
        ({"extra": 1}, "extra"),
        ({"name": 5}, "name"),
    ],
)
def test_program_rules(change: dict[str, Any], needle: str) -> None:
    with pytest.raises(ProgramInvalid) as err:
        parse_program({**program("return 1"), **change})
    assert needle in str(err.value)
    assert str(err.value).startswith("Invalid Jev program")


def test_max_evaluations_may_be_zero() -> None:
    p = parse_program(program("return 1", limits={"maxEvaluations": 0}))
    assert p.limits is not None and p.limits.max_evaluations == 0


def test_missing_schema_is_rejected() -> None:
    raw = program("return 1")
    del raw["outputSchema"]
    with pytest.raises(ProgramInvalid, match="outputSchema"):
        parse_program(raw)


def test_non_object_program_is_rejected() -> None:
    with pytest.raises(ProgramInvalid, match="expected a JSON object"):
        parse_program([1, 2])


def test_schema_errors_name_the_side() -> None:
    with pytest.raises(SchemaInvalid, match="outputSchema"):
        parse_program(program("return 1", outputSchema={"pattern": "(?=x)"}))
