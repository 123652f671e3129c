// Drives `dsh-tools serve --http` with the official TypeScript MCP SDK client
// (`@modelcontextprotocol/sdk`, pinned in .ci/tools/package.json) over streamable HTTP.
// Run by tests/mcp/serve.rs: node ts_client.mjs NODE_MODULES URL TOKEN, TOKEN the bearer token the
// server printed. Exits non-zero on a failed check.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, url, token] = process.argv.slice(2);
const sdk = (file) => import(pathToFileURL(path.join(nodeModules, "@modelcontextprotocol/sdk/dist/esm", file)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

function check(condition, message) {
  if (!condition) {
    console.error(`check failed: ${message}`);
    process.exit(1);
  }
}

const client = new Client({ name: "dsh-tools-test", version: "1.0.0" });
const requestInit = { headers: { Authorization: `Bearer ${token}` } };
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit }));
check(client.getInstructions() === undefined, "both mode: no code-only rule");

const { tools } = await client.listTools();
const names = tools.map((tool) => tool.name);
check(names.join(",") === "file_stats,grep,list_files,read_file,run_code", `both: native tools then run_code, got ${names}`);
const stats = tools.find((tool) => tool.name === "file_stats");
check(stats.outputSchema?.type === "object", "file_stats has an outputSchema");
check(stats.annotations?.readOnlyHint === true, "readOnlyHint");

const direct = await client.callTool({ name: "file_stats", arguments: { path: "Cargo.toml" } });
check(direct.isError === false && direct.structuredContent.path === "Cargo.toml", `structuredContent: ${JSON.stringify(direct)}`);

const progress = [];
const program = "const s = await tools.file_stats({ path: 'Cargo.toml' });\nconsole.log('is_dir', s.is_dir);\nreturn s.lines;";
const ran = await client.callTool(
  { name: "run_code", arguments: { code: program, description: "Count manifest lines" } },
  undefined,
  { onprogress: (p) => progress.push(p.message) },
);
const text = ran.content.map((block) => block.text).join("");
check(ran.isError === false && text.includes("is_dir false"), `run_code: ${text}`);
check(progress.join(",") === "file_stats started,file_stats ok", `progress: ${progress}`);

const bad = await client.callTool({ name: "grep", arguments: { pattern: "" } });
check(bad.isError === true, "invalid arguments come back as isError");
await client.close();
console.log("ts client ok");
