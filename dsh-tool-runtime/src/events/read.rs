//! Reading an event log back (SPEC §10): what a replay viewer starts from.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::ToolEvent;

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
}

/// Reads every event of a log, zstd-decoding it when the path ends in `.zst` (feature
/// `event-log-zstd`; without it a `.zst` path is an [`io::ErrorKind::Unsupported`] error).
///
/// A log whose writer was killed mid-line ends in a torn line (no final `\n`, not valid JSON):
/// that line is skipped. For `.zst` logs, a frame cut short the same way yields the lines of its
/// flushed blocks. Every other line must be an event.
///
/// # Errors
/// [`LogError::Io`] when the file cannot be read, [`LogError::Malformed`] for a complete line that
/// is not an event.
pub fn read_log(path: impl AsRef<Path>) -> Result<Vec<LoggedEvent>, LogError> {
    let path = path.as_ref();
    let io_error = |source| LogError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(io_error)?;
    let mut text = Vec::new();
    if path.extension().is_some_and(|ext| ext == "zst") {
        read_zstd(file, &mut text).map_err(io_error)?;
    } else {
        file.read_to_end(&mut text).map_err(io_error)?;
    }
    parse_lines(path, &text)
}

/// Decodes a `.zst` log into `text`.
#[cfg(feature = "event-log-zstd")]
fn read_zstd(file: File, text: &mut Vec<u8>) -> io::Result<()> {
    let mut decoder = zstd::Decoder::new(file)?;
    let mut chunk = [0u8; 64 * 1024];
    loop {
        match decoder.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => text.extend_from_slice(&chunk[..n]),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            // A frame cut short: what was decoded so far is what the writer flushed; the line
            // parser drops a torn tail.
            Err(_) if !text.is_empty() => return Ok(()),
            Err(err) => return Err(err),
        }
    }
}

#[cfg(not(feature = "event-log-zstd"))]
fn read_zstd(_file: File, _text: &mut Vec<u8>) -> io::Result<()> {
    Err(super::log::zstd_unsupported())
}

fn parse_lines(path: &Path, text: &[u8]) -> Result<Vec<LoggedEvent>, LogError> {
    let mut events = Vec::new();
    let mut lines = text.split(|byte| *byte == b'\n').enumerate().peekable();
    while let Some((index, line)) = lines.next() {
        // `split` yields the bytes after the last `\n` last: empty for a complete log.
        let is_tail = lines.peek().is_none();
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_line(line) {
            Ok(event) => events.push(event),
            Err(_) if is_tail => {}
            Err(message) => {
                return Err(LogError::Malformed {
                    path: path.to_owned(),
                    line: index + 1,
                    message,
                });
            }
        }
    }
    Ok(events)
}

fn parse_line(line: &[u8]) -> Result<LoggedEvent, String> {
    let value: Value = serde_json::from_slice(line).map_err(|err| err.to_string())?;
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
