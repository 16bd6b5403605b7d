"""The bearer-token rules both shared front doors (`serve`, `mcp --transport streamable-http`) keep."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabric_jev._bearer import authorization_of, bearer_matches, is_loopback, read_token_file, require_token
from fabric_jev.errors import ConfigError

TOKEN = "s3cret-token-0123456789"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_hosts_need_no_token(host: str) -> None:
    assert is_loopback(host)
    require_token(host, None, command="serve")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "example.org", "localhost.example.org"])
def test_a_host_beyond_loopback_without_a_token_is_refused(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(ConfigError, match=r"serve: --host .* a bearer token is required: pass --token-file"):
        require_token(host, None, command="serve")
    require_token(host, TOKEN, command="serve")


def _token_file(tmp_path: Path, data: bytes, mode: int = 0o600) -> Path:
    path = tmp_path / "token"
    path.write_bytes(data)
    os.chmod(path, mode)
    return path


def test_a_token_file_is_read_stripped(tmp_path: Path) -> None:
    assert read_token_file(_token_file(tmp_path, f"  {TOKEN}\n".encode())) == TOKEN


@pytest.mark.parametrize(("data", "mode", "reason"), [
    (TOKEN.encode(), 0o644, r"readable by others \(mode 0644\)"),
    (TOKEN.encode(), 0o640, r"readable by others \(mode 0640\)"),
    (b"short\n", 0o600, "shorter than 16 characters"),
    (b"", 0o600, "shorter than 16 characters"),
    (f"{TOKEN}\n{TOKEN}\n".encode(), 0o600, "more than one line"),
    (b"a" * 4097, 0o600, "larger than 4096 bytes"),
    (b"\xff" * 20, 0o600, "not UTF-8"),
    (b"abcdefgh ijklmnopq", 0o600, "a space or an unprintable character"),
])
def test_a_bad_token_file_is_refused_without_its_content(tmp_path: Path, data: bytes, mode: int,
                                                         reason: str) -> None:
    path = _token_file(tmp_path, data, mode)
    with pytest.raises(ConfigError, match=reason) as caught:
        read_token_file(path)
    assert str(path) in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_a_token_file_that_is_a_device_ends_at_once() -> None:
    with pytest.raises(ConfigError, match="cannot read token file: it is a character device"):
        read_token_file("/dev/zero")


@pytest.mark.parametrize("header", [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER   {TOKEN} "])
def test_the_bearer_scheme_is_case_insensitive(header: str) -> None:
    assert bearer_matches(header, TOKEN)


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer ", f"Basic {TOKEN}", f"Bearer {TOKEN}x",
                                    f"Bearer {TOKEN[:-1]}", TOKEN, "Bearer \udcff"])
def test_anything_but_the_token_is_refused(header: str | None) -> None:
    assert not bearer_matches(header, TOKEN)


@given(st.text(max_size=64))
def test_no_other_credential_matches(presented: str) -> None:
    assert bearer_matches(f"Bearer {presented}", TOKEN) == (presented.strip(" ") == TOKEN)


@given(st.lists(st.sampled_from([b"Authorization", b"authorization", b"AUTHORIZATION"]), min_size=2, max_size=4),
       st.lists(st.text(min_size=1, max_size=20).map(lambda t: t.encode("utf-8")), min_size=4, max_size=4),
       st.sampled_from([b"accept", b"x-authorization", b"content-type"]))
def test_more_than_one_authorization_header_carries_no_credential(names: list[bytes], values: list[bytes],
                                                                  other: bytes) -> None:
    # Which of two headers a layer reads must not decide who the client is: none is read.
    headers = [(other, b"x"), *((n, v) for n, v in zip(names, values, strict=False))]
    assert authorization_of(headers) is None
    assert authorization_of([(other, b"x"), (names[0], values[0])]) == values[0].decode("latin-1")
    assert authorization_of([(other, b"Bearer t")]) is None
