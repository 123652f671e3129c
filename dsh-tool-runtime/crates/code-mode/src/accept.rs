//! Accepting connections on a listener that must outlive its own failures: the HTTP face of
//! `serve` and the Restate deployment share it.

use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// The first pause after a failed `accept`, doubled on each failure in a row up to
/// [`BACKOFF_MAX`]: running out of descriptors must slow the loop, not end the server.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A listener whose `accept` waits out failures (out of descriptors, a connection reset
/// before it was accepted) with a growing pause, logging each one under `face`.
#[derive(Debug)]
pub struct Acceptor {
    listener: TcpListener,
    face: &'static str,
    backoff: Duration,
}

impl Acceptor {
    /// `face` names the listener in log lines, e.g. `MCP over HTTP`.
    pub fn new(listener: TcpListener, face: &'static str) -> Self {
        Acceptor {
            listener,
            face,
            backoff: BACKOFF_MIN,
        }
    }

    /// The next connection; a failure is logged and retried after the pause, never returned.
    pub async fn accept(&mut self) -> TcpStream {
        loop {
            match self.listener.accept().await {
                Ok((stream, _)) => {
                    self.backoff = BACKOFF_MIN;
                    return stream;
                }
                Err(error) => {
                    tracing::warn!(
                        %error,
                        retry_in_ms = self.backoff.as_millis() as u64,
                        "{}: accept failed",
                        self.face
                    );
                    tokio::time::sleep(self.backoff).await;
                    self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    }
}
