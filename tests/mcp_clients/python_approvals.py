"""Approvals that reach the person at the MCP host, driven with the official Python MCP SDK client
(`mcp`, pinned in .ci/tools/requirements.txt). Run by tests/mcp/approvals.rs against a registry
served over streamable HTTP whose pre-execute hook asks before `write_note` and
`mcp__everything__echo`; exits non-zero with the failed check.

    python_approvals.py URL TOKEN [durable]

With `durable` the server journals its `run_code` calls (`serve --journal`): an approval parks the
run, and the person's answer resumes it — the same checks on programs, in both eras.

Each check runs in both protocol eras: `legacy` (initialize, 2025-11-25: the approval is an
`elicitation/create` request) and `auto` (server/discover, 2026-07-28: the approval is an
`input_required` result and the client's retry carries the answer).
"""

import json
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult

# Every call settles long before this; it only bounds a failure (a hang).
BOUND = 120


def check(condition, message):
    if not condition:
        raise SystemExit(f"check failed: {message}")


def text_of(result):
    return "".join(block.text for block in result.content if block.type == "text")


class Person:
    """The elicitation callback: answers every request with `action`, remembering each message."""

    def __init__(self):
        self.action = "accept"
        self.messages = []

    async def __call__(self, context, params):
        self.messages.append(params.message)
        return ElicitResult(action=self.action, content={} if self.action == "accept" else None)


def client(url, token, mode, person):
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"})
    transport = streamable_http_client(url, http_client=http)
    return Client(transport, mode=mode, elicitation_callback=person)


PROGRAM = """
try {
  const written = await tools.write_note({ text: "from a program" });
  return { written };
} catch (error) {
  return { refused: String(error) };
}
"""


async def run_program(session):
    result = await session.call_tool("run_code", {"code": PROGRAM, "description": "Write a note"})
    check(result.is_error is False, f"the program ran: {text_of(result)}")
    return text_of(result)


async def asks_the_person(url, token, mode, expected_version):
    person = Person()
    with anyio.fail_after(BOUND):
        async with client(url, token, mode, person) as session:
            check(session.protocol_version == expected_version, f"{mode}: protocol {session.protocol_version}")

            # A native call: accepted, it runs; the request names tool, reason and arguments.
            result = await session.call_tool("write_note", {"text": "hello"})
            check(result.is_error is False, f"{mode}: an accepted call runs: {text_of(result)}")
            check("wrote hello" in text_of(result), f"{mode}: the tool's answer: {text_of(result)}")
            check(len(person.messages) == 1, f"{mode}: one approval request: {person.messages}")
            message = person.messages[0]
            check('Allow tool "write_note" to run?' in message, f"{mode}: names the tool: {message}")
            check("Reason: writes a note" in message, f"{mode}: the hook's reason: {message}")
            check('Arguments: {"text":"hello"}' in message, f"{mode}: the arguments: {message}")

            # Declined: a denial with the reason, and the tool did not run.
            person.action = "decline"
            result = await session.call_tool("write_note", {"text": "no"})
            check(result.is_error is True, f"{mode}: a declined call is refused")
            check('the user rejected tool "write_note"' in text_of(result), f"{mode}: {text_of(result)}")
            person.action = "cancel"
            result = await session.call_tool("write_note", {"text": "no"})
            check('approval for tool "write_note" was cancelled' in text_of(result), f"{mode}: {text_of(result)}")

            # Long arguments are cut, visibly.
            person.action = "accept"
            await session.call_tool("write_note", {"text": "x" * 5000})
            check("… (cut: the first 2048 of 5011 bytes)" in person.messages[-1], f"{mode}: cut: {person.messages[-1][-80:]}")

            # A proxied tool: the request names the MCP server it comes from.
            result = await session.call_tool("mcp__everything__echo", {"message": "hi"})
            check(result.is_error is False and "Echo: hi" in text_of(result), f"{mode}: proxied: {text_of(result)}")
            check(
                'Allow tool "mcp__everything__echo" of MCP server "everything" to run?' in person.messages[-1],
                f"{mode}: names the server: {person.messages[-1]}",
            )

            # Inside a program: the program waits for the answer, then goes on.
            text = await run_program(session)
            check('"written": "wrote from a program"' in text, f"{mode}: accepted in a program: {text}")
            check('"text":"from a program"' in person.messages[-1], f"{mode}: program's call asked: {person.messages[-1]}")
            person.action = "decline"
            text = await run_program(session)
            check("ToolCallError" in text and 'the user rejected tool \\"write_note\\"' in text, f"{mode}: declined in a program: {text}")
    print(f"{mode} ok")


async def no_elicitation(url, token, mode):
    """A client that cannot answer gets the denial at once (the bound only catches a hang)."""
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"})
    with anyio.fail_after(BOUND):
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as session:
            result = await session.call_tool("write_note", {"text": "hello"})
            text = text_of(result)
            check(result.is_error is True, f"{mode}: refused without elicitation: {text}")
            check("did not declare the elicitation capability): writes a note" in text, f"{mode}: reason: {text}")
            check(text.endswith("(denied: no approver is set)"), f"{mode}: nobody was asked: {text}")
            text = await run_program(session)
            check("ToolCallError" in text and "did not declare the elicitation capability" in text, f"{mode}: program: {text}")
    print(f"{mode} without elicitation ok")


async def main(url, token):
    await asks_the_person(url, token, "legacy", "2025-11-25")
    await asks_the_person(url, token, "auto", "2026-07-28")
    await no_elicitation(url, token, "legacy")
    await no_elicitation(url, token, "auto")


async def durable(url, token):
    for mode, version in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
        person = Person()
        with anyio.fail_after(BOUND):
            async with client(url, token, mode, person) as session:
                check(session.protocol_version == version, f"{mode}: protocol {session.protocol_version}")
                text = await run_program(session)
                check('"written": "wrote from a program"' in text, f"durable {mode}: accepted: {text}")
                check(len(person.messages) == 1, f"durable {mode}: one approval request: {person.messages}")
                check('Allow tool "tools.write_note" to run?' in person.messages[0], f"durable {mode}: {person.messages[0]}")
                check("Reason: writes a note" in person.messages[0], f"durable {mode}: reason: {person.messages[0]}")
                check('"text":"from a program"' in person.messages[0], f"durable {mode}: arguments: {person.messages[0]}")
                person.action = "decline"
                text = await run_program(session)
                check("ToolCallError" in text and "the user rejected tool" in text, f"durable {mode}: declined: {text}")
        http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"})
        with anyio.fail_after(BOUND):
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as session:
                text = await run_program(session)
                check("ToolCallError" in text and "did not declare the elicitation capability" in text, f"durable {mode}: no elicitation: {text}")
        print(f"durable {mode} ok")


if __name__ == "__main__":
    if sys.argv[3:] == ["durable"]:
        anyio.run(durable, sys.argv[1], sys.argv[2])
    else:
        anyio.run(main, sys.argv[1], sys.argv[2])
