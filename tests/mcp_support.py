"""`fabric-jev mcp` driven by the official MCP SDK's client, for the MCP tests.

Every successful tool result any MCP test receives is held to the output schema the server
advertised for that tool (`check_result`): it validates, and it has no key the schema does not
declare. The schemas' `required` lists every field the model always writes, so a field that
went missing fails too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent


@asynccontextmanager
async def mcp_client(tmp: Path, *args: str, elicit: Any = None) -> AsyncIterator[ClientSession]:
    """An initialized client of `fabric-jev mcp ARGS` over stdio: its home is under `tmp`, its
    standard error goes to tmp/server.log (a pipe nobody reads could stall it), and `elicit`
    is the client's elicitation callback (None: a client without elicitation)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "fabric_jev", "mcp", *args],
                                   env={**os.environ, "FABRIC_JEV_HOME": str(tmp / "home")}, cwd=ROOT)
    with (tmp / "server.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write, elicitation_callback=elicit) as session:
            await session.initialize()
            _check_every_result(session, {tool.name: tool.output_schema
                                          for tool in (await session.list_tools()).tools})
            yield session


def _check_every_result(session: ClientSession, schemas: dict[str, Any]) -> None:
    call = session.call_tool

    async def call_tool(name: str, arguments: Any = None, *args: Any, **kwargs: Any) -> Any:
        result = await call(name, arguments, *args, **kwargs)
        if not result.is_error and schemas.get(name) is not None:
            check_result(name, schemas[name], result.structured_content)
        return result

    session.call_tool = call_tool  # type: ignore[method-assign]


def check_result(name: str, schema: dict[str, Any], value: Any) -> None:
    """A tool's result against its advertised output schema: valid, and no undeclared key."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = [e.message for e in validator.iter_errors(value)]
    assert not errors, f"{name}'s result breaks its advertised output schema: {errors[:3]}"
    branches = schema.get("anyOf", [schema])
    declared = [set(b["properties"]) for b in branches
                if jsonschema.Draft202012Validator({**b, "$defs": schema.get("$defs", {})}).is_valid(value)]
    assert any(set(value) <= keys for keys in declared), \
        f"{name}'s result has keys its schema does not declare: {sorted(set(value) - set().union(*declared))}"
