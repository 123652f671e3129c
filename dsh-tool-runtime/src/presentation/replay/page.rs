//! The page's fixed parts (head with its CSS, script) and the text formatting every part uses.

use serde_json::Value;

pub(super) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

pub(super) fn plural<'s>(n: usize, one: &'s str, many: &'s str) -> &'s str {
    if n == 1 { one } else { many }
}

pub(super) fn millis(ms: f64) -> String {
    if ms >= 1000.0 {
        seconds(ms)
    } else if ms >= 10.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

pub(super) fn seconds(ms: f64) -> String {
    format!("{:.2} s", ms / 1000.0)
}

/// `HH:MM:SS` of a Unix time in ms.
pub(super) fn clock(ms: u64) -> String {
    let secs = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    )
}

/// Escapes text for HTML element content and double-quoted attribute values.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

pub(super) const HEAD: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>Tool calls · replay</title>
<style>
:root { --fg:#1f2328; --muted:#656d76; --line:#d0d7de; --bg:#f6f8fa; --card:#fff; --ok:#1a7f37; --bad:#cf222e; --hit:#fff8c5; --mono: ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas, monospace; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
header { position: sticky; top: 0; z-index: 2; background: #fff; border-bottom: 1px solid var(--line); padding: 10px 24px; display: flex; align-items: baseline; gap: 16px; flex-wrap: wrap; }
h1 { font-size: 18px; margin: 0; }
.summary { margin: 0; color: var(--muted); }
.controls { margin-left: auto; display: flex; gap: 6px; }
button { font: inherit; font-size: 12px; padding: 3px 10px; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); cursor: pointer; }
main { max-width: 1100px; margin: 0 auto; padding: 16px 24px 48px; }
.card { background: var(--card); border: 1px solid var(--line); border-left: 4px solid #8c959f; border-radius: 8px; margin: 0 0 10px; }
.card.failed { border-left-color: var(--bad); background: #fffafa; }
.card[data-kind="read"] { border-left-color: #0969da; }
.card[data-kind="search"] { border-left-color: #8250df; }
.card[data-kind="execute"] { border-left-color: #bf8700; }
.card[data-kind="edit"] { border-left-color: #1a7f37; }
.card.failed[data-kind] { border-left-color: var(--bad); }
summary { list-style: none; cursor: pointer; display: flex; align-items: center; gap: 8px; padding: 7px 12px; min-width: 0; }
summary::-webkit-details-marker { display: none; }
summary::before { content: "▸"; color: var(--muted); width: 10px; flex: none; }
details[open] > summary::before { content: "▾"; }
.badge { flex: none; font-size: 10px; font-weight: 600; text-transform: uppercase; letter-spacing: .04em; padding: 1px 6px; border-radius: 10px; background: #eaeef2; color: #424a53; }
.k-read { background: #ddf4ff; color: #0550ae; } .k-search { background: #fbefff; color: #6639ba; } .k-execute { background: #fff8c5; color: #7d4e00; } .k-edit { background: #dafbe1; color: #116329; }
.title { font-weight: 600; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; min-width: 0; }
.tool { flex: none; font-family: var(--mono); font-size: 12px; color: var(--muted); }
.outline { color: var(--muted); white-space: nowrap; overflow: hidden; text-overflow: ellipsis; min-width: 0; flex: 1; }
.failed .outline { color: var(--bad); }
.agent { flex: none; font-size: 11px; padding: 0 6px; border: 1px solid var(--line); border-radius: 10px; }
.status { flex: none; font-weight: 600; }
.status.ok { color: var(--ok); } .status.failed { color: var(--bad); } .status.running { color: var(--muted); }
.time { flex: none; margin-left: auto; font-family: var(--mono); font-size: 12px; color: var(--muted); display: flex; gap: 10px; }
.at, .took { min-width: 58px; text-align: right; }
.body { padding: 0 12px 10px 30px; min-width: 0; overflow-wrap: anywhere; }
.body > * { margin-top: 8px; }
.file { border: 1px solid var(--line); border-radius: 6px; overflow: hidden; }
.file + .file { margin-top: 8px; }
.path { font-family: var(--mono); font-size: 12px; background: var(--bg); border-bottom: 1px solid var(--line); padding: 4px 10px; display: flex; gap: 12px; }
.range, .lang { color: var(--muted); } .lang { margin-left: auto; }
table.code { border-collapse: collapse; width: 100%; font: 12px/1.5 var(--mono); display: block; max-height: 360px; overflow: auto; }
table.code tbody { display: table; width: 100%; }
.input table.code { border: 1px solid var(--line); border-radius: 6px; max-height: 260px; }
td.ln { width: 1%; padding: 0 10px; text-align: right; color: #8c959f; user-select: none; white-space: nowrap; vertical-align: top; border-right: 1px solid var(--line); }
td.src { padding: 0 10px; white-space: pre-wrap; overflow-wrap: anywhere; }
tr.hit td { background: var(--hit); } tr.hit td.ln { color: #7d4e00; font-weight: 600; box-shadow: inset 3px 0 #d4a72c; }
tr.gap td { background: var(--bg); color: var(--muted); text-align: center; }
tr.add td { background: #e6ffec; } tr.del td { background: #ffebe9; }
pre { margin: 0; font: 12px/1.5 var(--mono); white-space: pre-wrap; word-break: break-word; }
pre.content, pre.input { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px; max-height: 360px; overflow: auto; }
pre.terminal { background: #1f2328; color: #e6edf3; border-radius: 6px; padding: 8px 12px; max-height: 360px; overflow: auto; }
.prompt { color: #7ee787; } .cwd { color: #8b949e; margin-right: 8px; }
.exit { font-family: var(--mono); font-size: 12px; margin: 4px 0 0; } .exit.ok { color: var(--ok); }
.bad { color: var(--bad); }
.failure { border: 1px solid #ffcecb; background: #ffebe9; border-radius: 6px; padding: 6px 10px; color: #82071e; }
.failure .code { display: inline-block; font: 600 11px var(--mono); background: var(--bad); color: #fff; border-radius: 4px; padding: 0 6px; margin-bottom: 4px; }
ul.paths { margin: 0; padding: 6px 10px; list-style: none; font: 12px/1.6 var(--mono); border: 1px solid var(--line); border-radius: 6px; max-height: 240px; overflow: auto; columns: 2; }
ul.locations { margin: 0; padding: 0; list-style: none; display: flex; flex-wrap: wrap; gap: 6px; }
ul.locations li { font: 12px var(--mono); background: var(--bg); border: 1px solid var(--line); border-radius: 4px; padding: 0 6px; }
.foot { margin: 4px 0 0; font-size: 12px; color: var(--muted); }
.result-title, .description { margin: 0; color: var(--muted); }
.children { border-left: 2px solid var(--line); padding-left: 10px; }
.children h3 { font-size: 12px; font-weight: 600; color: var(--muted); margin: 4px 0 6px; text-transform: uppercase; letter-spacing: .04em; }
.children .card { margin-bottom: 4px; }
.children summary { padding: 4px 10px; }
details.raw > summary { padding: 0; font-size: 12px; color: var(--muted); }
details.raw pre { margin-top: 4px; background: var(--bg); border-radius: 6px; padding: 6px 10px; max-height: 240px; overflow: auto; }
.notice { color: var(--muted); font-style: italic; }
img.content { max-width: 100%; border: 1px solid var(--line); border-radius: 6px; }
</style>
</head>
<body>
"#;

pub(super) const SCRIPT: &str = r#"<script>
document.querySelector(".controls").addEventListener("click", (event) => {
  const action = event.target.getAttribute("data-action");
  if (!action) return;
  for (const details of document.querySelectorAll("article.card > details")) {
    details.open = action === "expand";
  }
});
</script>
"#;
