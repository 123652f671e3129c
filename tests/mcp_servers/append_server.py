"""An MCP server over stdio with one state-changing tool, on the official SDK (`mcp==2.3.0`):
`append_line(line)` appends `line` to the file named by the first argument and returns it. It
declares no hints, so it is neither read-only nor idempotent: a call must never run twice.
Several processes may append to one file: each line is one `write` in append mode.
"""

import os
import sys

from mcp.server.mcpserver import MCPServer

PATH = sys.argv[1]
server = MCPServer("append")


@server.tool()
def append_line(line: str) -> str:
    """Appends `line` to the shared file."""
    fd = os.open(PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
    return line


if __name__ == "__main__":
    server.run("stdio")
