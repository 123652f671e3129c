"""pydantic-ai (`pydantic-ai-slim`, pinned in .ci/tools/requirements.txt) as the host of
`dsh-tools serve --mode code`: the agent is given the server's tools as listed over MCP (the
official `mcp` client carries the calls; pydantic-ai's own MCP toolset needs FastMCP, which is
not pinned), its instructions are the server's `instructions`, and a deterministic FunctionModel
plays the model: it must see `run_code` alone with the SDK in its description, call it with a
TypeScript program, and read the result. No network is involved.

    pydantic_ai_host.py DSH_TOOLS ROOT
"""

import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import Tool

PROGRAM = (
    "const stats = await tools.file_stats({ path: 'Cargo.toml' });\n"
    "const files = await tools.list_files({ dir: 'src' });\n"
    "return { manifest_lines: stats.lines, any_files: files.length > 0 };\n"
)

seen = {}


def model(messages, info: AgentInfo) -> ModelResponse:
    returns = [part for message in messages for part in message.parts if isinstance(part, ToolReturnPart)]
    if not returns:
        seen["tools"] = [tool.name for tool in info.function_tools]
        seen["description"] = info.function_tools[0].description if info.function_tools else ""
        seen["instructions"] = info.instructions or ""
        return ModelResponse(
            parts=[ToolCallPart("run_code", {"code": PROGRAM, "description": "Count manifest lines"})]
        )
    return ModelResponse(parts=[TextPart(f"read: {returns[-1].content}")])


def check(condition, message):
    if not condition:
        raise SystemExit(f"check failed: {message}")


async def main(binary, root):
    server = StdioServerParameters(
        command=binary, args=["--builtin", "repo", "--root", root, "serve", "--mode", "code"]
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        listing = await session.list_tools()

        def bridge(tool):
            async def call(**arguments):
                result = await session.call_tool(tool.name, arguments)
                text = "".join(block.text for block in result.content if block.type == "text")
                return f"error: {text}" if result.is_error else text

            return Tool.from_schema(call, tool.name, tool.description, tool.input_schema)

        agent = Agent(
            FunctionModel(model),
            tools=[bridge(tool) for tool in listing.tools],
            instructions=init.instructions,
        )
        run = await agent.run("How many lines does the manifest have?")

    check(seen["tools"] == ["run_code"], f"the model sees run_code alone: {seen['tools']}")
    check("interface ToolArgsMap" in seen["description"], "the SDK is in run_code's description")
    check("run_code" in seen["instructions"], "the code-only rule reaches the model as instructions")
    output = run.output
    check(output.startswith("read: "), f"the model read the tool result: {output}")
    value = json.loads(output[len("read: "):])
    check(value["any_files"] is True and value["manifest_lines"] > 10, f"the program's value: {value}")
    print("pydantic-ai ok:", output)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
