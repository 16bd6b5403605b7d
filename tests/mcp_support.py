"""`fabric-jev mcp` driven by the official MCP SDK's client, for the MCP tests."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

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
            yield session
