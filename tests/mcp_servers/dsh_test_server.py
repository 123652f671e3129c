"""An MCP server of our own for the bridge's tests, on the official SDK (`mcp==2.3.0`).

Tools: `add_tool` / `remove_tool` change the tool list and send `notifications/tools/list_changed`
on demand (on 2026-07-28, on the client's `subscriptions/listen` stream); `progress` reports progress; `slow` sleeps; `fail` returns an `isError` result;
`shout` writes to stderr. Runs over stdio.
"""

import asyncio
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("dsh-test-server")


def _extra_tool(name: str):
    async def extra(text: str) -> str:
        return f"{name}: {text}"

    extra.__name__ = name
    return extra


async def announce(ctx: Context):
    """Tells clients the list changed: on a 2025 session as a notification, on 2026-07-28
    through the `subscriptions/listen` streams they opened."""
    await ctx.session.send_tool_list_changed()
    await ctx.notify_tools_changed()


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Registers a tool `name` (echoes its `text`) and announces the new list."""
    server.add_tool(_extra_tool(name), name=name, description=f"added at run time: {name}")
    await announce(ctx)
    return f"added {name}"


@server.tool()
async def remove_tool(name: str, ctx: Context) -> str:
    """Removes a tool and announces the new list."""
    server.remove_tool(name)
    await announce(ctx)
    return f"removed {name}"


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Reports `steps` progress notifications, then returns."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"finished {steps} steps"


@server.tool()
async def slow(seconds: float) -> str:
    """Sleeps for `seconds`."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}s"


@server.tool()
async def fail(message: str) -> str:
    """Always fails with `message` (an `isError` result)."""
    raise ToolError(message)


@server.tool()
async def big(mib: int) -> str:
    """Answers with a text of `mib` MiB (for the line limits)."""
    return "x" * (mib << 20)


@server.tool()
async def shout(text: str) -> str:
    """Writes `text` to stderr."""
    print(text, file=sys.stderr, flush=True)
    return "written"


if __name__ == "__main__":
    server.run("stdio")
