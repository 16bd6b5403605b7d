"""The wire between host and worker: every message survives encode → frames → decode."""

from __future__ import annotations

import pytest

from fabric_jev.sandbox import _wire

MESSAGES: list[_wire.Message] = [
    _wire.Load(code="return 1", input_json="null", slice_ms=100, hard_slice_ms=250,
               memory_bytes=1 << 20, stack_bytes=1 << 18),
    _wire.Settle(7, True, '{"a":[1,2]}'),
    _wire.Settle(8, False, "line one\nline two é"),
    _wire.Ready(),
    _wire.LoadFailed("SyntaxError: unexpected token (line 1, column 3)"),
    _wire.Outbox(calls=[_wire.HostCall(1, "emit", {"x": 1}), _wire.HostCall(2, "sleep", 5)],
                 logs=["a", "[warn] b"], result=None, fault=None),
    _wire.Outbox(calls=[], logs=[], result=(True, {"done": 1}), fault=None),
    _wire.Outbox(calls=[], logs=[], result=None, fault="Uncaught exception in a timer callback: x"),
    _wire.Fatal("memory", "out of memory"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(message: _wire.Message) -> None:
    buffer = _wire.FrameBuffer()
    buffer.feed(_wire.encode(message))
    assert buffer.messages() == [message]


def test_frames_split_anywhere_come_out_whole_and_in_order() -> None:
    data = b"".join(_wire.encode(m) for m in MESSAGES)
    buffer = _wire.FrameBuffer()
    out: list[_wire.Message] = []
    for i in range(0, len(data), 3):
        buffer.feed(data[i:i + 3])
        out.extend(buffer.messages())
    assert out == MESSAGES


def test_lone_surrogates_from_the_guest_become_replacement_characters() -> None:
    # The prelude writes a lone surrogate as a JSON escape; nothing decoded may hold one.
    payload = '{"c":[[1,"tool",{"ref":"t.\\ud800"}]],"l":["\\udc00"],"d":[false,"Error: \\ud800"],"f":null}'
    message = _wire.decode(b"O", payload.encode())
    assert isinstance(message, _wire.Outbox)
    assert message.calls[0].args == {"ref": "t.\ufffd"}
    assert message.logs == ["\ufffd"] and message.result == (False, "Error: \ufffd")
    assert _wire.decode(b"E", "bad \udc80".encode("utf-8", "surrogatepass")) == \
        _wire.LoadFailed("bad \ufffd\ufffd\ufffd")


def test_a_settle_with_a_lone_surrogate_still_encodes() -> None:
    buffer = _wire.FrameBuffer()
    buffer.feed(_wire.encode(_wire.Settle(1, False, "no \ud800 here")))
    (settle,) = buffer.messages()
    assert settle == _wire.Settle(1, False, "no ? here")


@pytest.mark.parametrize("tag, payload", [(b"Z", b""), (b"O", b"{"), (b"O", b'{"c":[[1]]}'),
                                          (b"S", b"x"), (b"F", b"[1]"),
                                          (b"O", b'{"c":[],"l":[{}],"d":null,"f":null}')])
def test_frames_outside_the_protocol_are_refused(tag: bytes, payload: bytes) -> None:
    with pytest.raises(_wire.ProtocolError):
        _wire.decode(tag, payload)


def _deep(leaf: str, depth: int) -> str:
    return "[" * depth + leaf + "]" * depth


def test_a_deep_value_holding_a_lone_surrogate_is_scrubbed_without_recursing() -> None:
    # 600 levels: the old recursive scrub hit Python's recursion limit here.
    payload = '{"c":[[1,"emit",' + _deep('"\\ud800\\\\ud800"', 600) + ']],"l":[],"d":null,"f":null}'
    message = _wire.decode(b"O", payload.encode())
    assert isinstance(message, _wire.Outbox)
    value = message.calls[0].args
    for _ in range(600):
        (value,) = value
    assert value == "\ufffd\\ud800"  # an escaped backslash is not an escape


@pytest.mark.parametrize("escape, decoded", [
    ("\\ud83d\\ude00", "\U0001F600"), ("\\uD83D\\uDE00", "\U0001F600"), ("\\ud83d", "\ufffd"),
    ("\\ude00\\ud83d", "\ufffd\ufffd"), ("\\ud83d\\ud83d\\ude00", "\ufffd\U0001F600"),
    ("\\\\ud83d", "\\ud83d"), ("\\\\\\ud83d", "\\\ufffd"), ("\\u00e9", "\u00e9")])
def test_surrogate_escapes_pair_or_become_replacement_characters(escape: str, decoded: str) -> None:
    payload = f'{{"c":[],"l":["{escape}"],"d":[true,{{"{escape}":1}}],"f":null}}'
    message = _wire.decode(b"O", payload.encode())
    assert isinstance(message, _wire.Outbox)
    assert message.logs == [decoded] and message.result == (True, {decoded: 1})


def test_a_frame_nested_past_the_parsers_depth_is_a_protocol_error() -> None:
    payload = '{"c":[],"l":[],"d":[true,' + _deep("1", 100_000) + '],"f":null}'
    with pytest.raises(_wire.ProtocolError, match="nested too deeply"):
        _wire.decode(b"O", payload.encode())


def test_the_input_is_encoded_once_on_its_way_in() -> None:
    from fabric_jev.contract.values import checked_json

    _, text = checked_json({"say": 'a "quote"\nand é', "n": [1, 2.5]}, {"type": "object"}, "input")
    assert text == '{"say":"a \\"quote\\"\\nand é","n":[1,2.5]}'  # the cap's text is the wire's text
    load = _wire.Load(code="return input", input_json=text, slice_ms=100, hard_slice_ms=250,
                      memory_bytes=1 << 20, stack_bytes=1 << 18)
    frame = _wire.encode(load)
    assert frame.endswith(b"\n" + text.encode("utf-8"))  # carried as it is, not escaped again
    buffer = _wire.FrameBuffer()
    buffer.feed(frame)
    assert buffer.messages() == [load]
