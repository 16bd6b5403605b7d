"""Fuzzing the parsers of untrusted bytes: the bounded JSON reader, the worker wire, queries.

Any input gives a result or the parser's documented error, never anything else.
Examples that once broke a parser are pinned with `@example`.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from fabric_jev._json import JSONInputError, loads_bounded, read_json_file
from fabric_jev.assertions.query import Query, QuerySyntaxError, as_query
from fabric_jev.sandbox import _wire
from tests.fuzz_support import NASTY_TEXT, fuzz_timeout, json_texts, json_values

pytestmark = fuzz_timeout


def _finite_json(value: Any) -> bool:
    """Plain JSON a strict encoder takes: no NaN or infinity anywhere."""
    json.dumps(value, allow_nan=False)
    return True


# ---------------------------------------------------------------- the bounded JSON reader


@given(st.binary(max_size=200) | json_texts().map(lambda t: t.encode("utf-8", "surrogatepass")))
@example(b"1" * 5000)  # past Python's int-conversion limit: was ValueError, not JSONInputError
@example(b"[1e400]")  # overflows a float: was read as infinity
@example(b'{"a": -1E999}')
@example(b'"\\ud800"')  # a lone surrogate escape: text nothing can encode
@example(b"[" * 70 + b"]" * 70)
@example(b"\xef\xbb\xbf{}")
def test_the_bounded_reader_gives_finite_json_or_a_one_line_error(data: bytes) -> None:
    try:
        value = loads_bounded(data, what="fuzz input", max_bytes=4096, max_depth=16)
    except JSONInputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("fuzz input")
        return
    assert _finite_json(value)
    json.dumps(value, ensure_ascii=False).encode("utf-8")  # no lone surrogate survives


@given(json_texts())
@example("1" * 5000)
@example("\ud800")
def test_the_bounded_reader_takes_text_too(text: str) -> None:
    try:
        value = loads_bounded(text, what="fuzz input", max_bytes=8192)
    except JSONInputError:
        return
    assert _finite_json(value)


@given(st.binary(max_size=300))
@example(b"9" * 5000)
def test_a_json_file_is_read_or_refused_in_one_line(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.json"
        path.write_bytes(data)
        try:
            read_json_file(path, what="input", max_bytes=256)
        except JSONInputError as exc:
            assert "\n" not in str(exc)


@given(json_values())
def test_every_finite_json_value_reads_back_as_itself(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return  # a lone surrogate: covered above
    assert loads_bounded(text, what="x", max_bytes=1 << 20, max_depth=64) == value


# ---------------------------------------------------------------- the worker wire

_TAGS = st.sampled_from([b"L", b"S", b"R", b"E", b"O", b"F", b"Z", b"\x00"])
_OUTBOX_TEXTS = json_values().map(lambda v: json.dumps(
    {"c": v if isinstance(v, list) else [[1, "emit", v]], "l": [], "d": None, "f": None}))


@given(_TAGS, st.binary(max_size=200) | json_texts().map(lambda t: t.encode("utf-8", "surrogatepass"))
       | _OUTBOX_TEXTS.map(str.encode))
@example(b"O", b'{"c":[],"l":[],"d":[true,' + b"[" * 5000 + b"]" * 5000 + b"],\"f\":null}")
@example(b"F", b'["slice"]')
@example(b"S", b"1 1")
def test_a_frame_is_a_message_or_a_protocol_error(tag: bytes, payload: bytes) -> None:
    try:
        message = _wire.decode(tag, payload)
    except _wire.ProtocolError as exc:
        assert "\n" not in str(exc)
        return
    # Nothing decoded holds a lone surrogate: envelopes must always print.
    json.dumps(message, ensure_ascii=False, default=str).encode("utf-8")


@given(st.lists(st.binary(max_size=40), max_size=8))
def test_a_frame_buffer_takes_any_bytes_in_any_pieces(chunks: list[bytes]) -> None:
    buffer = _wire.FrameBuffer()
    for chunk in chunks:
        buffer.feed(chunk)
        try:
            buffer.messages()
        except _wire.ProtocolError:
            return


@given(json_values(), st.lists(st.text(max_size=10), max_size=3), st.booleans())
def test_an_outbox_round_trips_with_surrogates_replaced(value: Any, logs: list[str], ok: bool) -> None:
    message = _wire.Outbox(calls=[_wire.HostCall(1, "emit", value)], logs=logs, result=(ok, value), fault=None)
    (back,) = _read(_wire.encode(message))
    assert isinstance(back, _wire.Outbox) and back.logs == [_scrubbed(x) for x in logs]
    assert back.calls[0].args == _scrubbed(value) and back.result == (ok, _scrubbed(value))


def _read(data: bytes) -> list[_wire.Message]:
    buffer = _wire.FrameBuffer()
    buffer.feed(data)
    return buffer.messages()


def _scrubbed(value: Any) -> Any:
    if isinstance(value, str):
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    if isinstance(value, dict):
        return {_scrubbed(k): _scrubbed(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------- the query language

_QUERY_PIECES = st.sampled_from([
    "role", "name", "text", "value", "checked", "disabled", "expanded", "bbox.x", "level", "index", "nope",
    "=", "!=", "~", "^=", "$=", ">", ">=", "<", "<=", '"', '\\"', "\\", " ", "true", "mixed", "null",
    "1e400", "nan", "-1", "1" * 5000, "button", "Save", "\u00e9", "\ud800",
])


@given(st.lists(_QUERY_PIECES, max_size=10).map("".join) | st.text(max_size=40))
@example('role=button name~"Save \\" now" bbox.x>=-1e400')
@example("level>" + "1" * 5000)
def test_a_query_parses_or_names_its_error(text: str) -> None:
    try:
        query = as_query(text)
    except QuerySyntaxError as exc:
        assert 1 <= exc.column <= len(text) + 1
        return
    assert isinstance(query, Query) and query.conditions
    assert as_query(str(query)).conditions == query.conditions or '"' in text or "\\" in text


@given(st.sampled_from(NASTY_TEXT))
def test_nasty_text_never_crashes_the_query_parser(text: str) -> None:
    with contextlib.suppress(QuerySyntaxError):
        as_query(f'name~"{text}" ' + text)
