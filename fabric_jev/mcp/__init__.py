"""`fabric-jev mcp`: judgment programs as MCP tools, on the official `mcp` SDK (the `mcp` extra).

Importing this package imports the SDK; the CLI imports it only inside the
`mcp` command. See docs/mcp.md.
"""

from .asking import ElicitationApprover
from .server import JevTools, ProgramFolder, build_server, serve_stdio
from .sessions import SessionTools
from .tools import TOOLS

__all__ = ["TOOLS", "ElicitationApprover", "JevTools", "ProgramFolder", "SessionTools", "build_server",
           "serve_stdio"]
