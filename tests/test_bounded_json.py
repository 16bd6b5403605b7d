"""The bounded parser for untrusted JSON: every refusal is one line, nothing slow or recursive."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from fabric_jev._json import JSONInputError, loads_bounded, read_json_file


@pytest.mark.parametrize(("data", "expected"), [
    (b"", "x is empty"),
    (b"  \n", "x is empty"),
    (b"\xef\xbb\xbf{}", "x starts with a UTF-8 byte order mark; save it without one"),
    (b'{"a": "\xff"}', "x is not UTF-8 (invalid byte at offset 7)"),
    (b"[" * 5000 + b"]" * 5000, "x nests deeper than 64 levels"),
    (b'{"a":' * 65 + b"1" + b"}" * 65, "x nests deeper than 64 levels"),
    (b"[NaN]", "x contains NaN, which JSON does not allow"),
    (b'{"a": -Infinity}', "x contains -Infinity, which JSON does not allow"),
    (b'{"a": 1,}', "x is not valid JSON: Expecting property name enclosed in double quotes (line 1, column 9)"),
    (b"[1]" + b" " * 100_000, "x is larger than 100000 bytes"),
])
def test_refusals_are_one_specific_line(data: bytes, expected: str) -> None:
    with pytest.raises(JSONInputError) as info:
        loads_bounded(data, what="x", max_bytes=100_000)
    assert str(info.value) == expected
    assert "\n" not in str(info.value)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = '{"a": "' + "[{" * 500 + '\\"]"}'
    assert loads_bounded(text, what="x", max_bytes=10_000, max_depth=2) == {"a": "[{" * 500 + '"]'}


def test_exactly_the_maximum_depth_is_accepted() -> None:
    assert loads_bounded("[" * 64 + "]" * 64, what="x", max_bytes=1000) is not None


def test_escaped_quotes_in_an_unterminated_string_are_refused_as_invalid() -> None:
    # Crafted so that a naive string pattern would retry from every quote (quadratic time).
    text = '"' + '\\"' * 200_000
    with pytest.raises(JSONInputError, match=r"^x is not valid JSON: Unterminated string"):
        loads_bounded(text, what="x", max_bytes=10**6)


def test_a_lone_surrogate_in_a_str_is_refused() -> None:
    with pytest.raises(JSONInputError, match="lone surrogate"):
        loads_bounded('"\ud800"', what="x", max_bytes=100)


def test_files_over_the_size_cap_are_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(50 * 1024 * 1024)  # sparse: 50 MB on paper, never read
    with pytest.raises(JSONInputError) as info:
        read_json_file(big, what="input", max_bytes=1024 * 1024)
    assert str(info.value) == f"input {big} is larger than 1048576 bytes (52428800 bytes)"


def test_missing_file_and_directory_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(JSONInputError, match=r"^cannot read program .*nope\.json: No such file or directory$"):
        read_json_file(tmp_path / "nope.json", what="program", max_bytes=100)
    with pytest.raises(JSONInputError, match=r"^cannot read program .*: it is a directory, not a regular file$"):
        read_json_file(tmp_path, what="program", max_bytes=100)


def test_standard_input_is_read_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    with pytest.raises(JSONInputError, match=r"^input on standard input is empty$"):
        read_json_file("-", what="input", max_bytes=100)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"ok": true}')))
    assert read_json_file("-", what="input", max_bytes=100) == {"ok": True}


# ---------------------------------------------------------------- found by tests/test_fuzz_parsers.py


@pytest.mark.parametrize(("text", "needle"), [
    ("1" * 5000, "holds an integer with more than 4300 digits"),
    ("[1e400]", "holds the number 1e400, too large for a finite float"),
    ('{"a": -1E999}', "holds the number -1E999"),
    ('"\\ud800"', "contains a lone surrogate (an unpaired \\uD800-\\uDFFF escape)"),
    ('{"k\\udfff": 1}', "contains a lone surrogate"),
])
def test_what_the_parse_reads_but_nothing_could_use_is_refused(text: str, needle: str) -> None:
    # Each was accepted (infinity, a lone surrogate) or raised a bare ValueError.
    with pytest.raises(JSONInputError) as info:
        loads_bounded(text, what="input", max_bytes=1 << 20)
    assert str(info.value).startswith("input ") and needle in str(info.value)


def test_escaped_pairs_and_escaped_backslashes_are_still_text() -> None:
    assert loads_bounded('["\\ud83d\\ude00", "\\\\ud800", 1.5e300]', what="x", max_bytes=100) == \
        ["\U0001F600", "\\ud800", 1.5e300]


def _deep(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_bytes(b'{"a":' * 5000 + b"1" + b"}" * 5000)
    return path


def test_the_config_loader_reads_through_the_bounded_reader(tmp_path: Path) -> None:
    from fabric_jev import ConfigError, HostConfig

    with pytest.raises(ConfigError, match=r"^config file .* nests deeper than 64 levels$"):
        HostConfig.load(_deep(tmp_path, "config.json"))
    big = tmp_path / "big.json"
    big.write_bytes(b"{}" + b" " * (1 << 20))
    with pytest.raises(ConfigError, match=r"is larger than 1048576 bytes"):
        HostConfig.load(big)


def test_the_cassette_loader_reads_through_the_bounded_reader(tmp_path: Path) -> None:
    from fabric_jev import ConfigError, evaluator_from_spec

    with pytest.raises(ConfigError, match=r"^cassette .* nests deeper than 64 levels$"):
        evaluator_from_spec(f"cassette:{_deep(tmp_path, 'cassette.json')}")


def test_the_auth_store_reads_through_the_bounded_reader(tmp_path: Path) -> None:
    from fabric_jev import CredentialError
    from fabric_jev.evaluators import AuthStore

    store = AuthStore(_deep(tmp_path, "auth.json"))
    with pytest.raises(CredentialError, match=r"^the auth store .* is unreadable$"):
        store.get("typesafe")
    assert store.has("typesafe") is False
