//! The stdio transport: a child process whose stdout passes a depth guard before rmcp's codec.
//!
//! rmcp parses each line with serde_json's default recursion limit (128) and drops a line it
//! cannot parse, so one tool with a 5,000-deep schema would make the whole `tools/list` answer
//! vanish (and the list time out). The reader here measures each line's nesting with a byte scan
//! before anything parses it. In a line nested deeper than [`MAX_RELAY_DEPTH`] every too-deep
//! subtree is replaced, unparsed, by a marker string ([`cut_deep`]: one pass over the bytes, no
//! recursion, nothing built), so a million levels cost no more than their bytes. The schema
//! check then refuses that one tool (it is still deeper than
//! [`MAX_SERVER_SCHEMA_DEPTH`](super::MAX_SCHEMA_DEPTH)); a too-deep answer to a
//! `tools/call` fails that call instead.
//!
//! Its parts: this front starts the child ([`spawn`]); [`guarded_stdout`] is the reader between
//! the child's stdout and rmcp's codec; [`top_level_id`] finds the request an unreadable line
//! answers; [`relay_depth`] cuts what nests too deep.

mod guarded_stdout;
mod relay_depth;
mod top_level_id;

use std::process::Stdio;
use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::process::{Child, ChildStdin};

use super::answers::CallAnswers;
use super::config::McpServer;

pub(crate) use guarded_stdout::GuardedStdout;
pub(super) use relay_depth::MAX_RELAY_DEPTH;
pub(crate) use relay_depth::cut_deep;

pub(crate) type StdioTransport = AsyncRwTransport<RoleClient, GuardedStdout, ChildStdin>;

/// Starts the server process; returns its transport, the child (killed on drop) and its
/// stderr.
pub(crate) fn spawn(
    config: &McpServer,
    command: &str,
    args: &[String],
    answers: Arc<CallAnswers>,
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
    Ok((
        AsyncRwTransport::new_client(
            GuardedStdout::new(stdout)
                .with_answers(answers)
                .with_max_line(config.max_message_bytes)
                .with_max_list_line(config.max_list_bytes),
            stdin,
        )
        // Above the guard's own limit (newline included), so every line it passes is read.
        .with_max_line_length(config.max_message_bytes.saturating_add(1)),
        child,
        stderr,
    ))
}
