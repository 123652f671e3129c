//! The JSON-lines event log.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use std::sync::atomic::Ordering;

use tokio::task::JoinHandle;

use super::{EventSource, TapHandle};

/// Writes every [`ToolEvent`](super::ToolEvent) of a registry to a file, one JSON object per
/// line (`{"event":"call",…}`), each line flushed as it is written, zstd-compressed when the path
/// ends in `.zst` (feature `event-log-zstd`). [`read_log`](super::read_log) reads it back.
///
/// The pipeline hands each event to the log's own queue as it publishes it, and a blocking
/// thread serializes and writes them, so a slow disk never holds up a runtime worker and a busy
/// runtime never makes the log lose events. Only when 16,384 events wait unwritten at once are
/// the next ones dropped, and `{"event":"lagged","missed":N}` is written where they would have
/// been, so a gap is visible in the log. Dropping the log without [`finish`](Self::finish) stops
/// it the same way, without waiting for the file.
#[derive(Debug)]
pub struct EventLog {
    tap: TapHandle,
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

/// The line of a `lagged` marker: `missed` events were dropped here.
fn lagged_line(missed: u64) -> io::Result<Vec<u8>> {
    Ok(serde_json::to_vec(
        &serde_json::json!({"event": "lagged", "missed": missed}),
    )?)
}

impl EventLog {
    /// Creates (or truncates) `path` and starts logging `registry`'s events (`registry`: a
    /// [`Registry`](crate::Registry), or any other [`EventSource`]). Must be called inside a
    /// tokio runtime.
    ///
    /// # Errors
    /// The file cannot be created, the zstd encoder cannot start, or the path ends in `.zst`
    /// without the `event-log-zstd` feature.
    pub fn start(registry: &impl EventSource, path: impl AsRef<Path>) -> io::Result<EventLog> {
        let mut sink = Sink::open(path.as_ref())?;
        let tap = registry.tap_events();
        let (events, missed) = (tap.events, tap.missed);
        // The writer ends once the tap is closed and every queued event is written, or at the
        // first failed write.
        let task = tokio::task::spawn_blocking(move || {
            let mut written = 0u64;
            let gap = |sink: &mut Sink| match missed.swap(0, Ordering::Relaxed) {
                0 => Ok(()),
                missed => sink.write_line(&lagged_line(missed)?),
            };
            for event in events {
                gap(&mut sink)?;
                sink.write_line(&serde_json::to_vec(&event)?)?;
                written += 1;
            }
            gap(&mut sink)?;
            sink.close()?;
            Ok::<u64, io::Error>(written)
        });
        Ok(EventLog {
            tap: tap.handle,
            task,
        })
    }

    /// Writes the events published so far, closes the file and returns how many events it holds.
    ///
    /// # Errors
    /// A write failed (the log stops at the first failure), or the writer task was cancelled.
    pub async fn finish(self) -> io::Result<u64> {
        self.tap.close();
        self.task.await.map_err(io::Error::other)?
    }
}
