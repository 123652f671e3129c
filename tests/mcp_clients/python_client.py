"""Drives `dsh-tools serve` over stdio with the official Python MCP SDK client (`mcp`, pinned in
.ci/tools/requirements.txt). Run by tests/mcp/serve.rs; exits non-zero with the failed check.

    python_client.py SCENARIO DSH_TOOLS ROOT|SERVER_COMMAND [EVENTS_PATH|FILESYSTEM_SERVER]

Scenarios: `native` (paged listing, outputSchema, annotations, a native call, failures as
isError), `code` (code-only listing and instructions, a run_code program with progress, a
cancelled slow call), `proxy` (code mode over a real MCP server started behind us: a program
calling two of its tools; in both mode its progress reaching us), `annotations` (server-filesystem's
hints and titles re-served unchanged beside the built-in tools' declared ones).
"""

import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import PaginatedRequestParams


def check(condition, message):
    if not condition:
        raise SystemExit(f"check failed: {message}")


def text_of(result):
    return "".join(block.text for block in result.content if block.type == "text")


async def list_all(session):
    pages = []
    cursor = None
    while True:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        pages.append(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return pages


async def native(binary, root, _events):
    server = StdioServerParameters(
        command=binary, args=["--builtin", "repo", "--root", root, "serve", "--page-size", "3"]
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        pages = await list_all(session)
        check([len(page) for page in pages] == [3, 1], f"pages of 3 then 1, got {pages}")
        tools = {tool.name: tool for page in pages for tool in page}
        check(sorted(tools) == ["file_stats", "grep", "list_files", "read_file"], f"names {sorted(tools)}")
        stats = tools["file_stats"]
        check(stats.output_schema is not None and stats.output_schema["type"] == "object", "file_stats outputSchema")
        check(stats.annotations.read_only_hint is True, "readOnlyHint as declared")
        check(stats.annotations.open_world_hint is False, "openWorldHint as declared")
        check(stats.annotations.destructive_hint is None, "an undeclared hint is left out")
        check(stats.annotations.title == "File stats", f"title {stats.annotations.title}")
        check("$schema" not in stats.input_schema, "MCP dialect drops $schema")

        result = await session.call_tool("file_stats", {"path": "Cargo.toml"})
        check(result.is_error is False, f"file_stats succeeded: {text_of(result)}")
        check(result.structured_content["path"] == "Cargo.toml", f"structuredContent {result.structured_content}")
        check(result.structured_content["bytes"] > 0, "bytes counted")

        bad = await session.call_tool("read_file", {"offset": 0})
        check(bad.is_error is True, "invalid arguments are an isError result")
        check("invalid arguments" in text_of(bad), f"validation text: {text_of(bad)}")

        try:
            await session.call_tool("no_such_tool", {})
            check(False, "an unknown tool is a protocol error, not a result")
        except MCPError as error:
            check(error.code == -32602, f"an unknown tool is -32602 (invalid params): {error.code}")
    print("native ok")


async def annotations(binary, root, filesystem):
    """A real server's hints and title re-served unchanged next to our own declared ones."""
    server = StdioServerParameters(
        command=binary, args=["--builtin", "repo", "--root", root, "--mcp", f"filesystem={filesystem} {root}", "serve"]
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {tool.name: tool for page in await list_all(session) for tool in page}
        write_file = tools["mcp__filesystem__write_file"].annotations
        check(write_file.title == "Write File", f"upstream title kept: {write_file.title!r}")
        check(tools["mcp__filesystem__write_file"].title == "Write File", "upstream title as the tool's title")
        hints = (write_file.read_only_hint, write_file.destructive_hint, write_file.idempotent_hint, write_file.open_world_hint)
        check(hints == (False, True, True, False), f"upstream hints kept: {hints}")
        read_only = tools["mcp__filesystem__read_text_file"].annotations
        check(read_only.read_only_hint is True, f"upstream readOnlyHint kept: {read_only}")
        check(tools["read_file"].annotations.read_only_hint is True, "our declared readOnlyHint")
    print("annotations ok")


async def code(binary, root, events):
    server = StdioServerParameters(
        command=binary,
        args=["--builtin", "repo", "--root", root, "serve", "--mode", "code", "--events", events],
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        check("run_code" in (init.instructions or ""), f"code-only rule in instructions: {init.instructions!r}")
        listing = await session.list_tools()
        check([tool.name for tool in listing.tools] == ["run_code"], "run_code alone")
        description = listing.tools[0].description
        check("interface ToolArgsMap" in description and "file_stats:" in description, "SDK in run_code's description")

        progress = []

        async def on_progress(value, total, message):
            progress.append((value, message))

        program = (
            "const [stats, files] = await Promise.all([\n"
            "  tools.file_stats({ path: 'Cargo.toml' }),\n"
            "  tools.list_files({ dir: 'src' }),\n"
            "]);\n"
            "console.log('listed', files.length > 0);\n"
            "return { bytes: stats.bytes };\n"
        )
        result = await session.call_tool(
            "run_code", {"code": program, "description": "Size of the manifest"}, progress_callback=on_progress
        )
        check(result.is_error is False, f"run_code succeeded: {text_of(result)}")
        check("listed true" in text_of(result) and '"bytes"' in text_of(result), f"run_code text: {text_of(result)}")
        messages = sorted(message for _, message in progress)
        check(
            messages == ["file_stats ok", "file_stats started", "list_files ok", "list_files started"],
            f"progress per sub-call: {progress}",
        )
        check([value for value, _ in progress] == [1, 2, 3, 4], f"progress increases: {progress}")

        failed = await session.call_tool("run_code", {"code": "throw new Error('boom')", "description": "Fail"})
        check(failed.is_error is True and "boom" in text_of(failed), f"a failed program is isError: {text_of(failed)}")

        # A slow call: the program makes one call, then waits forever. Cancel once the call is
        # seen to have settled, so the cancellation lands inside the running program.
        started = anyio.Event()

        async def on_slow_progress(value, total, message):
            if message == "list_files ok":
                started.set()

        slow = "await tools.list_files({ dir: 'src' });\nawait new Promise(() => setInterval(() => {}, 1000));\n"
        with anyio.fail_after(120):
            async with anyio.create_task_group() as group:

                async def slow_call():
                    await session.call_tool(
                        "run_code", {"code": slow, "description": "Wait forever"}, progress_callback=on_slow_progress
                    )

                group.start_soon(slow_call)
                await started.wait()
                group.cancel_scope.cancel()

        after = await session.call_tool("run_code", {"code": "return 1 + 1", "description": "Add"})
        check(after.is_error is False and "2" in text_of(after), "the server still answers after a cancel")
    print("code ok")


async def proxy(binary, server_command, _events):
    server = StdioServerParameters(command=binary, args=["--mcp", server_command, "serve", "--mode", "code"])
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listing = await session.list_tools()
        check([tool.name for tool in listing.tools] == ["run_code"], "run_code alone")
        description = listing.tools[0].description
        check('"mcp__everything__get-sum"' in description and "mcp__everything__echo" in description, "SDK of the server's tools")
        program = (
            "const [sum, echo] = await Promise.all([\n"
            "  tools['mcp__everything__get-sum']({ a: 2, b: 40 }),\n"
            "  tools.mcp__everything__echo({ message: 'through dsh-tools' }),\n"
            "]);\n"
            "return [sum.content[0].text, echo.content[0].text];\n"
        )
        result = await session.call_tool("run_code", {"code": program, "description": "Sum and echo"})
        text = text_of(result)
        check(result.is_error is False, f"run_code over the server succeeded: {text}")
        check("The sum of 2 and 40 is 42." in text and "Echo: through dsh-tools" in text, f"both results: {text}")

    server = StdioServerParameters(command=binary, args=["--mcp", server_command, "serve", "--mode", "both"])
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        progress = []

        async def on_progress(value, total, message):
            progress.append((value, total))

        result = await session.call_tool(
            "mcp__everything__trigger-long-running-operation",
            {"duration": 0.2, "steps": 2},
            progress_callback=on_progress,
        )
        check(result.is_error is False, f"long-running operation: {text_of(result)}")
        # The server reports after each step; its last report can race its own response inside
        # the client bridge, so at least the first one must pass through, with the server's figures.
        check(progress[:1] == [(1, 2)], f"the server's progress passes through: {progress}")
        check(all(total == 2 for _, total in progress), f"totals: {progress}")
    print("proxy ok")


SCENARIOS = {"native": native, "code": code, "proxy": proxy, "annotations": annotations}

if __name__ == "__main__":
    scenario, binary, root = sys.argv[1:4]
    events = sys.argv[4] if len(sys.argv) > 4 else ""
    anyio.run(SCENARIOS[scenario], binary, root, events)
