//! The stdio transport: a child process whose stdout passes a depth guard before rmcp's codec.
//!
//! rmcp parses each line with serde_json's default recursion limit (128) and drops a line it
//! cannot parse, so one tool with a 5,000-deep schema would make the whole `tools/list` answer
//! vanish (and the list time out). The reader here measures each line's nesting with a byte scan;
//! a line nested deeper than [`MAX_RELAY_DEPTH`] is parsed without recursion limit (on a growing
//! stack), its too-deep subtrees are replaced by a marker string, and the rewritten line goes on.
//! The schema check then refuses that one tool (it is still deeper than
//! [`MAX_SERVER_SCHEMA_DEPTH`](crate::json::MAX_SERVER_SCHEMA_DEPTH)).

use std::pin::Pin;
use std::process::Stdio;
use std::task::{Context, Poll};

use rmcp::RoleClient;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::config::McpServer;
use crate::json::{MAX_RELAY_DEPTH, dismantle, parse_unbounded, text_depth};

/// The longest line relayed (rmcp drops longer ones too): 64 MiB.
const MAX_LINE_BYTES: u64 = 64 << 20;

/// What replaces a subtree nested too deep.
const TOO_DEEP: &str = "[nested too deep]";

pub(crate) type StdioTransport = AsyncRwTransport<RoleClient, GuardedStdout, ChildStdin>;

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
    Ok((
        AsyncRwTransport::new_client(GuardedStdout::new(stdout), stdin),
        child,
        stderr,
    ))
}

/// The child's stdout as rmcp reads it: whole lines, each passed on as it is unless it nests
/// deeper than [`MAX_RELAY_DEPTH`] (then rewritten by [`flatten`]) or is longer than
/// [`MAX_LINE_BYTES`] (then dropped with a warning). It runs inside rmcp's own reads: no task and
/// no second pipe between the child and the codec.
pub(crate) struct GuardedStdout<R = ChildStdout> {
    inner: R,
    /// The line being read, without its newline yet.
    line: Vec<u8>,
    /// Discarding the rest of an oversized line.
    skipping: bool,
    /// Checked lines waiting to be read, from `offset` on.
    ready: Vec<u8>,
    offset: usize,
    eof: bool,
}

impl<R> GuardedStdout<R> {
    fn new(inner: R) -> Self {
        GuardedStdout {
            inner,
            line: Vec::new(),
            skipping: false,
            ready: Vec::new(),
            offset: 0,
            eof: false,
        }
    }

    /// Takes in one chunk read from the child, moving each completed line to `ready`.
    fn take_in(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            let (part, rest, complete) = match chunk.iter().position(|&byte| byte == b'\n') {
                Some(end) => (&chunk[..=end], &chunk[end + 1..], true),
                None => (chunk, &[][..], false),
            };
            chunk = rest;
            if self.skipping {
                self.skipping = !complete;
                continue;
            }
            self.line.extend_from_slice(part);
            if self.line.len() as u64 > MAX_LINE_BYTES {
                tracing::warn!(target: "dsh_tool_runtime::mcp", "dropping a server line longer than {MAX_LINE_BYTES} bytes");
                self.line.clear();
                self.skipping = !complete;
                continue;
            }
            if complete {
                self.finish_line();
            }
        }
    }

    fn finish_line(&mut self) {
        if self.line.last() != Some(&b'\n') {
            self.line.push(b'\n');
        }
        match (text_depth(&self.line) > MAX_RELAY_DEPTH)
            .then(|| flatten(&self.line))
            .flatten()
        {
            Some(rewritten) => self.ready.extend_from_slice(&rewritten),
            None => self.ready.extend_from_slice(&self.line),
        }
        self.line.clear();
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for GuardedStdout<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.offset < this.ready.len() {
                let n = out.remaining().min(this.ready.len() - this.offset);
                out.put_slice(&this.ready[this.offset..this.offset + n]);
                this.offset += n;
                if this.offset == this.ready.len() {
                    this.ready.clear();
                    this.offset = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 16 * 1024];
            let mut buf = ReadBuf::new(&mut chunk);
            let read = match Pin::new(&mut this.inner).poll_read(cx, &mut buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                Poll::Ready(Ok(())) => buf.filled().len(),
            };
            if read == 0 {
                // EOF: a last line without its newline still counts.
                this.eof = true;
                if !this.line.is_empty() && !this.skipping {
                    this.finish_line();
                }
            } else {
                this.take_in(&chunk[..read]);
            }
        }
    }
}

/// Parses a deep line without recursion limit and cuts every subtree below
/// [`MAX_RELAY_DEPTH`]; `None` when it is not JSON (rmcp then ignores it).
pub(crate) fn flatten(line: &[u8]) -> Option<Vec<u8>> {
    let mut value = parse_unbounded(line)?;
    let mut cut = Vec::new();
    let mut stack = vec![(&mut value, 1usize)];
    while let Some((node, depth)) = stack.pop() {
        if depth >= MAX_RELAY_DEPTH && (node.is_array() || node.is_object()) {
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
    fn deep_lines_are_cut_below_the_relay_depth() {
        let levels = 5_000;
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"x":{}1{}}}}}"#,
            "[".repeat(levels),
            "]".repeat(levels)
        );
        assert!(text_depth(line.as_bytes()) > levels);
        let flat = flatten(line.as_bytes()).unwrap();
        assert_eq!(text_depth(&flat), MAX_RELAY_DEPTH - 1);
        let parsed: Value = serde_json::from_slice(&flat).unwrap();
        assert_eq!(parsed["id"], 1);
        assert!(String::from_utf8(flat).unwrap().contains(TOO_DEEP));
        assert!(flatten(b"not json\n").is_none());
    }

    /// Reads everything through a reader that hands out `chunk`-byte pieces.
    fn read_through(input: &[u8], chunk: usize) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let pieces: Vec<Vec<u8>> = input.chunks(chunk).map(<[u8]>::to_vec).collect();
        let mut builder = tokio_test_reader(pieces);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut out = Vec::new();
            GuardedStdout::new(&mut builder)
                .read_to_end(&mut out)
                .await
                .unwrap();
            out
        })
    }

    /// A reader returning one piece per read, like a pipe delivering partial lines.
    fn tokio_test_reader(pieces: Vec<Vec<u8>>) -> Pieces {
        Pieces(pieces.into_iter().collect())
    }

    struct Pieces(std::collections::VecDeque<Vec<u8>>);

    impl AsyncRead for Pieces {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            out: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            if let Some(piece) = self.0.pop_front() {
                out.put_slice(&piece);
            }
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn lines_pass_whole_and_unchanged_across_partial_reads() {
        let input = b"{\"a\":1}\n{\"b\":[2,3]}\n{\"c\":\"no newline\"}";
        for chunk in [1, 3, 7, 64] {
            assert_eq!(
                read_through(input, chunk),
                b"{\"a\":1}\n{\"b\":[2,3]}\n{\"c\":\"no newline\"}\n".to_vec(),
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn a_deep_line_is_rewritten_and_its_neighbours_kept() {
        let deep = format!("{{\"x\":{}1{}}}\n", "[".repeat(500), "]".repeat(500));
        let input = format!("{{\"before\":1}}\n{deep}{{\"after\":2}}\n");
        let out = String::from_utf8(read_through(input.as_bytes(), 100)).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert_eq!(lines[0], "{\"before\":1}");
        assert!(text_depth(lines[1].as_bytes()) < MAX_RELAY_DEPTH);
        assert!(lines[1].contains(TOO_DEEP));
        assert_eq!(lines[2], "{\"after\":2}");
    }
}
