//! The stdio transport: a child process whose stdout passes a depth guard before rmcp's codec.
//!
//! rmcp parses each line with serde_json's default recursion limit (128) and drops a line it
//! cannot parse, so one tool with a 5,000-deep schema would make the whole `tools/list` answer
//! vanish (and the list time out). The relay here measures each line's nesting with a byte scan;
//! a line nested deeper than [`RELAY_DEPTH`] is parsed without recursion limit (on a growing
//! stack), its too-deep subtrees are replaced by a marker string, and the rewritten line goes on.
//! The schema check then refuses that one tool (it is still deeper than
//! [`MAX_SCHEMA_DEPTH`](super::schema::MAX_SCHEMA_DEPTH)).

use std::process::Stdio;

use rmcp::RoleClient;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::config::McpServer;
use crate::validate::dismantle;

/// Lines nested deeper than this are rewritten (below serde_json's limit of 128, above
/// [`MAX_SCHEMA_DEPTH`](super::schema::MAX_SCHEMA_DEPTH) plus the JSON-RPC envelope).
pub(crate) const RELAY_DEPTH: usize = 100;

/// The longest line relayed (rmcp drops longer ones too): 64 MiB.
const MAX_LINE_BYTES: u64 = 64 << 20;

/// What replaces a subtree nested too deep.
const TOO_DEEP: &str = "[nested too deep]";

pub(crate) type StdioTransport = AsyncRwTransport<RoleClient, DuplexStream, ChildStdin>;

/// Starts the server process; returns its transport, the child (killed on drop) and its
/// stderr.
pub(crate) fn spawn(
    config: &McpServer,
    command: &str,
    args: &[String],
) -> std::io::Result<(StdioTransport, Child, Option<tokio::process::ChildStderr>)> {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (key, value) in &config.env {
        cmd.env(key, value);
    }
    if let Some(dir) = &config.cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other("child stdio was not piped"));
    };
    let stderr = child.stderr.take();
    let (relayed, relay_end) = tokio::io::duplex(256 * 1024);
    tokio::spawn(relay(stdout, relay_end));
    Ok((AsyncRwTransport::new_client(relayed, stdin), child, stderr))
}

/// Copies the child's stdout line by line, rewriting lines nested too deep. Ends (closing the
/// relayed stream) at the child's EOF.
async fn relay(stdout: ChildStdout, mut out: DuplexStream) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') {
            if line.len() as u64 >= MAX_LINE_BYTES {
                tracing::warn!(target: "dsh_tool_runtime::mcp", "dropping a server line longer than {MAX_LINE_BYTES} bytes");
                if skip_line(&mut reader).await.is_err() {
                    return;
                }
                continue;
            }
            line.push(b'\n');
        }
        let rewritten = (nesting_depth(&line) > RELAY_DEPTH)
            .then(|| flatten(&line))
            .flatten();
        let bytes = rewritten.as_deref().unwrap_or(&line);
        if out.write_all(bytes).await.is_err() {
            return;
        }
    }
}

/// Discards the rest of an oversized line.
async fn skip_line(reader: &mut BufReader<ChildStdout>) -> std::io::Result<()> {
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(());
        }
        if let Some(end) = buffer.iter().position(|&byte| byte == b'\n') {
            reader.consume(end + 1);
            return Ok(());
        }
        let len = buffer.len();
        reader.consume(len);
    }
}

/// The deepest bracket nesting of a JSON text, ignoring brackets inside strings.
pub(crate) fn nesting_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in text {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Parses a deep line without recursion limit and cuts every subtree below [`RELAY_DEPTH`];
/// `None` when it is not JSON (rmcp then ignores it).
pub(crate) fn flatten(line: &[u8]) -> Option<Vec<u8>> {
    let mut de = serde_json::Deserializer::from_slice(line);
    de.disable_recursion_limit();
    let mut value = Value::deserialize(serde_stacker::Deserializer::new(&mut de)).ok()?;
    de.end().ok()?;
    let mut cut = Vec::new();
    let mut stack = vec![(&mut value, 1usize)];
    while let Some((node, depth)) = stack.pop() {
        if depth >= RELAY_DEPTH && (node.is_array() || node.is_object()) {
            cut.push(std::mem::replace(node, Value::String(TOO_DEEP.to_owned())));
            continue;
        }
        match node {
            Value::Array(items) => stack.extend(items.iter_mut().map(|item| (item, depth + 1))),
            Value::Object(map) => stack.extend(map.values_mut().map(|item| (item, depth + 1))),
            _ => {}
        }
    }
    cut.into_iter().for_each(dismantle);
    let mut bytes = serde_json::to_vec(&value).ok()?;
    bytes.push(b'\n');
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_ignores_brackets_in_strings() {
        assert_eq!(nesting_depth(br#"{"a": [1, {"b": "[[[{{"}]}"#), 3);
        assert_eq!(nesting_depth(br#"{"a": "\"[["}"#), 1);
        assert_eq!(nesting_depth(b"7"), 0);
    }

    #[test]
    fn deep_lines_are_cut_below_the_relay_depth() {
        let levels = 5_000;
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"x":{}1{}}}}}"#,
            "[".repeat(levels),
            "]".repeat(levels)
        );
        assert!(nesting_depth(line.as_bytes()) > levels);
        let flat = flatten(line.as_bytes()).unwrap();
        assert_eq!(nesting_depth(&flat), RELAY_DEPTH - 1);
        let parsed: Value = serde_json::from_slice(&flat).unwrap();
        assert_eq!(parsed["id"], 1);
        assert!(String::from_utf8(flat).unwrap().contains(TOO_DEEP));
        assert!(flatten(b"not json\n").is_none());
    }
}
