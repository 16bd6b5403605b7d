"""The MCP server: the tools of tools.py over one JevHost, on the official `mcp` SDK's stdio transport.

Every tool call is checked against its input schema first; an error of
ours becomes an MCP tool error (`isError`) whose text is our one-line
message, never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import stat
import sys
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import jsonschema
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from .._files import kind_of
from ..contract.config import HostConfig
from ..contract.evaluation import validate_request
from ..errors import JevError, LaunchRejected, ProgramInvalid, RequestInvalid
from ..evaluators.base import Evaluator
from ..host import JevHost
from ..program_files import load_program
from ..typecheck.slots import SLOT_OWNER
from .asking import CURRENT_CALL, ElicitationApprover, ToolCall
from .clients import ClientLimitReached, ClientRuns, client_of
from .lines import claimed_stdin
from .programs import ListedProgram, ProgramCatalog, UnknownResource
from .session_tools import SESSION_TOOL_NAMES
from .sessions import SessionError, SessionTools
from .tools import CHECKED_BY_THEIR_MODEL, TOOLS
from .unreadable import AnsweringUnreadable

log = logging.getLogger("fabric_jev.mcp")

#: Progress events queued for one call before the oldest-first sending falls behind and drops.
PROGRESS_BUFFER = 256


class ToolError(Exception):
    """A tool call that cannot be served; the message is what the client sees."""


def _check_arguments(name: str, arguments: dict[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(TOOLS[name]["input"])
    error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if error is not None and error.validator == "oneOf" and not error.absolute_path:
        raise ToolError(f"invalid arguments for {name}: give exactly one of program (inline) or programPath")
    if error is not None:
        where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        message = error.message if len(error.message) <= 300 else error.message[:299] + "…"
        raise ToolError(f"invalid arguments for {name}: {message}" + (f" at {where}" if where else ""))


class ProgramFolder:
    """Programs by path: only regular files under one folder, symlinks resolved before the check."""

    def __init__(self, folder: str | Path | None) -> None:
        self.root = Path(folder).resolve(strict=True) if folder is not None else None

    def load(self, relative: str) -> Any:
        if self.root is None:
            raise ToolError("programs by path are off: start the server with --programs DIR")
        if "\x00" in relative:
            raise ToolError(f"program path {relative!r} contains a NUL byte")
        try:
            candidate = (self.root / relative).resolve()
            if not candidate.is_relative_to(self.root):
                raise ToolError(f"program path {relative!r} is outside the programs folder")
            found = candidate.is_file()
        except RuntimeError:  # pathlib's word for a symlink loop met while resolving
            raise ToolError(f"program path {relative!r} is a symlink loop") from None
        except OSError as exc:
            raise ToolError(f"program path {relative!r} cannot be used: {exc.strerror or exc}") from None
        if not found:
            raise ToolError(f"no program file {relative!r} in the programs folder")
        try:
            # The one loader of program files: a .ts/.js file with its @program comment, or the artifact.
            return load_program(candidate, what=f"program {relative}")
        except ProgramInvalid as exc:
            raise ToolError(str(exc)) from None


class JevTools:
    """The tool implementations over one host, shared by every call of the session."""

    def __init__(self, host: JevHost, config: HostConfig, programs: ProgramFolder,
                 approver: ElicitationApprover | None = None, clients: ClientRuns | None = None) -> None:
        self.host, self.config, self.programs = host, config, programs
        self.approver = approver
        self.clients = clients  # per-client limits (over HTTP; stdio has one client)
        self.sessions = SessionTools(host, self._program)

    def _program(self, arguments: dict[str, Any]) -> Any:
        if "program" in arguments:
            return arguments["program"]
        return self.programs.load(arguments["programPath"])

    async def call(self, name: str, arguments: dict[str, Any], ctx: ServerRequestContext[Any]) -> Any:
        if name not in TOOLS:
            raise ToolError(f"unknown tool {name!r} (tools: {', '.join(TOOLS)})")
        if name not in CHECKED_BY_THEIR_MODEL:
            _check_arguments(name, arguments)
        if self.approver is not None:
            self.approver.connected(ctx.session)
        # Runs started by this call ask its client (on this call's channel while it is open).
        origin = ToolCall(ctx.session, ctx.request_id)
        token = CURRENT_CALL.set(origin)
        # Compiles of this call are charged to its client, not to the program's name.
        owner = SLOT_OWNER.set(client_of(ctx) if self.clients is not None else None)
        try:
            if name in SESSION_TOOL_NAMES:
                return await self.sessions.call(name, arguments)
            handler = getattr(self, "_" + name)
            return await handler(arguments, ctx)
        finally:
            origin.live = False
            SLOT_OWNER.reset(owner)
            CURRENT_CALL.reset(token)

    async def _announce(self, program: Any, arguments: dict[str, Any]) -> None:
        """Type errors that do not refuse the launch (mode warn), on the server's standard error before
        the run starts (the result lists them too: `type_error_notes`). The verdict is then cached for
        the launch; a refusal raises the launch's own TypeScriptError."""
        from ..contract.program import parse_program
        from ..typecheck.checker import check_for_launch

        parsed = parse_program(program)
        report = await check_for_launch(parsed, self.config, observed=False)
        where = f"fabric-jev mcp: {arguments.get('programPath') or parsed.name}"
        for line in report.warnings(where):
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    async def _jev_run(self, arguments: dict[str, Any], ctx: ServerRequestContext[Any]) -> Any:
        if self.clients is None:
            return await self._run(arguments, ctx)
        async with self.clients.placed(client_of(ctx)):  # in the client's own queue first
            return await self._run(arguments, ctx)

    async def _run(self, arguments: dict[str, Any], ctx: ServerRequestContext[Any]) -> Any:
        program = self._program(arguments)
        await self._announce(program, arguments)
        send, receive = anyio.create_memory_object_stream[tuple[int, Any]](PROGRESS_BUFFER)

        def on_event(event: Any) -> None:
            # A client slower than the program loses events, as the run's own ring does.
            with contextlib.suppress(anyio.WouldBlock):
                send.send_nowait((event.sequence, event.value))

        envelope: Any = None
        refused: JevError | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(_forward_progress, receive, ctx)
            try:
                envelope = await self.host.run(program, arguments.get("input"), on_event=on_event,
                                               intent=arguments.get("intent"))
            except JevError as exc:  # raised below, outside the task group, as itself
                refused = exc
            finally:
                send.close()
        if refused is not None:
            raise refused
        return envelope.to_json()

    async def _jev_spawn(self, arguments: dict[str, Any], ctx: ServerRequestContext[Any]) -> Any:
        program = self._program(arguments)
        await self._announce(program, arguments)
        if self.clients is None:
            return (await self.host.spawn(program, arguments.get("input"), intent=arguments.get("intent"))).to_json()
        client = client_of(ctx)
        try:
            self.clients.place_spawned(client)
        except ClientLimitReached as exc:
            raise ToolError(str(exc)) from None
        try:
            envelope = await self.host.spawn(program, arguments.get("input"), intent=arguments.get("intent"))
        except BaseException:
            self.clients.unplace_spawned(client)
            raise
        self.clients.release_when(client, partial(self.host.wait, envelope.id))
        return envelope.to_json()

    async def _jev_status(self, arguments: dict[str, Any], ctx: ServerRequestContext[Any]) -> Any:
        if "id" not in arguments:
            return self.host.status().to_json()
        return self.host.envelope(arguments["id"], arguments.get("after", 0)).to_json()

    async def _jev_wait(self, arguments: dict[str, Any], ctx: ServerRequestContext[Any]) -> Any:
        run_id = arguments["id"]
        after = 0
        timeout = arguments.get("timeoutMs", math.inf)
        with anyio.move_on_after(timeout / 1000 if timeout != math.inf else math.inf):
            while True:
                envelope = await self.host.progress(run_id, after)
                for event in envelope.events:
                    await ctx.session.report_progress(event.sequence, None, _event_text(event.value))
                after = envelope.next_sequence - 1
                if envelope.state.terminal:
                    return envelope.to_json()
        return self.host.envelope(run_id).to_json()

    _jev_join = _jev_wait  # the alias: one handler

    async def _jev_stop(self, arguments: dict[str, Any], ctx: ServerRequestContext[Any]) -> Any:
        return (await self.host.stop(arguments["id"])).to_json()

    async def _jev_check(self, arguments: dict[str, Any], ctx: ServerRequestContext[Any]) -> Any:
        from ..contract.program import parse_program
        from ..typecheck.checker import CheckerUnavailable, check_result

        program = parse_program(self._program(arguments))
        observed = arguments.get("observe", False) or "jev.advise" in program.requires
        try:
            return (await check_result(program, observed=observed, config=self.config.typecheck)).to_json()
        except CheckerUnavailable as exc:
            raise ToolError(f"the type checker is not available: {exc}") from None

    @contextlib.asynccontextmanager
    async def _calling(self, ctx: ServerRequestContext[Any]) -> AsyncIterator[None]:
        """One of the client's call places for a call that asks the model outside a run (over HTTP)."""
        if self.clients is None:
            yield
            return
        async with self.clients.calling(client_of(ctx)):
            yield

    async def _jev_evaluate(self, arguments: dict[str, Any], ctx: ServerRequestContext[Any]) -> Any:
        async with self._calling(ctx):
            return await self._evaluate(arguments)

    async def _evaluate(self, arguments: dict[str, Any]) -> Any:
        try:
            request = validate_request(arguments, max_bytes=self.config.max_request_bytes)
        except RequestInvalid as exc:
            raise ToolError(f"invalid arguments for jev_evaluate: {exc}") from None
        evaluation = await self.host.evaluator.evaluate(request, timeout=self.config.request_timeout_ms / 1000)
        return evaluation.to_json()

    async def _jev_approve(self, arguments: dict[str, Any], ctx: ServerRequestContext[Any]) -> Any:
        async with self._calling(ctx):
            return await self._approve(arguments)

    async def _approve(self, arguments: dict[str, Any]) -> Any:
        from ..approval import ApprovalRequest, ProposedAction, classify
        from ..approval.settings import with_user_threshold

        raw = arguments["action"]
        action = ProposedAction(ref=raw["ref"], risk=raw.get("risk", "execute"),
                                description=raw.get("description", ""), arguments=raw.get("arguments"))
        request = ApprovalRequest(user_text=arguments.get("userText"), action=action,
                                  conversation=list(arguments.get("conversation", [])),
                                  session_actions=list(arguments.get("sessionActions", [])))
        # One threshold, as for `fabric-jev approve`: the config's, else settings.json's.
        config = with_user_threshold(self.config)
        decision = await classify(request, evaluator=self.host.evaluator,
                                  threshold=config.auto_approval_threshold,
                                  policy=arguments.get("policy", "auto"),
                                  headless=arguments.get("headless", False),
                                  timeout=config.request_timeout_ms / 1000,
                                  max_request_bytes=config.max_request_bytes)
        return decision.to_json()


