"""Bearer tokens for a host that others reach: `serve` and `mcp --transport streamable-http`.

Pure rules and one bounded file read, shared by both front doors so that they refuse and accept
the same things:

- a host bound beyond loopback must have a token (`require_token`), so that opening a port to
  the network is never also opening it to everyone;
- a token comes from a file (`read_token_file`), never from argv (which `ps` shows) — a regular
  file of at most 4 KiB, one line, that no other user can read;
- a presented token is compared in constant time (`bearer_matches`), after the scheme, which
  is case-insensitive (RFC 9110 §11.1);
- a request carries a credential only in exactly one `Authorization` header
  (`authorization_of`): with two, which one a layer reads would decide who the client is, so
  such a request carries none and is answered 401.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from ._files import open_regular
from .errors import ConfigError

#: A token file larger than this is not a token.
MAX_TOKEN_BYTES = 4096
#: Fewer characters than this is guessable; refuse it rather than protect nothing.
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the port on this machine: 127.0.0.0/8, ::1 or `localhost`."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def require_token(host: str, token: str | None, *, command: str) -> None:
    """Refuse to bind beyond loopback without a token: `ConfigError` naming the option to add."""
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"{command}: --host {host} reaches beyond this machine, so a bearer token is required: "
            f"pass --token-file FILE (a file only you can read, holding one line of at least "
            f"{MIN_TOKEN_CHARS} characters)")


def read_token_file(path: str | Path) -> str:
    """The token in `path`: one line, stripped, at least 16 characters, from a regular file of at
    most 4 KiB that neither its group nor others can read. `ConfigError` otherwise; the message
    names the file and the rule, never the content."""

    def refuse(message: str) -> ConfigError:
        return ConfigError(f"token file {path}: {message}")

    with open_regular(path, label="token file", error=lambda m: ConfigError(m)) as f:
        mode = os.fstat(f.fileno()).st_mode
        if stat.S_IMODE(mode) & 0o077:
            raise refuse(f"readable by others (mode {stat.S_IMODE(mode):04o}); chmod 600 it")
        data = f.read(MAX_TOKEN_BYTES + 1)
    if len(data) > MAX_TOKEN_BYTES:
        raise refuse(f"larger than {MAX_TOKEN_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise refuse("not UTF-8") from None
    token = text.strip()
    if "\n" in token or "\r" in token:
        raise refuse("more than one line")
    if any(c.isspace() or not c.isprintable() for c in token):
        raise refuse("the token holds a space or an unprintable character")
    if len(token) < MIN_TOKEN_CHARS:
        raise refuse(f"the token is shorter than {MIN_TOKEN_CHARS} characters")
    return token


def authorization_of(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The value of the request's one `Authorization` header (ASGI raw headers); None when it has
    none or more than one (RFC 9110 §11.6.2 allows one credential: every layer must agree on it)."""
    found: str | None = None
    for name, value in headers:
        if name.lower() == b"authorization":
            if found is not None:
                return None
            found = value.decode("latin-1")
    return found


def bearer_matches(authorization: str | None, token: str) -> bool:
    """Whether an `Authorization` header value carries `token` as a Bearer credential. The
    comparison takes the same time wherever the first difference is."""
    scheme, _, presented = (authorization or "").partition(" ")
    presented = presented.strip(" ")
    if scheme.lower() != "bearer" or not presented:
        return False
    return hmac.compare_digest(presented.encode("utf-8", "surrogatepass"), token.encode("utf-8"))
