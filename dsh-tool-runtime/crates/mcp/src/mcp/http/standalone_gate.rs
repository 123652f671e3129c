//! A session's requests held between its `notifications/initialized` and the answer to its
//! standalone GET stream, so the server never answers or asks on a stream not yet open.

use std::sync::Arc;
use std::time::Duration;

/// How long the first request after `notifications/initialized` waits for the standalone GET
/// stream to be answered: a bound for a server that holds its answer's headers back, after which
/// the request goes anyway (as it would without the wait).
const STANDALONE_OPEN_BOUND: Duration = Duration::from_secs(10);

/// Holds the requests of a session between its `notifications/initialized` and the answer to
/// its standalone GET stream (Streamable HTTP, "Listening for Messages from the Server").
///
/// A 2025-era server may send what is not tied to a request (the answer of a request whose
/// stream it closed, a server-to-client request such as elicitation) only on that stream; a
/// request that arrives before the stream is open can find its answer sent elsewhere or
/// dropped. `true` while a stream is expected and not yet answered (or refused).
#[derive(Clone)]
pub(super) struct StandaloneGate(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for StandaloneGate {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(false)))
    }
}

impl StandaloneGate {
    /// A stream is about to be opened: rmcp opens it right after the accepted
    /// `notifications/initialized` of a session.
    pub(super) fn expect(&self) {
        self.0.send_replace(true);
    }

    /// The stream was answered (open, refused with 405, or failed): requests may go.
    pub(super) fn opened(&self) {
        self.0.send_replace(false);
    }

    /// Waits while a stream is expected, at most [`STANDALONE_OPEN_BOUND`].
    pub(super) async fn wait(&self) {
        let mut expected = self.0.subscribe();
        let _ = tokio::time::timeout(
            STANDALONE_OPEN_BOUND,
            expected.wait_for(|expected| !*expected),
        )
        .await;
    }
}