def type_error_notes(value: Any) -> list[str]:
    """For an envelope whose launch type check found errors and ran anyway (mode warn): one text
    block listing them, one line each, after the envelope's JSON in the tool result (a client that
    reads the first text block as the envelope still finds it there)."""
    check = value.get("typecheck") if isinstance(value, dict) else None
    if not isinstance(check, dict) or check.get("outcome") != "errors":
        return []
    listed = [f"type error: {line}" for line in check.get("diagnostics", [])]
    language = check.get("language")
    listed.append(f"{check.get('errors')} type error(s) in all ({language}); typecheck.{language} is "
                  f"{check.get('mode')}, so the program ran anyway")
    return ["\n".join(listed)]


def _event_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


async def _forward_progress(receive: Any, ctx: ServerRequestContext[Any]) -> None:
    """Each event as a progress notification: progress is its sequence, the message its JSON value."""
    async with receive:
        async for sequence, value in receive:
            await ctx.session.report_progress(sequence, None, _event_text(value))


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, LaunchRejected):
        return f"launch rejected: {exc}"
    return str(exc)


def build_server(tools: JevTools, catalog: ProgramCatalog | None = None) -> Server[Any]:
    """The low-level SDK server with our list/call handlers (schemas exactly as in tools.py), and
    the programs folder's resources and program tools (programs.py) when a catalog is given."""
    from .. import __version__

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        # The folder's programs are read and parsed in a worker thread, as for resources/list.
        programs = [] if catalog is None else await anyio.to_thread.run_sync(catalog.tool_specs)
        return types.ListToolsResult(tools=[
            types.Tool(name=name, description=spec["description"], input_schema=spec["input"],
                       output_schema=spec["output"] if spec["output"].get("type") == "object" else None)
            for name, spec in TOOLS.items()] + programs)

    async def call_tool(ctx: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in TOOLS and catalog is not None:
            listed = await anyio.to_thread.run_sync(catalog.find_tool, params.name)
            if listed is not None:
                return await _call_program_tool(tools, listed, dict(params.arguments or {}), ctx)
        try:
            value = await tools.call(params.name, dict(params.arguments or {}), ctx)
        except (ToolError, JevError, SessionError) as exc:
            return _error_result(_error_text(exc))
        except Exception as exc:  # a bug of ours: one line to the client, the traceback to our log
            log.exception("tool %s failed", params.name)
            return _error_result(f"internal error in {params.name}: {type(exc).__name__}")
        notes = [types.TextContent(type="text", text=note) for note in type_error_notes(value)]
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(value, ensure_ascii=False)), *notes],
            structured_content=value)

    return Server("fabric-jev", version=__version__,
                  instructions="Run sandboxed, typed judgment programs (QuickJS + Jev) and ask Jev "
                               "typed questions. Start with jev_run; see each tool's input schema.",
                  on_list_tools=list_tools, on_call_tool=call_tool, **_resource_handlers(catalog))


