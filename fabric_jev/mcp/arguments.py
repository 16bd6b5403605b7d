"""The MCP tools' arguments, one typed model per tool (no I/O): their JSON Schemas are the tools'
input schemas (`schemas.derived_schema`), which the server checks every call against.

What a model cannot say is stated once, in `EXACTLY_ONE_PROGRAM`: a launch names its program
inline or by path, never both and never neither (JSON Schema's ``oneOf`` of two ``required``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..contract.program import Program

#: The one rule the argument models cannot state (see the module doc); docs/mcp.md lists it.
EXACTLY_ONE_PROGRAM: dict[str, Any] = {"oneOf": [{"required": ["program"]}, {"required": ["programPath"]}]}


class Arguments(BaseModel):
    """A tool's arguments: camelCase on the wire, nothing else accepted."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True,
                              alias_generator=lambda name: name[0] + name.title().replace("_", "")[1:])


#: Any JSON value, with its types spelled out: a generic client (the MCP Inspector) reads an untyped
#: property as a string and would send `{"n": 1}` as that text. (Arguments are checked against the
#: schema and read as sent: `float` here only names JSON's number, integers included.)
AnyJson = dict[str, Any] | list[Any] | str | float | bool | None

ProgramArgument = Annotated[Program, Field(
    description="A judgment program (docs/programs.md): JavaScript code run in a QuickJS sandbox, with JSON "
                "Schemas for its input and output.")]
RunId = Annotated[str, Field(min_length=1, max_length=64, description="A run id from jev_spawn or jev_run.")]
ProgramPath = Annotated[str, Field(
    min_length=1, max_length=4096,
    description="A program JSON file, relative to the server's programs folder (fabric-jev mcp --programs DIR); "
                "nothing outside it is read.")]
Intent = Annotated[str, Field(
    max_length=100_000,
    description="What the user asked for: the user text the auto-approval classifier judges the run's capability "
                "calls against, and an asked user sees. Default: the open session's latest real input "
                "(jev_session_post), read when each call is decided.")]
ProgramInput = Annotated[AnyJson, Field(
    description="The program's input: any JSON value matching its inputSchema (at most 32,768 bytes). "
                "Omitted means null.")]


class Launch(Arguments):
    """jev_run and jev_spawn: a program (inline or by path), its input, and what the user asked for."""

    model_config = ConfigDict(json_schema_extra=EXACTLY_ONE_PROGRAM)

    program: ProgramArgument | None = None
    program_path: ProgramPath | None = None
    input: ProgramInput = None
    intent: Intent | None = None


class Status(Arguments):
    id: RunId | None = None
    after: int = Field(default=0, ge=0)


class Wait(Arguments):
    id: RunId
    timeout_ms: int | None = Field(default=None, ge=1, le=86_400_000)


class Stop(Arguments):
    id: RunId


class Check(Arguments):
    model_config = ConfigDict(json_schema_extra=EXACTLY_ONE_PROGRAM)

    program: ProgramArgument | None = None
    program_path: ProgramPath | None = None
    observe: bool = Field(default=False, description="Check as a run spawned with observe (program.nextEvent exists).")


class ProposedAction(Arguments):
    ref: str = Field(min_length=1, max_length=256)
    risk: str = Field(default="execute", max_length=64)
    description: str | None = Field(default=None, max_length=4096)
    arguments: Annotated[AnyJson, Field(description="The action's arguments (any JSON).")] = None


class Turn(Arguments):
    role: str
    text: str


class Approve(Arguments):
    action: ProposedAction
    user_text: str | None = Field(default=None, description="The current user turn's text.")
    conversation: tuple[Turn, ...] | None = None
    session_actions: tuple[dict[str, Any], ...] | None = None
    policy: Literal["auto", "ask", "deny", "allow"] = "auto"
    headless: bool = Field(default=False, description="No human to ask: ask becomes deny.")
