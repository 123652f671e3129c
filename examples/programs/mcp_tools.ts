// Calls tools of two MCP servers next to a local tool: run with
// --mcp "<server-everything> stdio" --mcp "<mcp-server-time>" --lang ts.
const [sum, now, stats] = await Promise.all([
  tools["mcp__everything__get-sum"]({ a: 19, b: 23 }),
  tools.mcp__time__get_current_time({ timezone: "Europe/Paris" }),
  tools.file_stats({ path: "Cargo.toml" }),
]);
console.log(sum.content[0].type === "text" ? sum.content[0].text : "no text");
let refused = "";
try {
  await tools["mcp__everything__get-sum"]({ a: "nineteen" });
} catch (error) {
  refused = String(error);
}
return {
  paris: now.structuredContent,
  cargoTomlLines: stats.lines,
  refused,
};
