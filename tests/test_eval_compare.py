"""Expected values against results: partial and whole, nested fields, tolerances, the output schema."""

from __future__ import annotations

import pytest

from fabric_jev.evals.compare import (
    WHOLE,
    EvalSettings,
    check_expected,
    compare,
    field_kind,
    parse_settings,
    passed,
)

RESULT = {"route": "billing", "refund": True, "urgency": 1.6, "tags": ["a", "b"],
          "address": {"city": "Lyon", "zip": "69001"}}


def verdicts(expected: object, result: object = RESULT, *, completed: bool = True, **settings: object) -> dict:
    found = compare(expected, result, completed=completed, settings=EvalSettings(**settings))  # type: ignore[arg-type]
    return {v.field: v for v in found}


def test_a_partial_expected_value_compares_only_the_fields_it_gives() -> None:
    got = verdicts({"route": "billing"})
    assert list(got) == ["route"] and got["route"].ok
    assert passed(tuple(got.values()), completed=True)
    wrong = verdicts({"route": "technical", "refund": True})
    assert not wrong["route"].ok and wrong["route"].actual == "billing" and wrong["refund"].ok
    assert not passed(tuple(wrong.values()), completed=True)


def test_nested_objects_are_partial_too_and_named_by_dotted_paths() -> None:
    got = verdicts({"address": {"city": "Lyon"}})
    assert list(got) == ["address.city"] and got["address.city"].ok
    missing = verdicts({"address": {"street": "Rue X"}})
    assert not missing["address.street"].ok and not missing["address.street"].present


def test_a_whole_result_is_compared_whole() -> None:
    assert verdicts(RESULT)  # every field given: a whole result, field by field
    assert all(v.ok for v in verdicts(RESULT).values())
    # An expected value that is not an object is the whole result, as the field "$".
    assert verdicts(["a", "b"], ["a", "b"])[WHOLE].ok
    assert not verdicts(["a", "b"], ["b", "a"])[WHOLE].ok
    assert verdicts("yes", "yes")[WHOLE].ok


def test_match_whole_fails_the_fields_a_result_has_beyond_the_expected_value() -> None:
    got = verdicts({"route": "billing", "address": {"city": "Lyon"}}, match="whole")
    extras = sorted(name for name, v in got.items() if v.extra)
    assert extras == ["address.zip", "refund", "tags", "urgency"]
    assert not passed(tuple(got.values()), completed=True)
    assert all(v.ok for v in verdicts({"route": "billing"}).values())  # partial ignores them


def test_numbers_match_within_the_field_tolerance_and_exactly_without_one() -> None:
    assert not verdicts({"urgency": 2})["urgency"].ok
    assert verdicts({"urgency": 2}, tolerance={"urgency": 0.5})["urgency"].ok
    assert verdicts({"urgency": 2}, tolerance={"*": 0.4})["urgency"].ok
    assert not verdicts({"urgency": 2}, tolerance={"*": 0.39})["urgency"].ok
    # The field's own tolerance wins over the one for every number.
    assert not verdicts({"urgency": 2}, tolerance={"*": 1, "urgency": 0.1})["urgency"].ok
    # 0.1 + 0.2 is 0.3: floating-point slack on top of an exact comparison.
    assert verdicts({"x": 0.3}, {"x": 0.1 + 0.2})["x"].ok
    assert verdicts({"urgency": 2}, tolerance={"urgency": 0.5})["urgency"].error == pytest.approx(0.4)


def test_tolerance_reaches_into_arrays_and_booleans_are_not_numbers() -> None:
    assert verdicts({"v": [1.0, 2.0]}, {"v": [1.05, 1.98]}, tolerance={"v": 0.1})["v"].ok
    assert not verdicts({"v": [1.0, 2.0]}, {"v": [1.05]}, tolerance={"v": 0.1})["v"].ok
    assert not verdicts({"flag": True}, {"flag": 1})["flag"].ok
    assert not verdicts({"n": 1}, {"n": True})["n"].ok
    assert not verdicts({"n": None}, {"n": 0})["n"].ok


def test_a_run_that_did_not_complete_fails_every_field() -> None:
    got = verdicts({"route": "billing", "refund": True}, None, completed=False)
    assert all(not v.ok and not v.present for v in got.values())
    assert not passed((), completed=False)  # even with nothing expected


def test_an_expected_value_no_result_could_meet_is_named() -> None:
    schema = {"type": "object", "additionalProperties": False,
              "properties": {"route": {"enum": ["billing", "technical"]}, "refund": {"type": "boolean"},
                             "address": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    assert check_expected({"route": "billing", "address": {"city": "Lyon"}}, schema) is None
    assert check_expected({"route": "biling"}, schema) == \
        'expected route "biling" does not fit the program\'s outputSchema'
    assert check_expected({"refund": "yes"}, schema) == 'expected refund "yes" does not fit the program\'s outputSchema'
    assert check_expected({"queue": "x"}, schema) == "expected field 'queue' is not in the program's outputSchema"
    assert check_expected(3, {"type": "string"}) == "expected value 3 does not fit the program's outputSchema"


def test_field_kinds_come_from_the_schema_then_the_values() -> None:
    schema = {"type": "object", "properties": {"route": {"enum": ["a", "b"]}, "n": {"type": "integer"},
                                               "ok": {"type": "boolean"}, "text": {"type": "string"}}}
    assert field_kind("route", schema, ["a"]) == "enum"
    assert field_kind("n", schema, [1]) == "number"
    assert field_kind("ok", schema, [True]) == "boolean"
    assert field_kind("text", schema, ["x", "y"]) == "enum"  # few distinct values: counted as an enum
    assert field_kind("text", schema, [str(i) for i in range(50)]) == "string"
    assert field_kind("other", {}, [1, 2.5]) == "number"
    assert field_kind("other", {}, [[1], {"a": 1}]) == "value"


def test_settings_are_checked_and_named() -> None:
    settings = parse_settings({"match": "whole", "tolerance": {"urgency": 0.5}, "questions": {"q": "urgent"}}, "h")
    assert settings.match == "whole" and settings.tolerance_for("urgency") == 0.5
    assert parse_settings({"tolerance": 0.25}, "h").tolerance_for("anything") == 0.25
    for raw, message in (({"mtach": "whole"}, "unknown key 'mtach'"), ({"match": "most"}, "match must be"),
                         ({"tolerance": {"x": -1}}, "tolerance of 'x' must be a finite number"),
                         ({"tolerance": {"x": True}}, "must be a finite number"),
                         ({"questions": {"q": 3}}, "questions must map")):
        with pytest.raises(ValueError, match=message):
            parse_settings(raw, "header")
    merged = EvalSettings(tolerance={"a": 1}).merged(EvalSettings(match="whole", tolerance={"b": 2}))
    assert merged.match == "whole" and dict(merged.tolerance) == {"a": 1, "b": 2}
    # A header's "whole" is overridden by an explicit "partial" (the command line's --match partial)...
    assert EvalSettings(match="whole").merged(EvalSettings(match="partial")).match == "partial"
    # ... and kept when the settings on top say nothing about it.
    assert EvalSettings(match="whole").merged(EvalSettings(tolerance={"x": 1})).match == "whole"