# ---------------------------------------------------------------- the programs folder (programs.py)


async def _call_program_tool(tools: JevTools, listed: ListedProgram, arguments: dict[str, Any],
                             ctx: ServerRequestContext[Any]) -> types.CallToolResult:
    """A program's own tool: jev_run on its file with the arguments as its input. A run that
    does not complete is a tool error (its envelope still comes along)."""
    if listed.wraps_input and set(arguments) - {"input"}:
        return _error_result(f"invalid arguments for {listed.tool}: give the program's input as "
                             f"{{input: ...}} (unexpected: {', '.join(sorted(set(arguments) - {'input'}))})")
    try:
        envelope = await tools.call("jev_run", {"programPath": listed.path, "input": listed.input_from(arguments)},
                                    ctx)
    except (ToolError, JevError) as exc:
        return _error_result(_error_text(exc))
    except Exception as exc:  # a bug of ours: one line to the client, the traceback to our log
        log.exception("tool %s failed", listed.tool)
        return _error_result(f"internal error in {listed.tool}: {type(exc).__name__}")
    text = json.dumps(envelope, ensure_ascii=False)
    notes = [types.TextContent(type="text", text=note) for note in type_error_notes(envelope)]
    if envelope.get("state") == "completed":
        return types.CallToolResult(content=[types.TextContent(type="text", text=text), *notes],
                                    structured_content=envelope)
    summary = f"the run ended {envelope.get('state')}: " + " ".join(str(envelope.get("error", "")).split())
    return types.CallToolResult(content=[types.TextContent(type="text", text=summary),
                                         types.TextContent(type="text", text=text), *notes],
                                structured_content=envelope, is_error=True)


