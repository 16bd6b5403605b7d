"""The programs of `fabric-jev mcp --programs DIR`: each one an MCP resource and, with
`--program-tools`, a tool of its own, named after the program and typed by its schemas.

An agent then lists what it may run, reads a program if it wants to, and calls it as
a typed tool: it never writes the artifact. The folder is read again at every list
and every call, so programs added or edited while the server runs are seen.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..contract.program import Program, parse_program
from ..contract.source import SOURCE_SUFFIXES
from .tools import ENVELOPE_SCHEMA

log = logging.getLogger("fabric_jev.mcp")

#: Resource URIs: this prefix and the program file's path inside the folder.
URI_PREFIX = "fabric-jev://programs/"
#: At most this many program files are listed (sorted by path); the rest are left out, with a warning.
MAX_LISTED = 256
#: How deep below the folder program files are looked for.
MAX_DEPTH = 4
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
        if not self.wraps_input:
            return dict(self.program.input_schema)
        return {"type": "object", "properties": {"input": self.program.input_schema}, "required": ["input"],
                "additionalProperties": False}

    def output_schema(self) -> dict[str, Any]:
        """The run's envelope, its `result` typed by the program's outputSchema."""
        properties = {**ENVELOPE_SCHEMA["properties"], "result": self.program.output_schema}
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


def tool_name(program_name: str) -> str:
    """An MCP tool name (letters, digits, _ and -, at most 64) made from a program's name."""
    return _NOT_IN_A_TOOL_NAME.sub("_", program_name)[:64]


class UnknownResource(LookupError):
    """A resource URI that names no program of the folder."""


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

    def _paths(self) -> list[str]:
        root = self.root
        found: list[str] = []
        for here, dirs, files in os.walk(root):  # symlinked folders are not followed
            depth = len(Path(here).relative_to(root).parts)
            dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if depth < MAX_DEPTH else []
            found.extend(Path(here, f).relative_to(root).as_posix() for f in files
                         if f.lower().endswith(SUFFIXES) and not f.startswith("."))
        found.sort()
        if len(found) > MAX_LISTED:
            log.warning("the programs folder has %d program files; the first %d are listed", len(found),
                        MAX_LISTED)
        return found[:MAX_LISTED]

    def programs(self) -> list[ListedProgram]:
        """Every file that holds a valid program, sorted by path; the others (an input file,
        a broken program) are left out and logged."""
        listed: list[ListedProgram] = []
        taken = set(self.reserved)
        for path in self._paths():
            try:
                program = parse_program(self.load(path))
            except Exception as exc:  # not a program (or not readable): it is simply not listed
                log.info("not listed: %s: %s", path, " ".join(str(exc).split())[:300])
                continue
            name: str | None = None
            if self.tools:
                name = tool_name(program.name)
                if name in taken:
                    log.warning("program %s gets no tool of its own: the tool name %r is taken", path, name)
                    name = None
                else:
                    taken.add(name)
            listed.append(ListedProgram(path, program, name))
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
        if not self.tools or name in self.reserved:
            return None
        return next((p for p in self.programs() if p.tool == name), None)
