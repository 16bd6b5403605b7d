"""Reading a program from a file: the one loader every command and the MCP server use.

A file is either the JSON artifact (`program.json`) or program source that
carries its contract (`triage.ts`, `triage.js`; see `program_files.header`). Both
come back as the JSON artifact, which `JevHost.run` and friends validate.
"""

from __future__ import annotations

from pathlib import Path

from .._json import JSONInputError, loads_bounded, read_bounded
from ..errors import ProgramInvalid
from .header import is_source_name, looks_like_source, program_from_source

__all__ = ["MAX_PROGRAM_FILE_BYTES", "load_program", "program_name_of"]

#: A program file over this size is refused before it is read (code is at most 64 KiB;
#: schemas and the JSON escapes of the artifact make up the rest).
MAX_PROGRAM_FILE_BYTES = 1 << 20


def _read(path: str | Path, label: str) -> bytes:
    try:
        return read_bounded(path, label=label, max_bytes=MAX_PROGRAM_FILE_BYTES)
    except JSONInputError as exc:
        raise ProgramInvalid(str(exc)) from None


def _text(raw: bytes, label: str) -> str:
    if raw.startswith(b"\xef\xbb\xbf"):
        raise ProgramInvalid(f"{label} starts with a UTF-8 byte order mark; save it without one")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProgramInvalid(f"{label} is not UTF-8 (invalid byte at offset {exc.start})") from None


def program_name_of(path: str | Path) -> str:
    """The name a program file's program gets when its comment names none: the file's stem."""
    name = Path(path).name
    for suffix in (".json", ".js", ".mjs", ".ts", ".mts"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)] or name
    return name


def language_of_name(name: str) -> str | None:
    """A program file's language by its suffix: `.ts`/`.mts` TypeScript, `.js`/`.mjs` JavaScript."""
    lowered = name.lower()
    if lowered.endswith((".ts", ".mts")):
        return "typescript"
    if lowered.endswith((".js", ".mjs")):
        return "javascript"
    return None


def load_program(path: str | Path, *, what: str = "program") -> dict[str, object]:
    """The JSON artifact of the program in `path` ("-" reads standard input).

    `.js`/`.mjs`/`.ts`/`.mts` files are program source whose first comment
    holds the contract (their suffix gives the artifact's `language`);
    `.json` files are the artifact itself; any other name is read as source
    when it opens with a `/* @program` comment. The file is refused unread
    over 1 MiB. Raises `ProgramInvalid` (a `LaunchRejected`) with a one-line
    message naming the file; the artifact's own rules are checked when it is
    launched (or by `contract.parse_program`).
    """
    label = f"{what} on standard input" if str(path) == "-" else f"{what} {path}"
    raw = _read(path, label)
    name = str(path)
    if name.lower().endswith(".json"):
        source = False
    elif is_source_name(name):
        source = True
    else:
        source = looks_like_source(_text(raw, label))
    if source:
        default = None if name == "-" else program_name_of(path)
        artifact = program_from_source(_text(raw, label), what=label, default_name=default)
        language = language_of_name(name)
        if language is not None and "language" not in artifact:
            artifact["language"] = language
        return artifact
    try:
        artifact = loads_bounded(raw, what=label, max_bytes=MAX_PROGRAM_FILE_BYTES, unique_keys=True)
    except JSONInputError as exc:
        raise ProgramInvalid(str(exc)) from None
    if not isinstance(artifact, dict):
        raise ProgramInvalid(f"{label}: a program is a JSON object (docs/programs.md)")
    return artifact
