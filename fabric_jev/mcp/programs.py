"""The programs of `fabric-jev mcp --programs DIR`: each one an MCP resource and, with
`--program-tools`, a tool of its own, named after the program and typed by its schemas.

An agent then lists what it may run, reads a program if it wants to, and calls it as
a typed tool: it never writes the artifact. The folder is looked at again at every list,
so programs added or edited while the server runs are seen, but a file is parsed again
only when its modification time or size changed (a file that is not a program is
remembered as such too, with the reason). What is looked at is bounded: MAX_SCANNED_FOLDERS
folders, MAX_SCANNED_FILES candidate files. A candidate is told cheaply, and only a
candidate is read whole: its suffix is a program's; it is a regular file (a FIFO, a device
or a socket is skipped without being opened); it is at most MAX_PROGRAM_FILE_BYTES by its
stat (a larger one is skipped unopened); and its first SNIFF_BYTES open as a program does:
a `/* @program` comment for source, `{` and one of the artifact's keys for `.json`. So a
folder of large junk costs a bounded walk and SNIFF_BYTES a file, once per change, and a
program sorted after it is still listed: only valid programs count towards MAX_LISTED.
`skipped` says why each file of the last listing was left out. A tool call finds its
program by the last listing and checks only that file.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._files import kind_of, read_head
from ..contract.program import Program, parse_program
from ..program_files import MAX_PROGRAM_FILE_BYTES
from ..program_files.header import HEADER_KEYS, SOURCE_SUFFIXES
from .tools import ENVELOPE_SCHEMA

log = logging.getLogger("fabric_jev.mcp")

#: Resource URIs: this prefix and the program file's path inside the folder.
URI_PREFIX = "fabric-jev://programs/"
#: At most this many programs are listed (sorted by path); the rest are left out, with a warning.
MAX_LISTED = 256
#: How deep below the folder program files are looked for.
MAX_DEPTH = 4
#: Folders walked per listing (the folder itself first, then breadth first, sorted by name).
MAX_SCANNED_FOLDERS = 512
#: Files with a program's suffix looked at per listing.
MAX_SCANNED_FILES = 4096
#: What is read of a file to tell whether it may be a program at all.
SNIFF_BYTES = 512
# A byte order mark is let through: the loader then says what is wrong with the file.
_SOURCE_OPENING = re.compile(rb"\A(?:\xef\xbb\xbf)?\s*/\*\*?[ \t]*@program\b")
_JSON_OPENING = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"([^"\\]{1,64})"\s*:')
#: The keys an artifact may have: a `.json` program's first key is one of them.
_ARTIFACT_KEYS = frozenset({"code", *HEADER_KEYS})
SUFFIXES = (".json", *SOURCE_SUFFIXES)
_NOT_IN_A_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class ListedProgram:
    """One program file of the folder, valid as a program."""

    path: str  # inside the folder, with / separators
    program: Program
    tool: str | None  # its tool's name, when it is offered as one

    @property
    def uri(self) -> str:
        return URI_PREFIX + self.path

    @property
    def wraps_input(self) -> bool:
        """A tool's arguments are an object: a program whose input is not one takes it as `input`."""
        return self.program.input_schema.get("type") != "object"

    def input_schema(self) -> dict[str, Any]:
        """The tool's published input schema (see `published`): the run checks the program's own.

        The program's schema is data, not a model: written as it is, under `input` when the
        program's input is not an object (docs/mcp.md lists the exceptions to derived schemas)."""
        schema: dict[str, Any] = published(self.program.input_schema)
        if not self.wraps_input:
            return schema
        return {"type": "object", "properties": {"input": schema}, "required": ["input"],
                "additionalProperties": False}

    def output_schema(self) -> dict[str, Any]:
        """The run's envelope, its `result` typed by the program's outputSchema (as published)."""
        properties = {**ENVELOPE_SCHEMA["properties"], "result": published(self.program.output_schema)}
        return {**ENVELOPE_SCHEMA, "properties": properties}

    def description(self) -> str:
        about = self.program.input_schema.get("description")
        return (f"Run the judgment program {self.program.name!r} ({self.path}) and return its envelope; "
                "`result` follows the program's outputSchema. "
                + ("Arguments: {input: <the program's input>}. " if self.wraps_input else
                   "The arguments are the program's input. ")
                + (f"Input: {about}" if isinstance(about, str) else "")).strip()

    def input_from(self, arguments: dict[str, Any]) -> Any:
        return arguments.get("input") if self.wraps_input else arguments


_SUBSCHEMA_KEYS = ("additionalProperties", "items")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf")


