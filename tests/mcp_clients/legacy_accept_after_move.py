"""A 2025-11-25 session runs a durable program whose two calls each ask. At the first
elicitation it prints ASKED and waits for a line on stdin (meanwhile the journal's owner decides
call #0), then accepts. Prints each message it was shown and the call's result."""
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult

url, token = sys.argv[1:3]
shown = []

PROGRAM = (
    "const a = await tools.append_line({line: 'shown-one'});"
    " const b = await tools.append_line({line: 'unseen-two'});"
    " return [a, b]"
)


async def person(context, params):
    shown.append(params.message)
    if len(shown) == 1:
        print("ASKED", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
    return ElicitResult(action="accept", content={})


async def main():
    with anyio.fail_after(120):
        await session_run()
    for message in shown:
        print("SHOWN", message.replace("\n", " | "), flush=True)


async def session_run():
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"})
    transport = streamable_http_client(url, http_client=http)
    async with Client(transport, mode="legacy", elicitation_callback=person) as session:
        result = await session.call_tool("run_code", {"code": PROGRAM, "description": "Two"})
        text = "".join(block.text for block in result.content if block.type == "text")
        print("RESULT", result.is_error, text.replace("\n", " "), flush=True)


anyio.run(main)
