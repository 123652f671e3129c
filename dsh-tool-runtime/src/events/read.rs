//! Reading an event log back: what a replay viewer starts from. Logs are read line by line
//! through a buffer, never whole: what the reader holds is bounded by [`ReadLimits`], however
//! much the file (or its zstd frames) expands to.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::ToolEvent;
use crate::json::{MAX_VALUE_DEPTH, text_depth};

/// Deepest JSON line a log may hold: a value as deep as the pipeline lets through
/// (256 levels), inside the few levels of its event and result.
pub const MAX_LOG_DEPTH: usize = MAX_VALUE_DEPTH + 16;

/// Bytes of the read buffer.
const BUFFER_BYTES: usize = 64 << 10;

/// How much of a log [`read_log_with`] takes in before it gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadLimits {
    /// Decoded bytes (after zstd, for a `.zst` log) read in all: past it the read ends with
    /// [`LogError::TooLarge`]. Default 256 MiB.
    pub max_log_bytes: u64,
    /// Bytes of one line, its `\n` not counted: a longer line ends the read with
    /// [`LogError::LineTooLong`]. Default 16 MiB.
    pub max_line_bytes: usize,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits {
            max_log_bytes: 256 << 20,
            max_line_bytes: 16 << 20,
        }
    }
}

impl ReadLimits {
    /// These limits with `bytes` decoded bytes in all.
    pub fn with_max_log_bytes(mut self, bytes: u64) -> Self {
        self.max_log_bytes = bytes;
        self
    }

    /// These limits with lines of at most `bytes` bytes.
    pub fn with_max_line_bytes(mut self, bytes: usize) -> Self {
        self.max_line_bytes = bytes;
        self
    }
}

/// One line of an event log written by [`EventLog`](super::EventLog).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
// Nearly every line is a tool event: boxing it would cost an allocation per line for nothing.
#[allow(clippy::large_enum_variant)]
pub enum LoggedEvent {
    /// A pipeline event.
    Tool(ToolEvent),
    /// The writer fell behind the pipeline and lost `missed` events at this point.
    Lagged {
        /// How many events are missing.
        missed: u64,
    },
}

/// Why an event log could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The file could not be opened or read.
    #[error("cannot read event log {}: {source}", path.display())]
    Io {
        /// The log's path.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A complete line is not an event.
    #[error("event log {}, line {line}: {message}", path.display())]
    Malformed {
        /// The log's path.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The log decodes to more than [`ReadLimits::max_log_bytes`].
    #[error(
        "event log {} holds more than {limit} bytes (decoded); nothing of it was kept",
        path.display()
    )]
    TooLarge {
        /// The log's path.
        path: PathBuf,
        /// The limit, in decoded bytes.
        limit: u64,
    },
    /// A line is longer than [`ReadLimits::max_line_bytes`].
    #[error("event log {}, line {line}: longer than {limit} bytes", path.display())]
    LineTooLong {
        /// The log's path.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The limit, in bytes.
        limit: usize,
    },
}

/// Reads every event of a log under the default [`ReadLimits`] (256 MiB decoded, 16 MiB a
/// line); see [`read_log_with`].
///
/// # Errors
/// As [`read_log_with`].
pub fn read_log(path: impl AsRef<Path>) -> Result<Vec<LoggedEvent>, LogError> {
    read_log_with(path, &ReadLimits::default())
}

/// Reads every event of a log, zstd-decoding it when the path ends in `.zst` (feature
/// `event-log-zstd`; without it a `.zst` path is an [`io::ErrorKind::Unsupported`] error).
/// The file is streamed: memory held is the events read plus one line, never the whole file.
///
/// A log whose writer was killed mid-line ends in a torn line (no final `\n`, not valid JSON):
/// that line is skipped. For `.zst` logs, a frame cut short the same way yields the lines of its
/// flushed blocks. Every other line must be an event, nested at most [`MAX_LOG_DEPTH`] levels.
///
/// # Errors
/// [`LogError::Io`] when the file cannot be read, [`LogError::Malformed`] for a complete line
/// that is not an event, [`LogError::TooLarge`] past `limits.max_log_bytes` decoded bytes,
/// [`LogError::LineTooLong`] for a line past `limits.max_line_bytes`.
pub fn read_log_with(
    path: impl AsRef<Path>,
    limits: &ReadLimits,
) -> Result<Vec<LoggedEvent>, LogError> {
    let path = path.as_ref();
    let io_error = |source| LogError::Io {
        path: path.to_owned(),
        source,
    };
    let file = File::open(path).map_err(io_error)?;
    let source: Box<dyn Read> = if path.extension().is_some_and(|ext| ext == "zst") {
        zstd_source(file).map_err(io_error)?
    } else {
        Box::new(file)
    };
    read_lines(path, BufReader::with_capacity(BUFFER_BYTES, source), limits)
}

