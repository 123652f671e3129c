//! The pipes of a subprocess run: the run frame that hands the child its program, and the tasks
//! that read the child's frames and output and write the host's frames to it.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::super::frame::{FrameDecoder, Inbound};
use super::super::ledger::Lines;

/// Everything a run's loop reacts to besides timers and binding completions.
pub(super) enum Event {
    Inbound(Inbound),
    FramesClosed,
    /// The child's end of the host-to-child pipe is gone.
    RepliesClosed,
    Output(String),
    OutputClosed,
}

/// Decodes the child's frame pipe into events, the last one [`Event::FramesClosed`].
pub(super) async fn read_frames(
    mut pipe: tokio::net::unix::pipe::Receiver,
    mut decoder: FrameDecoder,
    tx: mpsc::Sender<Event>,
) {
    let mut buf = vec![0u8; 64 << 10];
    let mut out = Vec::new();
    loop {
        let n = pipe.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            decoder.finish(&mut out);
        } else {
            decoder.feed(&buf[..n], &mut out);
        }
        for inbound in out.drain(..) {
            if tx.send(Event::Inbound(inbound)).await.is_err() {
                return;
            }
        }
        if n == 0 {
            let _ = tx.send(Event::FramesClosed).await;
            return;
        }
    }
}

/// Turns a raw output stream into log entries, one per line (a final unterminated line too).
/// A line longer than `max` bytes is cut there: it cannot fit the ledger anyway.
pub(super) async fn read_output(
    mut stream: impl AsyncRead + Unpin,
    max: usize,
    tx: mpsc::Sender<Event>,
) {
    let mut buf = vec![0u8; 64 << 10];
    let mut lines = Lines::new(max);
    let mut out = Vec::new();
    loop {
        let n = stream.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        lines.feed(&buf[..n], &mut out);
        for text in out.drain(..) {
            if tx.send(Event::Output(text)).await.is_err() {
                return;
            }
        }
    }
    if let Some(text) = lines.finish() {
        let _ = tx.send(Event::Output(text)).await;
    }
    let _ = tx.send(Event::OutputClosed).await;
}

/// Writes the host's frames to the child in order; [`Event::RepliesClosed`] once it cannot.
pub(super) async fn write_frames(
    mut pipe: tokio::net::unix::pipe::Sender,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    tx: mpsc::Sender<Event>,
) {
    while let Some(frame) = rx.recv().await {
        if pipe.write_all(&frame).await.is_err() {
            let _ = tx.send(Event::RepliesClosed).await;
            return;
        }
    }
}
