"""`pattern` (RE2, linear time) and the common `format`s in the schema subset: accepted by the
schema check, enforced on input and on output by a real host."""

from __future__ import annotations

from typing import Any

import pytest

from fabric_jev import InputInvalid, JevHost, RunState
from fabric_jev.contract import ValueRejected, check_schema, check_value
from fabric_jev.contract.formats import FORMATS
from tests.conftest import program

GOOD_AND_BAD: dict[str, tuple[list[str], list[str]]] = {
    "date-time": (["2025-06-01T09:30:00Z", "2025-06-01t09:30:00.125+02:00", "2016-12-31T23:59:60Z"],
                  ["2025-06-01 09:30:00Z", "2025-02-30T09:30:00Z", "2025-06-01T24:00:00Z",
                   "2025-06-01T09:30:00", "2025-06-01T09:30:00+25:00", "2025-06-01"]),
    "date": (["2025-06-01", "2024-02-29"], ["2023-02-29", "2025-6-1", "2025-06-01T00:00:00Z", "x"]),
    "email": (["sam@example.com", "first.last+tag@sub.example.co"],
              ["sam", "@example.com", "sam@", "a b@example.com", "sam@exa mple.com", "sam@-example.com",
               "sam..x@example.com", "x" * 65 + "@example.com"]),
    "uri": (["https://example.com/a?b=c#d", "urn:isbn:0451450523", "mailto:sam@example.com",
             "http://[::1]:8080/%20x"],
            ["example.com/a", "/relative/path", "https://exa mple.com", "https://example.com/%zz", "1http://x"]),
    "uuid": (["123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000"],
             ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400", "g23e4567-e89b-12d3-a456-426614174000"]),
}


def test_the_subset_checks_exactly_five_formats() -> None:
    assert set(FORMATS) == set(GOOD_AND_BAD)


@pytest.mark.parametrize("name", sorted(GOOD_AND_BAD))
def test_each_format_accepts_its_form_and_refuses_others(name: str) -> None:
    schema = {"type": "string", "format": name}
    check_schema(schema, "inputSchema")
    good, bad = GOOD_AND_BAD[name]
    for value in good:
        assert check_value(value, schema, "input") == value
    for value in bad:
        with pytest.raises(ValueRejected, match=f"input does not match its declared schema: .* is not a '{name}'"):
            check_value(value, schema, "input")


def test_a_format_applies_to_strings_only() -> None:
    assert check_value(5, {"format": "email"}, "input") == 5


def test_a_pattern_is_searched_for_anywhere_unless_anchored() -> None:
    assert check_value("ticket T-12 here", {"type": "string", "pattern": "T-[0-9]+"}, "input")
    with pytest.raises(ValueRejected, match=r"'ticket T-12 here' does not match the pattern '\^T-\[0-9\]\+\$' at \$"):
        check_value("ticket T-12 here", {"type": "string", "pattern": "^T-[0-9]+$"}, "input")
    # RE2's $ is the end of the text, not before a final newline as in Python's re.
    with pytest.raises(ValueRejected):
        check_value("T-12\n", {"pattern": "^T-[0-9]+$"}, "input")


def test_a_pattern_that_backtracks_exponentially_elsewhere_runs_in_linear_time() -> None:
    # Python's re takes longer than the universe's age here; RE2 answers at once.
    schema = {"type": "string", "pattern": "^(a+)+$"}
    with pytest.raises(ValueRejected, match="does not match the pattern"):
        check_value("a" * 30_000 + "!", schema, "input")


@pytest.mark.parametrize(("schema", "needle"), [
    ({"pattern": "(?<=a)b"}, "no lookaround and no backreferences"),
    ({"pattern": "a{1001}"}, "RE2 cannot compile it"),
    ({"pattern": "("}, "RE2 cannot compile it (missing ): ("),
    ({"format": "hostname"}, "format must be one of date-time, date, email, uri, uuid"),
    ({"format": 1}, "format must be one of"),
])
def test_patterns_re2_cannot_run_and_unknown_formats_are_refused(schema: dict[str, Any], needle: str) -> None:
    from fabric_jev import SchemaInvalid

    with pytest.raises(SchemaInvalid, match=r"inputSchema at \$\.(pattern|format): ") as err:
        check_schema(schema, "inputSchema")
    assert needle in str(err.value)


INPUT_SCHEMA = {"type": "object", "properties": {
    "id": {"type": "string", "pattern": "^T-[0-9]{1,6}$"},
    "from": {"type": "string", "format": "email"},
    "at": {"type": "string", "format": "date-time"}}, "required": ["id"], "additionalProperties": False}


@pytest.mark.anyio
async def test_a_host_checks_pattern_and_format_on_input_and_output(host: JevHost) -> None:
    echo = program("return {id: input.id, seen: input.at ?? 'soon'}", inputSchema=INPUT_SCHEMA,
                   outputSchema={"type": "object", "properties": {
                       "id": {"type": "string", "pattern": "^T-"},
                       "seen": {"type": "string", "format": "date-time"}}})
    env = await host.run(echo, {"id": "T-7", "from": "sam@example.com", "at": "2025-06-01T09:30:00Z"})
    assert env.state is RunState.COMPLETED and env.result == {"id": "T-7", "seen": "2025-06-01T09:30:00Z"}
    with pytest.raises(InputInvalid, match=r"input does not match its declared schema: 'X-7' does not match the "
                                           r"pattern '\^T-\[0-9\]\{1,6\}\$' at \$\.id"):
        await host.run(echo, {"id": "X-7"})
    with pytest.raises(InputInvalid, match=r"'sam' is not a 'email' at \$\.from"):
        await host.run(echo, {"id": "T-7", "from": "sam"})
    env = await host.run(echo, {"id": "T-7"})  # the output's `seen` is "soon": not a date-time
    assert env.state is RunState.FAILED
    assert env.error == "output does not match its declared schema: 'soon' is not a 'date-time' at $.seen"