def _resource_handlers(catalog: ProgramCatalog | None) -> dict[str, Any]:
    """resources/list and resources/read over the programs folder: one resource per program."""
    if catalog is None:
        return {}

    async def list_resources(ctx: ServerRequestContext[Any],
                             params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=await anyio.to_thread.run_sync(catalog.resources))

    async def read_resource(ctx: ServerRequestContext[Any],
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            text = await anyio.to_thread.run_sync(catalog.read, uri)
        except (UnknownResource, ToolError, JevError) as exc:
            from mcp.shared.exceptions import MCPError

            raise MCPError(code=types.INVALID_PARAMS, message=" ".join(str(exc).split())) from None
        return types.ReadResourceResult(contents=[
            types.TextResourceContents(uri=uri, mime_type="application/json", text=text)])

    return {"on_list_resources": list_resources, "on_read_resource": read_resource}


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def open_programs(programs: str | None) -> ProgramFolder:
    """The programs folder of --programs, checked to be one (ProgramInvalid otherwise)."""
    try:
        folder = ProgramFolder(programs)
        mode = None if folder.root is None else folder.root.stat().st_mode
    except OSError as exc:
        raise ProgramInvalid(f"cannot use programs folder {programs}: {exc.strerror}") from None
    if mode is not None and not stat.S_ISDIR(mode):  # /dev/zero, a FIFO, a file: no folder to list
        raise ProgramInvalid(f"cannot use programs folder {programs}: it is {kind_of(mode)}, not a folder")
    return folder


@contextlib.asynccontextmanager
async def closed_if_refused(evaluator: Evaluator | str | None) -> AsyncIterator[None]:
    """What a server checks before its host starts: refused there, the evaluator it was given is
    closed here (the host would have closed it: a cassette is written, a model server stopped)."""
    try:
        yield
    except BaseException:
        if evaluator is not None and not isinstance(evaluator, str):
            with anyio.CancelScope(shield=True):
                await evaluator.aclose()
        raise


async def serve_stdio(config: HostConfig, evaluator: Evaluator | str | None, *, programs: str | None = None,
                      connectors: Callable[[JevHost, HostConfig], object] | None = None,
                      program_tools: bool = False) -> None:
    """Serve MCP on standard input/output until the client closes it; runs end with the server."""
    from mcp.server.stdio import stdio_server

    async with closed_if_refused(evaluator):
        folder = open_programs(programs)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    # An `ask` becomes an elicitation to the client's user (a refusal if the client cannot be asked).
    approver = ElicitationApprover()
    async with JevHost(config, evaluator=evaluator, approver=approver) as host:
        if connectors is not None:
            connectors(host, config)
        catalog = None if folder.root is None else ProgramCatalog(
            folder.root, folder.load, tools=program_tools, reserved=frozenset(TOOLS))
        server = build_server(JevTools(host, config, folder, approver), catalog)
        with claimed_stdin() as stdin:
            async with stdio_server(stdin=anyio.wrap_file(stdin)) as (read_stream, write_stream):
                await server.run(AnsweringUnreadable(read_stream, write_stream), write_stream,
                                 server.create_initialization_options())
