"""`fabric-jev mcp`: judgment programs as MCP tools, on the official `mcp` SDK (the `mcp` extra).

Importing this package imports the SDK; the CLI imports it only inside the
`mcp` command. See docs/mcp.md.
"""

from .server import JevTools, ProgramFolder, build_server, serve_stdio
from .tools import TOOLS

__all__ = ["TOOLS", "JevTools", "ProgramFolder", "build_server", "serve_stdio"]
