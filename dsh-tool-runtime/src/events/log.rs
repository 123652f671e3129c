//! The JSON-lines event log (SPEC §10).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::registry::Registry;

/// Writes every [`ToolEvent`](super::ToolEvent) of a registry to a file, one JSON object per
/// line (`{"event":"call",…}`), each line flushed as it is written, zstd-compressed when the path
/// ends in `.zst`. [`read_log`](super::read_log) reads it back.
///
/// A writer that falls more than 1,024 events behind the pipeline loses the oldest and writes
/// `{"event":"lagged","missed":N}` in their place, so a gap is visible in the log.
#[derive(Debug)]
pub struct EventLog {
    stop: CancellationToken,
    task: JoinHandle<io::Result<u64>>,
}

enum Sink {
    Plain(BufWriter<File>),
    Zstd(zstd::Encoder<'static, BufWriter<File>>),
}

impl Sink {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Sink::Plain(out) => out,
            Sink::Zstd(out) => out,
        }
    }

    fn close(self) -> io::Result<()> {
        match self {
            Sink::Plain(mut out) => out.flush(),
            Sink::Zstd(out) => out.finish()?.flush(),
        }
    }
}

impl EventLog {
    /// Creates (or truncates) `path` and starts logging `registry`'s events. Must be called
    /// inside a tokio runtime.
    ///
    /// # Errors
    /// The file cannot be created, or the zstd encoder cannot start.
    pub fn start(registry: &Registry, path: impl AsRef<Path>) -> io::Result<EventLog> {
        let path = path.as_ref();
        let file = BufWriter::new(File::create(path)?);
        let mut sink = if path.extension().is_some_and(|ext| ext == "zst") {
            Sink::Zstd(zstd::Encoder::new(file, 3)?)
        } else {
            Sink::Plain(file)
        };
        let mut events = registry.subscribe();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut written = 0u64;
            loop {
                let next = tokio::select! {
                    biased;
                    next = events.recv() => next,
                    _ = stopped.cancelled() => break,
                };
                match next {
                    Ok(event) => written += write_line(sink.writer(), &event)?,
                    Err(RecvError::Lagged(missed)) => {
                        write_line(
                            sink.writer(),
                            &serde_json::json!({"event": "lagged", "missed": missed}),
                        )?;
                    }
                    Err(RecvError::Closed) => break,
                }
            }
            // Events published before `finish` was called are still in the channel.
            loop {
                match events.try_recv() {
                    Ok(event) => written += write_line(sink.writer(), &event)?,
                    Err(TryRecvError::Lagged(missed)) => {
                        write_line(
                            sink.writer(),
                            &serde_json::json!({"event": "lagged", "missed": missed}),
                        )?;
                    }
                    Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                }
            }
            sink.close()?;
            Ok(written)
        });
        Ok(EventLog { stop, task })
    }

    /// Writes the events published so far, closes the file and returns how many events it holds.
    ///
    /// # Errors
    /// A write failed (the log stops at the first failure), or the writer task was cancelled.
    pub async fn finish(self) -> io::Result<u64> {
        self.stop.cancel();
        self.task.await.map_err(io::Error::other)?
    }
}

/// Writes one line and flushes it (a zstd block ends there), so a reader sees every event as soon
/// as it is published and a killed process leaves at most one torn line.
fn write_line(out: &mut dyn Write, event: &impl serde::Serialize) -> io::Result<u64> {
    serde_json::to_writer(&mut *out, event)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(1)
}
