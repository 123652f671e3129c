//! The JSON-lines event log.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::registry::Registry;

/// Writes every [`ToolEvent`](super::ToolEvent) of a registry to a file, one JSON object per
/// line (`{"event":"call",…}`), each line flushed as it is written, zstd-compressed when the path
/// ends in `.zst` (feature `event-log-zstd`). [`read_log`](super::read_log) reads it back.
///
/// Lines are serialized on the async side and written by a blocking thread, so a slow disk never
/// holds up a runtime worker. A writer that falls more than 1,024 events behind the pipeline
/// loses the oldest and writes `{"event":"lagged","missed":N}` in their place, so a gap is
/// visible in the log.
#[derive(Debug)]
pub struct EventLog {
    stop: CancellationToken,
    task: JoinHandle<io::Result<u64>>,
}

enum Sink {
    Plain(BufWriter<File>),
    #[cfg(feature = "event-log-zstd")]
    Zstd(zstd::Encoder<'static, BufWriter<File>>),
}

impl Sink {
    fn open(path: &Path) -> io::Result<Sink> {
        let zstd = path.extension().is_some_and(|ext| ext == "zst");
        #[cfg(not(feature = "event-log-zstd"))]
        if zstd {
            return Err(zstd_unsupported());
        }
        let file = BufWriter::new(File::create(path)?);
        #[cfg(feature = "event-log-zstd")]
        if zstd {
            return Ok(Sink::Zstd(zstd::Encoder::new(file, 3)?));
        }
        Ok(Sink::Plain(file))
    }

    /// Writes one line and flushes it (a zstd block ends there), so a reader sees every event as
    /// soon as it is published and a killed process leaves at most one torn line.
    // Without `event-log-zstd` the match has one arm; with it, two.
    #[allow(clippy::infallible_destructuring_match)]
    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        let out: &mut dyn Write = match self {
            Sink::Plain(out) => out,
            #[cfg(feature = "event-log-zstd")]
            Sink::Zstd(out) => out,
        };
        out.write_all(line)?;
        out.write_all(b"\n")?;
        out.flush()
    }

    fn close(self) -> io::Result<()> {
        match self {
            Sink::Plain(mut out) => out.flush(),
            #[cfg(feature = "event-log-zstd")]
            Sink::Zstd(out) => out.finish()?.flush(),
        }
    }
}

/// The error for a `.zst` log without the `event-log-zstd` feature.
#[cfg(not(feature = "event-log-zstd"))]
pub(super) fn zstd_unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "zstd event logs need the `event-log-zstd` feature of dsh-tools",
    )
}

/// One serialized line for the writer thread; `event` is `false` for a `lagged` marker.
struct Line {
    text: Vec<u8>,
    event: bool,
}

impl Line {
    fn of(value: &impl serde::Serialize, event: bool) -> io::Result<Line> {
        Ok(Line {
            text: serde_json::to_vec(value)?,
            event,
        })
    }

    fn lagged(missed: u64) -> io::Result<Line> {
        Line::of(
            &serde_json::json!({"event": "lagged", "missed": missed}),
            false,
        )
    }
}

impl EventLog {
    /// Creates (or truncates) `path` and starts logging `registry`'s events. Must be called
    /// inside a tokio runtime.
    ///
    /// # Errors
    /// The file cannot be created, the zstd encoder cannot start, or the path ends in `.zst`
    /// without the `event-log-zstd` feature.
    pub fn start(registry: &Registry, path: impl AsRef<Path>) -> io::Result<EventLog> {
        let mut sink = Sink::open(path.as_ref())?;
        let (lines, queued) = std::sync::mpsc::channel::<Line>();
        // The writer ends when every line is written (the sender is gone) or at the first
        // failed write.
        let writer = tokio::task::spawn_blocking(move || {
            let mut written = 0u64;
            for line in queued {
                sink.write_line(&line.text)?;
                written += u64::from(line.event);
            }
            sink.close()?;
            Ok::<u64, io::Error>(written)
        });
        let mut events = registry.subscribe();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let send = |line: io::Result<Line>| line.map(|line| lines.send(line).is_ok());
            loop {
                let next = tokio::select! {
                    biased;
                    next = events.recv() => next,
                    _ = stopped.cancelled() => break,
                };
                let open = match next {
                    Ok(event) => send(Line::of(&event, true))?,
                    Err(RecvError::Lagged(missed)) => send(Line::lagged(missed))?,
                    Err(RecvError::Closed) => break,
                };
                if !open {
                    // The writer stopped at a failed write; its result says why.
                    break;
                }
            }
            // Events published before `finish` was called are still in the channel.
            loop {
                let open = match events.try_recv() {
                    Ok(event) => send(Line::of(&event, true))?,
                    Err(TryRecvError::Lagged(missed)) => send(Line::lagged(missed))?,
                    Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                };
                if !open {
                    break;
                }
            }
            drop(lines);
            writer.await.map_err(io::Error::other)?
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
