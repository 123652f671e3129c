//! A stdio server's stderr, forwarded to `tracing` line by line within a fixed memory bound.
//!
//! The pipe is read in chunks and drained until EOF whatever it carries: a server that logs
//! without newlines, or bytes that are no UTF-8, costs at most one kept line
//! ([`MAX_STDERR_LINE_BYTES`]) and never closes the pipe under a server that is still writing
//! (its next write would fail).

use tokio::io::AsyncReadExt;

/// The longest stderr line logged, in bytes; the rest of a longer line is dropped and counted.
pub(crate) const MAX_STDERR_LINE_BYTES: usize = 8 * 1024;

/// The size of one read from the pipe.
const CHUNK_BYTES: usize = 8 * 1024;

/// Splits a byte stream into lines of at most `max` bytes each (before decoding).
pub(crate) struct StderrLines {
    max: usize,
    line: Vec<u8>,
    /// Bytes of the current line past `max`, dropped.
    dropped: usize,
}

impl StderrLines {
    pub(crate) fn new(max: usize) -> Self {
        StderrLines {
            max,
            line: Vec::new(),
            dropped: 0,
        }
    }

    /// Takes in one chunk; `emit` gets each line it completes, decoded lossily, without its
    /// newline, and with a marker saying how many bytes were dropped from it.
    pub(crate) fn feed(&mut self, mut chunk: &[u8], emit: &mut impl FnMut(String)) {
        while !chunk.is_empty() {
            let (part, rest, complete) = match chunk.iter().position(|&byte| byte == b'\n') {
                Some(end) => (&chunk[..end], &chunk[end + 1..], true),
                None => (chunk, &[][..], false),
            };
            chunk = rest;
            let room = self.max - self.line.len();
            let kept = part.len().min(room);
            self.line.extend_from_slice(&part[..kept]);
            self.dropped += part.len() - kept;
            if complete {
                emit(self.take());
            }
        }
    }

    /// The line still open at EOF, if any.
    pub(crate) fn finish(&mut self, emit: &mut impl FnMut(String)) {
        if !self.line.is_empty() || self.dropped > 0 {
            emit(self.take());
        }
    }

    fn take(&mut self) -> String {
        let mut text = String::from_utf8_lossy(&self.line).into_owned();
        if text.ends_with('\r') {
            text.pop();
        }
        if self.dropped > 0 {
            text.push_str(&format!(" [… {} more bytes dropped]", self.dropped));
        }
        self.line.clear();
        self.dropped = 0;
        text
    }
}

/// Forwards a stdio server's stderr to `tracing` (target `dsh_tool_mcp::mcp`, level
/// `info`, `stderr: <line>`) until EOF or a read error.
pub(crate) fn forward(server: String, mut stderr: tokio::process::ChildStderr) {
    tokio::spawn(async move {
        let mut lines = StderrLines::new(MAX_STDERR_LINE_BYTES);
        let mut emit = |line: String| {
            tracing::info!(target: "dsh_tool_mcp::mcp", server = %server, "stderr: {line}");
        };
        let mut chunk = vec![0; CHUNK_BYTES];
        loop {
            match stderr.read(&mut chunk).await {
                Ok(0) => break,
                Ok(read) => lines.feed(&chunk[..read], &mut emit),
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        lines.finish(&mut emit);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pieces: &[&[u8]], max: usize) -> Vec<String> {
        let mut lines = StderrLines::new(max);
        let mut out = Vec::new();
        let mut emit = |line: String| out.push(line);
        for piece in pieces {
            lines.feed(piece, &mut emit);
        }
        lines.finish(&mut emit);
        out
    }

    #[test]
    fn lines_are_split_across_reads_and_the_last_one_is_kept() {
        assert_eq!(
            split(&[b"one\ntw", b"o\r\n", b"\nthree"], 64),
            ["one", "two", "", "three"]
        );
    }

    #[test]
    fn a_long_line_is_cut_and_says_how_much_was_dropped() {
        let long = vec![b'x'; 100];
        let out = split(&[&long, &long, b"\nnext\n"], 10);
        assert_eq!(
            out,
            [
                "xxxxxxxxxx [… 190 more bytes dropped]".to_owned(),
                "next".to_owned()
            ]
        );
    }

    #[test]
    fn bytes_that_are_no_utf8_are_replaced_and_reading_goes_on() {
        assert_eq!(
            split(&[b"bad \xff byte\n", b"after\n"], 64),
            ["bad \u{fffd} byte", "after"]
        );
    }
}
