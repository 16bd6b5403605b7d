"""The query language: `role=button text~"Save" disabled=false`.

A query is conditions joined by whitespace (all must hold). A condition is
`field op value` with

* fields: role, text, name, value, input_type, testid, checked, disabled,
  expanded, pressed, selected, readonly, editable, visible, in_viewport,
  occluded, in_shadow, level, frame, frame_url, bbox.x, bbox.y, bbox.width,
  bbox.height (`frame` is the frame path, "" in the top document);
* operators: `=` equals, `!=` differs, `~` contains (case-insensitive), `^=`
  starts with, `$=` ends with (both case-insensitive), `>` `>=` `<` `<=`
  numeric;
* values: bare words, numbers, `true` / `false` / `mixed` / `null`, or double-
  quoted strings with `\\"` and `\\\\` escapes.

`where(...)` builds the same conditions from Python keywords:
`where(role="button", text__contains="Save", disabled=False)`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ..errors import QuerySyntaxError

__all__ = ["FIELDS", "Condition", "Query", "QuerySyntaxError", "as_query", "where"]
from .snapshot import Element

FIELDS = ("role", "text", "name", "value", "input_type", "testid", "checked", "disabled", "expanded",
          "pressed", "selected", "readonly", "editable", "visible", "in_viewport", "occluded", "in_shadow",
          "level", "frame", "frame_url", "bbox.x", "bbox.y", "bbox.width", "bbox.height")
OPERATORS = ("!=", "^=", "$=", ">=", "<=", "=", "~", ">", "<")
_NUMERIC_OPS = frozenset({">", ">=", "<", "<="})
_STATE_FIELDS = frozenset({"checked", "disabled", "expanded", "pressed", "selected", "readonly",
                           "editable", "visible", "in_viewport", "occluded", "in_shadow"})
_SUFFIXES = {"contains": "~", "startswith": "^=", "endswith": "$=", "ne": "!=", "gt": ">",
             "ge": ">=", "lt": "<", "le": "<="}


def _field_value(element: Element, field: str) -> Any:
    if field == "disabled":
        return element.is_disabled
    if field == "checked":
        return element.checked_state
    if field == "occluded":
        return element.is_occluded
    if field.startswith("bbox."):
        return getattr(element.bbox, field[5:])
    return getattr(element, field)


def _norm(s: str) -> str:
    return " ".join(s.split())


#: What a query compares a field with: text, a number, a state flag, or null.
QueryValue = str | int | float | bool | None


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: QueryValue

    def matches(self, element: Element) -> bool:
        actual = _field_value(element, self.field)
        op, expected = self.op, self.value
        if op in _NUMERIC_OPS:
            if expected is None:
                return False
            try:
                a, b = float(actual), float(expected)
            except (TypeError, ValueError):
                return False
            if math.isnan(a):
                return False
            return {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}[op]
        if op in ("=", "!="):
            equal = _equal(actual, expected)
            return equal if op == "=" else not equal
        if actual is None:
            return False
        have, want = _norm(str(actual)).lower(), _norm(str(expected)).lower()
        if op == "~":
            return want in have
        if op == "^=":
            return have.startswith(want)
        return have.endswith(want)

    def __str__(self) -> str:
        return f"{self.field}{self.op}{_render(self.value)}"


def _equal(actual: Any, expected: Any) -> bool:
    if isinstance(expected, bool) or expected is None or isinstance(actual, bool):
        return bool(actual is expected or (actual == expected and type(actual) is type(expected)))
    if isinstance(expected, int | float) and not isinstance(actual, str):
        return actual is not None and float(actual) == float(expected)
    if expected == "mixed":
        return bool(actual == "mixed")
    return actual is not None and _norm(str(actual)) == _norm(str(expected))


def _render(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if re.fullmatch(r"[A-Za-z0-9_.:/#-]+", text) and text.lower() not in ("true", "false", "null", "mixed"):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Query:
    conditions: tuple[Condition, ...]
    source: str = ""

    def matches(self, element: Element) -> bool:
        return all(c.matches(element) for c in self.conditions)

    def select(self, elements: tuple[Element, ...] | list[Element]) -> list[Element]:
        return [e for e in elements if self.matches(e)]

    def __str__(self) -> str:
        return self.source or " ".join(str(c) for c in self.conditions)

    @classmethod
    def parse(cls, text: str) -> Query:
        return _Parser(text).parse()


def where(**conditions: QueryValue) -> Query:
    """Python form of a query: field=value, field__contains=..., bbox_y__gt=100, ..."""
    out = []
    for key, value in conditions.items():
        field, _, suffix = key.partition("__")
        field = field.replace("bbox_", "bbox.") if field.startswith("bbox_") else field
        if field not in FIELDS:
            raise QuerySyntaxError(key, 1, f"unknown query field {field!r}; fields: {', '.join(FIELDS)}")
        if suffix and suffix not in _SUFFIXES:
            raise QuerySyntaxError(key, key.index("__") + 3, f"unknown query operator suffix {suffix!r}")
        out.append(Condition(field, _SUFFIXES.get(suffix, "="), value))
    query = Query(tuple(out))
    return Query(query.conditions, " ".join(str(c) for c in query.conditions))


def as_query(query: Query | str) -> Query:
    return query if isinstance(query, Query) else Query.parse(query)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str, pos: int | None = None) -> QuerySyntaxError:
        return QuerySyntaxError(self.text, (self.pos if pos is None else pos) + 1, message)

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def parse(self) -> Query:
        conditions = []
        self.skip_space()
        if self.pos >= len(self.text):
            raise self.fail("empty query")
        while self.pos < len(self.text):
            conditions.append(self.condition())
            self.skip_space()
        return Query(tuple(conditions), self.text.strip())

    def condition(self) -> Condition:
        start = self.pos
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*").match(self.text, self.pos)
        if not m:
            raise self.fail("expected a field name")
        field = m.group(0)
        if field not in FIELDS:
            raise self.fail(f"unknown field {field!r} (fields: {', '.join(FIELDS)})", start)
        self.pos = m.end()
        op = next((o for o in OPERATORS if self.text.startswith(o, self.pos)), None)
        if op is None:
            raise self.fail(f"expected an operator after {field!r} ({' '.join(OPERATORS)})")
        self.pos += len(op)
        value = self.value(field, op)
        return Condition(field, op, value)

    def value(self, field: str, op: str) -> Any:
        if self.pos >= len(self.text) or self.text[self.pos].isspace():
            raise self.fail("expected a value")
        if self.text[self.pos] == '"':
            return self.quoted()
        m = re.compile(r"[^\s\"]+").match(self.text, self.pos)
        assert m is not None
        word = m.group(0)
        start = self.pos
        self.pos = m.end()
        if op in _NUMERIC_OPS:
            try:
                return float(word) if "." in word or "e" in word.lower() else int(word)
            except ValueError:
                raise self.fail(f"operator {op} needs a number, got {word!r}", start) from None
        lowered = word.lower()
        if lowered == "null":
            return None
        if field in _STATE_FIELDS:
            # Keywords mean state only on state fields: name=Mixed is the text "Mixed".
            if lowered in ("true", "false"):
                return lowered == "true"
            if lowered == "mixed":
                return "mixed"
        if re.fullmatch(r"-?\d+(\.\d+)?", word) and (field.startswith("bbox.") or field == "level"):
            return float(word) if "." in word else int(word)
        return word

    def quoted(self) -> str:
        start = self.pos
        self.pos += 1
        out = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "\\":
                if self.pos + 1 >= len(self.text):
                    break
                nxt = self.text[self.pos + 1]
                if nxt not in ('"', "\\"):
                    raise self.fail(f"unknown escape \\{nxt} (only \\\" and \\\\)")
                out.append(nxt)
                self.pos += 2
                continue
            if ch == '"':
                self.pos += 1
                return "".join(out)
            out.append(ch)
            self.pos += 1
        raise self.fail("unterminated string", start)