/// The decoded bytes of a `.zst` log.
#[cfg(feature = "event-log-zstd")]
fn zstd_source(file: File) -> io::Result<Box<dyn Read>> {
    Ok(Box::new(CutShort {
        inner: zstd::Decoder::new(file)?,
        decoded: false,
    }))
}

#[cfg(not(feature = "event-log-zstd"))]
fn zstd_source(_file: File) -> io::Result<Box<dyn Read>> {
    Err(super::log::zstd_unsupported())
}

/// A decoder whose frame may be cut short (its writer killed): an error after some bytes
/// were decoded ends the stream there, since those are what the writer flushed; the line
/// reader drops the torn tail.
#[cfg(feature = "event-log-zstd")]
struct CutShort<R> {
    inner: R,
    decoded: bool,
}

#[cfg(feature = "event-log-zstd")]
impl<R: Read> Read for CutShort<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.inner.read(buf) {
                Ok(n) => {
                    self.decoded |= n > 0;
                    return Ok(n);
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(_) if self.decoded => return Ok(0),
                Err(err) => return Err(err),
            }
        }
    }
}

fn read_lines(
    path: &Path,
    mut reader: impl BufRead,
    limits: &ReadLimits,
) -> Result<Vec<LoggedEvent>, LogError> {
    let mut events = Vec::new();
    let mut line = Vec::new();
    let (mut number, mut decoded) = (0usize, 0u64);
    // One byte past the line limit tells a line that is too long from one that fits.
    let take = u64::try_from(limits.max_line_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    loop {
        line.clear();
        let n = (&mut reader)
            .take(take)
            .read_until(b'\n', &mut line)
            .map_err(|source| LogError::Io {
                path: path.to_owned(),
                source,
            })?;
        if n == 0 {
            return Ok(events);
        }
        decoded = decoded.saturating_add(n as u64);
        if decoded > limits.max_log_bytes {
            return Err(LogError::TooLarge {
                path: path.to_owned(),
                limit: limits.max_log_bytes,
            });
        }
        number += 1;
        let complete = line.last() == Some(&b'\n');
        let body = if complete {
            &line[..line.len() - 1]
        } else {
            &line[..]
        };
        if body.len() > limits.max_line_bytes {
            return Err(LogError::LineTooLong {
                path: path.to_owned(),
                line: number,
                limit: limits.max_line_bytes,
            });
        }
        if body.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_line(body) {
            Ok(event) => events.push(event),
            // A line without its `\n` is the last one (a line that fits stops only at the
            // end): a torn tail.
            Err(_) if !complete => {}
            Err(message) => {
                return Err(LogError::Malformed {
                    path: path.to_owned(),
                    line: number,
                    message,
                });
            }
        }
    }
}

fn parse_line(line: &[u8]) -> Result<LoggedEvent, String> {
    // Measured before parsing: below the cap, the recursive parse and the event's own
    // (recursive) deserialization and drop stay a few hundred frames deep.
    let depth = text_depth(line);
    if depth > MAX_LOG_DEPTH {
        return Err(format!(
            "nested {depth} levels deep, more than the {MAX_LOG_DEPTH} an event log holds"
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    de.disable_recursion_limit();
    let value = serde::Deserialize::deserialize(&mut de)
        .and_then(|value: Value| de.end().map(|()| value))
        .map_err(|err| err.to_string())?;
    if value.get("event").and_then(Value::as_str) == Some("lagged") {
        let missed = value
            .get("missed")
            .and_then(Value::as_u64)
            .ok_or("a `lagged` line needs a `missed` count")?;
        return Ok(LoggedEvent::Lagged { missed });
    }
    serde_json::from_value(value)
        .map(LoggedEvent::Tool)
        .map_err(|err| err.to_string())
}