def published(schema: Any) -> Any:
    """A program's schema as a tool publishes it: without the `pattern`s that another engine
    could read otherwise or refuse (formats.portable_pattern). A client validates arguments and
    results with its own regex engine (the Python SDK's client with `re`, JavaScript ones with
    ECMA-262): an RE2-only `\\pL` or `\\z` makes it fail. The pattern still holds: the run
    validates input and result against the program's own schema, with RE2."""
    from ..contract.formats import portable_pattern

    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "pattern" and isinstance(value, str) and not portable_pattern(value):
            continue
        if key == "properties" and isinstance(value, dict):
            value = {name: published(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMA_KEYS:
            value = published(value)
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            value = [published(sub) for sub in value]
        out[key] = value
    return out


def tool_name(program_name: str) -> str:
    """An MCP tool name (letters, digits, _ and -, at most 64) made from a program's name."""
    return _NOT_IN_A_TOOL_NAME.sub("_", program_name)[:64]


class UnknownResource(LookupError):
    """A resource URI that names no program of the folder."""


@dataclass(frozen=True, slots=True)
class _Seen:
    """A file as last parsed: its stat stamp, and the program it holds (None: not a program)."""

    stamp: tuple[int, int, int]  # (mtime_ns, size, st_mode)
    program: Program | None
    reason: str | None = None  # why it is not listed, when it is not


class ProgramCatalog:
    """What the programs folder holds, read on demand.

    `root` is the folder, `load(path)` the server's one way to read a program file inside
    it, which refuses paths outside the folder and files over 1 MiB.
    """

    def __init__(self, root: Path, load: Callable[[str], Any], *, tools: bool,
                 reserved: frozenset[str]) -> None:
        self.root, self.load = root, load
        self.tools = tools
        self.reserved = reserved  # the built-in tools' names, which no program may take
        self._seen: dict[str, _Seen] = {}
        self._tools: dict[str, str] = {}  # tool name → path, from the last listing
        self._lock = threading.Lock()  # listings run in worker threads
        self.parsed = 0  # files parsed so far (each changed file once)
        #: Bytes read of the folder's files so far: SNIFF_BYTES at most per candidate, and the
        #: whole of those that open as a program does.
        self.bytes_read = 0
        #: Why each file with a program's suffix was left out of the last listing, by path.
        self.skipped: dict[str, str] = {}

    def _candidates(self) -> list[tuple[str, tuple[int, int, int]]]:
        """Entries with a program's suffix (files, or what is not one: a FIFO, a device) and
        their stamps, by a bounded breadth-first walk."""
        found: list[tuple[str, tuple[int, int, int]]] = []
        queue: deque[tuple[Path, int]] = deque([(self.root, 0)])
        folders = 0
        capped = False
        while queue:
            here, depth = queue.popleft()
            folders += 1
            if folders > MAX_SCANNED_FOLDERS:
                capped = True
                break
            try:
                with os.scandir(here) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):  # symlinked folders are not followed
                        if depth + 1 <= MAX_DEPTH:
                            queue.append((Path(entry.path), depth + 1))
                        continue
                    if not entry.name.lower().endswith(SUFFIXES):
                        continue
                    info = entry.stat()
                except OSError:
                    continue
                if len(found) >= MAX_SCANNED_FILES:
                    capped = True
                    break
                found.append((Path(entry.path).relative_to(self.root).as_posix(),
                              (info.st_mtime_ns, info.st_size, info.st_mode)))
            if capped:
                break
        if capped:
            log.warning("the programs folder is larger than %d folders or %d program-like files; the rest is "
                        "not looked at", MAX_SCANNED_FOLDERS, MAX_SCANNED_FILES)
        found.sort()
        return found

    def _program(self, path: str, stamp: tuple[int, int, int]) -> Program | None:
        """The program in `path`, parsed only when its stamp changed since the last time."""
        with self._lock:
            seen = self._seen.get(path)
        if seen is None or seen.stamp != stamp:
            seen = self._look_at(path, stamp)
            if seen.reason is not None:
                log.info("not listed: %s: %s", path, seen.reason)
            with self._lock:
                self._seen[path] = seen
        return seen.program

    def _look_at(self, path: str, stamp: tuple[int, int, int]) -> _Seen:
        """What `path` holds: a program, or the reason it is none. Only a candidate (see the
        module doc) is read whole; the rest costs a stat, or SNIFF_BYTES."""
        _, size, mode = stamp
        if not stat.S_ISREG(mode):
            return _Seen(stamp, None, f"it is {kind_of(mode)}, not a regular file")
        if size > MAX_PROGRAM_FILE_BYTES:
            return _Seen(stamp, None, f"it is larger than {MAX_PROGRAM_FILE_BYTES} bytes ({size} bytes)")
        problem = self._sniff(path)
        if problem is not None:
            return _Seen(stamp, None, problem)
        self.parsed += 1
        self.bytes_read += size
        try:
            return _Seen(stamp, parse_program(self.load(path)))
        except Exception as exc:  # not a program (or not readable): it is simply not listed
            return _Seen(stamp, None, " ".join(str(exc).split())[:300])

    def _sniff(self, path: str) -> str | None:
        """Why the file does not open as a program does (None: it does); SNIFF_BYTES at most are
        read, and a FIFO or device that took the file's place is refused by the opened descriptor."""
        try:
            head, _ = read_head(self.root / path, label=path, max_bytes=SNIFF_BYTES, error=ValueError)
        except ValueError as exc:
            return str(exc)
        self.bytes_read += len(head)
        if not path.lower().endswith(".json"):
            if _SOURCE_OPENING.match(head):
                return None
            return "it does not open with a /* @program comment"
        opening = _JSON_OPENING.match(head)
        if opening is None:
            return f"its first {SNIFF_BYTES} bytes do not open a JSON object with a key"
        key = opening.group(1).decode("utf-8", "replace")
        if key not in _ARTIFACT_KEYS:
            return f"its first key {key!r} is none of a program artifact's ({', '.join(sorted(_ARTIFACT_KEYS))})"
        return None

    def programs(self) -> list[ListedProgram]:
        """Every file that holds a valid program, sorted by path; the others (an input file,
        a broken program, junk) are left out and logged."""
        listed: list[ListedProgram] = []
        taken = set(self.reserved)
        candidates = self._candidates()
        for path, stamp in candidates:
            program = self._program(path, stamp)
            if program is None:
                continue
            if len(listed) >= MAX_LISTED:
                log.warning("the programs folder has more than %d programs; the first %d are listed",
                            MAX_LISTED, MAX_LISTED)
                break
            name: str | None = None
            if self.tools:
                name = tool_name(program.name)
                if name in taken:
                    log.warning("program %s gets no tool of its own: the tool name %r is taken", path, name)
                    name = None
                else:
                    taken.add(name)
            listed.append(ListedProgram(path, program, name))
        present = {path for path, _ in candidates}
        with self._lock:
            for gone in set(self._seen) - present:
                del self._seen[gone]
            self._tools = {p.tool: p.path for p in listed if p.tool is not None}
            self.skipped = {path: seen.reason for path, seen in self._seen.items() if seen.reason is not None}
        return listed

    def resources(self) -> list[Any]:
        import mcp_types as types

        return [types.Resource(uri=p.uri, name=p.program.name, title=p.program.name, mime_type="application/json",
                               description=f"Judgment program from {p.path} (the JSON artifact). Run it with "
                                           + (f"the tool {p.tool} or " if p.tool else "")
                                           + f"jev_run {{programPath: {p.path!r}}}.")
                for p in self.programs()]

    def read(self, uri: str) -> str:
        """The JSON artifact of the program a resource URI names."""
        if not uri.startswith(URI_PREFIX):
            raise UnknownResource(f"unknown resource {uri!r}: program resources start with {URI_PREFIX}")
        path = uri[len(URI_PREFIX):]
        if not path.lower().endswith(SUFFIXES):
            raise UnknownResource(f"unknown resource {uri!r}: not a program file")
        program = parse_program(self.load(path))
        return json.dumps(program.to_json(), ensure_ascii=False, indent=2)

    def tool_specs(self) -> list[Any]:
        import mcp_types as types

        return [types.Tool(name=p.tool, title=p.program.name, description=p.description(),
                           input_schema=p.input_schema(), output_schema=p.output_schema())
                for p in self.programs() if p.tool is not None]

    def find_tool(self, name: str) -> ListedProgram | None:
        """The program a tool name stands for: by the last listing, its one file checked again
        (re-parsed only if it changed); the folder is listed again only for a name not known."""
        if not self.tools or name in self.reserved:
            return None
        with self._lock:
            path = self._tools.get(name)
        if path is not None:
            try:
                info = os.stat(self.root / path, follow_symlinks=False)
            except OSError:
                info = None
            if info is not None and stat.S_ISREG(info.st_mode):
                program = self._program(path, (info.st_mtime_ns, info.st_size, info.st_mode))
                if program is not None and tool_name(program.name) == name:
                    return ListedProgram(path, program, name)
        return next((p for p in self.programs() if p.tool == name), None)
