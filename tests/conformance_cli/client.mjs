// The `dsh-tools` command line as the client under test of the MCP conformance suite's client
// scenarios: the suite runs
//
//   node tests/conformance_cli/client.mjs DSH_TOOLS URL
//
// per scenario (the scenario's name in MCP_CONFORMANCE_SCENARIO, its context as JSON in
// MCP_CONFORMANCE_CONTEXT), and this script does what a person at the command line would:
// `dsh-tools --mcp-http URL tools --dialect mcp --json` to see the tools, then one
// `dsh-tools --mcp-http URL call NAME ARGUMENTS` per call the scenario expects (the context's
// `toolCalls`, the call a scenario names, else every listed tool with its required arguments).
// It exits 1 when any of them failed.
//
// - auth/* scenarios: client credentials (`--mcp-oauth-client-id`, the secret in
//   DSH_TOOLS_OAUTH_CLIENT_SECRET) when the context gives them, else the person's login
//   (`--mcp-oauth-login` with `--mcp-oauth-client-metadata-url`, and the pre-registered client
//   the context names), its tokens in a `--mcp-oauth-token-file` the scenario's commands share,
//   as one person's would. The person's browser follows the authorization URL printed on
//   stderr (the suite's authorization endpoint approves at once and redirects to the command's
//   loopback listener).
// - Elicitation: each command runs on a terminal (a pseudo-terminal by util-linux `script`), so
//   the command asks its person there; the person accepts and leaves every field empty, taking
//   the requested schema's defaults.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [bin, ...rest] = process.argv.slice(2);
const url = rest.at(-1);
if (!bin || !url?.startsWith("http")) {
  console.error("usage: client.mjs DSH_TOOLS URL");
  process.exit(2);
}
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? "";
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? "null") ?? {};

/// The client id the suite's authorization servers accept as a client ID metadata document.
const CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json";

const dir = mkdtempSync(join(tmpdir(), "dsh-tools-conformance-"));
// The suite bounds each scenario (`--timeout`); on a loaded machine connecting, listing or a
// call may take longer than the command's default bounds.
const sources = [
  "--mcp-http",
  url,
  "--mcp-connect-timeout-ms",
  "600000",
  "--mcp-list-timeout-ms",
  "600000",
  "--mcp-call-timeout-ms",
  "600000",
];
const env = { ...process.env };
delete env.DSH_TOOLS_OAUTH_CLIENT_SECRET;
if (scenario.startsWith("auth/")) {
  const { client_id: id, client_secret: secret } = context;
  if (scenario.startsWith("auth/client-credentials") && id && secret) {
    sources.push("--mcp-oauth-client-id", id);
    env.DSH_TOOLS_OAUTH_CLIENT_SECRET = secret;
  } else {
    sources.push("--mcp-oauth-login", "--mcp-oauth-client-metadata-url", CLIENT_METADATA_URL);
    sources.push("--mcp-oauth-token-file", join(dir, "tokens.json"));
    if (id) sources.push("--mcp-oauth-client-id", id);
    if (id && secret) env.DSH_TOOLS_OAUTH_CLIENT_SECRET = secret;
  }
}

