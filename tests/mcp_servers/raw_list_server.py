"""A bare JSON-RPC MCP server (stdio, no SDK) for tool lists the official SDKs refuse to send.

Usage: raw_list_server.py MODE, where MODE is
  paged      three pages of `tools/list` (cursors "2", "3"), with `admin.reset` next to
             `admin_reset`
  malformed  one list with good tools next to broken ones (no inputSchema, a non-object
             inputSchema, a schema that does not compile, a non-object entry, no name)
  duplicate  a list naming one tool twice
  deep       a good tool next to one whose schema nests 5,000 `items`
  resync     lists that change on demand: calling `dupe_trigger` announces a list naming `x`
             twice, then (once that list was served) a valid one with `after`; calling
             `conflict_trigger` announces a list with `squatted`
With `--http` after MODE it serves streamable HTTP on a free loopback port instead (printing
`PORT <n>` on stdout once listening); `--sse` there answers each request as an SSE stream, else
as a JSON body.
Every tool answers `tools/call` by echoing its arguments; `bad_structured` answers structured
content that breaks its `outputSchema`; `mixed` answers text, an image, a resource link and an
embedded resource.
"""

import json
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "paged"
HTTP = "--http" in sys.argv[2:]
SSE = "--sse" in sys.argv[2:]


def tool(name, schema=None, **extra):
    entry = {"name": name, "description": f"tool {name}"}
    entry["inputSchema"] = schema if schema is not None else {
        "type": "object",
        "properties": {"text": {"type": "string"}},
    }
    entry.update(extra)
    return entry


DEEP_LEVELS = 5000
DEEP_PLACEHOLDER = "__deep_schema__"


def deep_schema_text(levels):
    # Built as text: Python's own json module cannot nest this deep.
    inner = '{"type": "array", "items": ' * levels + '{"type": "string"}' + "}" * levels
    return '{"type": "object", "properties": {"x": ' + inner + "}}"


STRUCTURED = tool(
    "bad_structured",
    outputSchema={
        "type": "object",
        "properties": {"n": {"type": "number"}},
        "required": ["n"],
    },
)

PAGES = {
    "paged": [
        [tool("first"), tool("admin.reset"), tool("admin_reset")],
        [tool("second")],
        [tool("third"), STRUCTURED, tool("mixed")],
    ],
    "malformed": [[
        tool("good_one"),
        {"name": "no_schema", "description": "missing inputSchema"},
        tool("string_schema", schema="not a schema"),
        tool("bad_keyword", schema={"type": "object", "minProperties": "many"}),
        "not an object",
        {"description": "no name", "inputSchema": {"type": "object"}},
        tool("good_two"),
    ]],
    "duplicate": [[tool("twice"), tool("twice")]],
    "deep": [[tool("shallow"), tool("deep", schema=DEEP_PLACEHOLDER)]],
}


STATE = {"phase": "start"}

RESYNC_LISTS = {
    "start": [tool("a"), tool("dupe_trigger"), tool("conflict_trigger")],
    "dupe": [tool("a"), tool("x"), tool("x")],
    "after_dupe": [tool("a"), tool("after"), tool("conflict_trigger")],
    "conflict": [tool("a"), tool("squatted")],
}

LIST_CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


def encode(message):
    return json.dumps(message).replace(json.dumps(DEEP_PLACEHOLDER), deep_schema_text(DEEP_LEVELS))


def send(message):
    sys.stdout.write(encode(message) + "\n")
    sys.stdout.flush()


def answer(request):
    method = request.get("method")
    params = request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": MODE == "resync"}},
            "serverInfo": {"name": "raw-list-server", "version": "1.0.0"},
        }
    if method == "tools/list" and MODE == "resync":
        phase = STATE["phase"]
        if phase == "dupe":
            STATE["phase"] = "after_dupe"
            STATE["announce"] = True
        return {"tools": RESYNC_LISTS[phase]}
    if method == "tools/call" and params.get("name") in ("dupe_trigger", "conflict_trigger"):
        STATE["phase"] = "dupe" if params["name"] == "dupe_trigger" else "conflict"
        STATE["announce"] = True
        return {"content": [{"type": "text", "text": STATE["phase"]}]}
    if method == "tools/list":
        pages = PAGES[MODE]
        index = int(params.get("cursor") or "1") - 1
        result = {"tools": pages[index]}
        if index + 1 < len(pages):
            result["nextCursor"] = str(index + 2)
        return result
    if method == "tools/call":
        name = params.get("name")
        if name == "bad_structured":
            return {
                "content": [{"type": "text", "text": "n is a string here"}],
                "structuredContent": {"n": "not a number"},
            }
        if name == "mixed":
            return {"content": [
                {"type": "text", "text": "line one"},
                {"type": "text", "text": "line two"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "resource_link", "name": "notes", "uri": "file:///notes.txt"},
                {"type": "resource", "resource": {"uri": "mem://a", "text": "inline"}},
            ]}
        return {"content": [{"type": "text", "text": json.dumps(
            {"tool": name, "arguments": params.get("arguments")}, sort_keys=True)}]}
    if method == "ping":
        return {}
    return None


def reply(request):
    result = answer(request)
    if result is None:
        return {"jsonrpc": "2.0", "id": request["id"],
                "error": {"code": -32601, "message": "method not found"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def serve_http():
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if "id" not in request:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = encode(reply(request))
            if SSE:
                body = "event: message\ndata: " + body + "\n\n"
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream" if SSE else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_DELETE = do_GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sys.stdout.write(f"PORT {server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()


if HTTP:
    serve_http()

for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    request = json.loads(line)
    if "id" not in request:
        continue
    send(reply(request))
    if STATE.pop("announce", False):
        send(LIST_CHANGED)
