"""Where a route's key comes from: the auth store, the environment, a command.

The key stays in the host process. It is never put in a guest value, a
request body, an envelope, a log or an error message; the command's output is
never echoed, even when it is rejected.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio

from .._files import atomic_write, config_dir
from .._process import end_process_group, read_available, wait_process_exit
from ..errors import ConfigError, CredentialError
from .base import CredentialSource, CredentialStatus


class KeyedRoute(Protocol):
    """What a key lookup needs of a route: a System One `Route` or an `LlmRoute`."""

    @property
    def name(self) -> str: ...
    @property
    def store_key(self) -> str: ...
    @property
    def env_keys(self) -> tuple[str, ...]: ...

COMMAND_TIMEOUT_S = 5.0
COMMAND_MAX_BYTES = 16_384
COMMAND_MAX_ARGS = 16
#: The largest auth store read (it holds a key per login).
MAX_AUTH_STORE_BYTES = 1 << 20


def default_auth_path() -> Path:
    return config_dir() / "auth.json"


class AuthStore:
    """A private JSON file of keys by login name (mode 0600, folder 0700)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_auth_path()
        # Parsed contents keyed by the file's identity, so a lookup per request
        # costs one stat while `login` from another process is still seen.
        self._cache: tuple[tuple[int, int, int], dict[str, Any]] | None = None

    def _read(self) -> dict[str, Any]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return {}
        except OSError:
            raise CredentialError(f"the auth store {self.path} is unreadable") from None
        signature = (st.st_ino, st.st_mtime_ns, st.st_size)
        if self._cache is not None and self._cache[0] == signature:
            return dict(self._cache[1])
        from .._json import JSONInputError, read_json_file

        try:
            data = read_json_file(self.path, what="auth store", max_bytes=MAX_AUTH_STORE_BYTES)
        except JSONInputError:  # the message would name the file only; no content is shown
            raise CredentialError(f"the auth store {self.path} is unreadable") from None
        data = data if isinstance(data, dict) else {}
        self._cache = (signature, data)
        return dict(data)

    def get(self, name: str) -> str | None:
        entry = self._read().get(name)
        key = entry.get("key") if isinstance(entry, dict) else None
        return key if isinstance(key, str) and key else None

    def has(self, name: str) -> bool:
        try:
            return self.get(name) is not None
        except CredentialError:
            return False

    def set(self, name: str, key: str) -> None:
        key = key.strip()
        if not key or "\n" in key:
            raise CredentialError("a key must be one non-empty line")
        data = self._read()
        data[name] = {"type": "api_key", "key": key}
        self._write(data)

    def remove(self, name: str) -> bool:
        data = self._read()
        if name not in data:
            return False
        del data[name]
        self._write(data)
        return True

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(data, indent=2), mode=0o600)


def check_command(argv: object) -> tuple[str, ...]:
    if (not isinstance(argv, list | tuple) or not 1 <= len(argv) <= COMMAND_MAX_ARGS
            or not all(isinstance(a, str) and a for a in argv)):
        raise ConfigError(f"credentialCommand must be an argv list of 1-{COMMAND_MAX_ARGS} "
                          "non-empty strings (no shell)")
    return tuple(argv)


async def run_credential_command(argv: Sequence[str], *, timeout: float = COMMAND_TIMEOUT_S) -> str:
    """Run the command in its own process group; return its single trimmed line."""
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        raise CredentialError("credential command could not be started") from None
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    out = bytearray()
    failure: str | None = None
    try:
        with anyio.move_on_after(timeout):
            while True:
                chunk = await read_available(fd)
                if not chunk:
                    break
                out += chunk
                if len(out) > COMMAND_MAX_BYTES:
                    failure = f"credential command printed more than {COMMAND_MAX_BYTES} bytes"
                    break
            if failure is None:
                await wait_process_exit(proc)
        if failure is None:
            if proc.returncode is None:
                failure = f"credential command timed out after {timeout:g} s"
            elif proc.returncode != 0:
                failure = f"credential command failed (exit {proc.returncode})"
    finally:
        # Whatever it started goes too: the whole group is killed, then reaped.
        await end_process_group(proc)
    if failure is not None:
        raise CredentialError(failure)
    try:
        text = out.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise CredentialError("credential command output is not UTF-8 text") from None
    if not text:
        raise CredentialError("credential command printed nothing")
    if "\n" in text or "\r" in text:
        raise CredentialError("credential command printed more than one line")
    return text


class CredentialResolver:
    """Looks a route's key up in order: auth store, environment, command (cached)."""

    def __init__(self, route: KeyedRoute, *, store: AuthStore | None = None,
                 command: Sequence[str] | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        self.route = route
        self.store = store or AuthStore()
        self.command = check_command(command) if command is not None else None
        self._environ = environ
        self._cached: str | None = None

    def _env(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def status(self) -> CredentialStatus:
        """Presence only: never runs the command, never touches the network."""
        if self.store.has(self.route.store_key):
            return CredentialStatus(configured=True, source=CredentialSource.STORE,
                                    detail=f"auth store entry {self.route.store_key!r}")
        for name in self.route.env_keys:
            if self._env().get(name, "").strip():
                return CredentialStatus(configured=True, source=CredentialSource.ENVIRONMENT, detail=name)
        if self.command:
            return CredentialStatus(configured=True, source=CredentialSource.COMMAND,
                                    detail="credentialCommand (not run by status)")
        return CredentialStatus(configured=False, source=CredentialSource.MISSING)

    def missing_message(self) -> str:
        """What to do when no source has a key (the error and status say the same)."""
        env = f"set {' or '.join(self.route.env_keys)}, " if self.route.env_keys else ""
        return (f"no credentials for the {self.route.name} route: run `fabric-jev login "
                f"{self.route.name}`, {env}or configure credentialCommand")

    async def key(self) -> str:
        key = self.store.get(self.route.store_key)
        if key:
            return key
        for name in self.route.env_keys:
            value = self._env().get(name, "").strip()
            if value:
                return value
        if self.command:
            if self._cached is None:
                self._cached = await run_credential_command(self.command)
            return self._cached
        raise CredentialError(self.missing_message())

    def reload(self) -> None:
        self._cached = None