/// `word` quoted for the shell `script` runs the command with.
const quote = (word) => `'${word.replaceAll("'", `'\\''`)}'`;

/// Runs `dsh-tools SOURCES ...args`, on a pseudo-terminal when `terminal`; resolves to its exit
/// code and its stdout (on a terminal, stdout and stderr both). It plays the person: follows an
/// authorization URL, accepts an elicitation with every field left empty.
function dshTools(args, terminal) {
  const words = [bin, ...sources, ...args];
  const child = terminal
    ? spawn("script", ["-qefc", words.map(quote).join(" "), "/dev/null"], { env })
    : spawn(bin, words.slice(1), { env });
  let text = "";
  // Stderr, where the authorization URL is printed when it is not the terminal.
  let log = "";
  let answered = 0;
  const browsing = [];
  // Follows each authorization URL, on its own line after "To authorize", once the line is
  // whole; `scanned` is how far `seen` has been read, by output.
  const scanned = { text: 0, log: 0 };
  const browse = (seen, which) => {
    const end = seen.lastIndexOf("\n") + 1;
    const lines = seen.slice(scanned[which], end);
    scanned[which] = Math.max(scanned[which], end);
    for (const [, link] of lines.matchAll(/^\s+(https?:\/\/\S+)\s*$/gm)) {
      if (!seen.includes("To authorize")) continue;
      browsing.push(
        fetch(link).catch((error) => console.error(`the browser could not follow ${link}: ${error}`)),
      );
    }
  };
  child.stdout.on("data", (chunk) => {
    text += chunk.toString();
    browse(text, "text");
    // The command waits at a prompt: `Answer? [y]es, …: ` or a field's `  NAME (…): `.
    const prompt = text.slice(answered);
    if (/Answer\? \[y\]es[^\n]*: $/.test(prompt)) {
      answered = text.length;
      child.stdin.write("y\n");
    } else if (/\n {2}\S+ \([^\n]*\): $/.test(prompt)) {
      answered = text.length;
      child.stdin.write("\n");
    }
  });
  child.stderr?.on("data", (chunk) => {
    log += chunk.toString();
    browse(log, "log");
    process.stderr.write(chunk);
  });
  return new Promise((resolve) => {
    child.on("close", async (code) => {
      await Promise.all(browsing);
      process.stdout.write(text);
      resolve({ code, text });
    });
  });
}

/// The tools the command lists: `{name, parameters}` with the server's prefix removed.
async function listTools() {
  const { code, text } = await dshTools(["--json", "tools", "--dialect", "mcp"], false);
  if (code !== 0) return undefined;
  return JSON.parse(text).map((tool) => ({
    name: tool.name.replace(/^mcp__.+?__/, ""),
    prefix: tool.name.match(/^mcp__.+?__/)[0],
    parameters: tool.parameters,
  }));
}

/// Arguments filling every required property of `schema` with a value of its type.
function requiredArguments(schema) {
  const args = {};
  for (const name of schema?.required ?? []) {
    const property = schema.properties?.[name] ?? {};
    const byType = { integer: 1, number: 1, boolean: false, object: {}, array: [] };
    args[name] = property.enum?.[0] ?? byType[property.type] ?? "x";
  }
  return args;
}

let failed = false;
try {
  const tools = await listTools();
  if (tools === undefined) {
    failed = true;
  } else {
    const prefix = tools[0]?.prefix ?? "";
    let calls;
    if (Array.isArray(context.toolCalls)) {
      calls = context.toolCalls.map((call) => [call.name, call.arguments ?? {}]);
    } else if (scenario === "tools_call") {
      calls = [["add_numbers", { a: 5, b: 3 }]];
    } else if (scenario === "elicitation-sep1034-client-defaults") {
      calls = [["test_client_elicitation_defaults", {}]];
    } else if (scenario === "sse-retry") {
      calls = [["test_reconnection", {}]];
    } else if (scenario === "json-schema-2020-12-preservation") {
      // Hands the schema the command printed for the focal tool back to the server.
      const focal = tools.find((tool) => tool.name === "json_schema_2020_12_tool");
      calls = [["json_schema_echo", { schema: focal?.parameters ?? {} }]];
    } else if (scenario === "json-schema-ref-no-deref") {
      // Only lists: its tool's schema points at a URL the client must not fetch.
      calls = [];
    } else {
      calls = tools.map((tool) => [tool.name, requiredArguments(tool.parameters)]);
    }
    for (const [name, args] of calls) {
      const { code } = await dshTools(["call", `${prefix}${name}`, JSON.stringify(args)], true);
      failed ||= code !== 0;
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
