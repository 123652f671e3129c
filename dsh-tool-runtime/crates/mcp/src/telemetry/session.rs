//! How long an MCP session lasted, as each side saw it: an event when the session ends, which
//! `dsh_tools::otel` records in the MCP conventions' `mcp.client.session.duration` and
//! `mcp.server.session.duration` histograms (unit `s`).
//!
//! A session runs from the connection's start (the client's transport opened, the server's
//! handler made) to its end (the transport closed, the handler dropped), and counts once it is
//! established: an `initialize` answered (a 2025-era peer, stdio or streamable HTTP) or, over
//! stdio, any request answered (a 2026-07-28 peer has no `initialize`, but its pipe is one
//! session). A 2026-07-28 exchange over streamable HTTP has no session (each request stands
//! alone, with no `Mcp-Session-Id`) and records none. The end is not classified: the event has
//! no `error.type`.

use std::time::Instant;

use super::{HTTP, PIPE, TCP};

/// The name of the event that ends a client's session.
pub(crate) const CLIENT_SESSION: &str = "mcp_client_session";

/// The name of the event that ends a server's session.
#[cfg(feature = "server")]
pub(crate) const SERVER_SESSION: &str = "mcp_server_session";

/// One side's session: when it started, whether it was established, and what its event says.
#[derive(Debug)]
pub(crate) struct Session {
    started: Instant,
    established: bool,
    /// `network.transport`: [`PIPE`] or [`TCP`].
    transport: &'static str,
    /// `mcp.protocol.version`, the last one agreed on or named.
    protocol_version: Option<String>,
    /// `network.protocol.version` over HTTP (the server side knows it).
    http_version: Option<&'static str>,
}

impl Session {
    /// A session over `transport` starting now.
    pub(crate) fn start(transport: &'static str) -> Self {
        Session {
            started: Instant::now(),
            established: false,
            transport,
            protocol_version: None,
            http_version: None,
        }
    }

    /// An `initialize` was answered, agreeing on `version`: the session is established on every
    /// transport.
    pub(crate) fn initialized(&mut self, version: String, http_version: Option<&'static str>) {
        self.established = true;
        self.protocol_version = Some(version);
        if http_version.is_some() {
            self.http_version = http_version;
        }
    }

    /// A request other than `initialize` went through (answered, on the client; received, on
    /// the server), naming `version` when it is a 2026-07-28 request: over stdio, that
    /// establishes the session.
    pub(crate) fn exchanged(&mut self, version: Option<&str>) {
        if self.transport == PIPE {
            self.established = true;
        }
        if let Some(version) = version
            && self.protocol_version.as_deref() != Some(version)
        {
            self.protocol_version = Some(version.to_owned());
        }
    }

    /// Seconds since the start, if the session was established.
    fn length(&self) -> Option<f64> {
        self.established
            .then(|| self.started.elapsed().as_secs_f64())
    }

    /// Reports the end of a client's session with the server at `address`:`port` (HTTP): the
    /// [`CLIENT_SESSION`] event, with no parent (it belongs to no request's trace).
    pub(crate) fn client_ended(&self, address: Option<&str>, port: Option<u16>) {
        let Some(duration) = self.length() else {
            return;
        };
        tracing::event!(
            name: CLIENT_SESSION,
            parent: None,
            tracing::Level::INFO,
            {
            duration,
            mcp.protocol.version = self.protocol_version.as_deref(),
            network.transport = self.transport,
            network.protocol.name = (self.transport == TCP).then_some(HTTP),
            server.address = address,
            // An int attribute, as on the spans.
            server.port = port.map(i64::from),
            }
        );
    }

    /// Reports the end of a server's session: the [`SERVER_SESSION`] event, with no parent.
    #[cfg(feature = "server")]
    pub(crate) fn server_ended(&self) {
        let Some(duration) = self.length() else {
            return;
        };
        tracing::event!(
            name: SERVER_SESSION,
            parent: None,
            tracing::Level::INFO,
            {
            duration,
            mcp.protocol.version = self.protocol_version.as_deref(),
            network.transport = self.transport,
            network.protocol.name = (self.transport == TCP).then_some(HTTP),
            network.protocol.version = self.http_version,
            }
        );
    }
}

/// The events of sessions, read back from a subscriber.
#[cfg(all(test, feature = "server"))]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

    use super::*;

    /// One event: its name and its fields as text.
    type Seen = (String, BTreeMap<String, String>);

    #[derive(Clone, Default)]
    struct Events(Arc<Mutex<Vec<Seen>>>);

    struct Fields<'a>(&'a mut BTreeMap<String, String>);

    impl Visit for Fields<'_> {
        fn record_f64(&mut self, field: &Field, value: f64) {
            self.0.insert(field.name().to_owned(), value.to_string());
        }
        fn record_i64(&mut self, field: &Field, value: i64) {
            self.0.insert(field.name().to_owned(), value.to_string());
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().to_owned(), value.to_owned());
        }
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.insert(field.name().to_owned(), format!("{value:?}"));
        }
    }

    impl<S: tracing::Subscriber> Layer<S> for Events {
        fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
            let mut fields = BTreeMap::new();
            event.record(&mut Fields(&mut fields));
            assert!(event.is_root(), "a session's end has no parent");
            self.0
                .lock()
                .unwrap()
                .push((event.metadata().name().to_owned(), fields));
        }
    }

    /// The events `run` emits.
    fn events(run: impl FnOnce()) -> Vec<Seen> {
        let events = Events::default();
        let subscriber = tracing_subscriber::registry().with(events.clone());
        tracing::subscriber::with_default(subscriber, run);
        events.0.lock().unwrap().clone()
    }

    fn fields(seen: &Seen) -> BTreeMap<&str, &str> {
        seen.1
            .iter()
            .filter(|(key, _)| *key != "duration")
            .map(|(key, value)| (key.as_str(), value.as_str()))
            .collect()
    }

    #[test]
    fn an_initialized_http_session_ends_with_the_conventions_attributes() {
        let seen = events(|| {
            let mut client = Session::start(TCP);
            client.initialized("2025-11-25".to_owned(), None);
            client.client_ended(Some("127.0.0.1"), Some(8931));
            let mut server = Session::start(TCP);
            server.initialized("2025-06-18".to_owned(), Some("1.1"));
            server.server_ended();
        });
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(seen[0].0, "mcp_client_session");
        assert_eq!(
            fields(&seen[0]),
            BTreeMap::from([
                ("mcp.protocol.version", "2025-11-25"),
                ("network.transport", "tcp"),
                ("network.protocol.name", "http"),
                ("server.address", "127.0.0.1"),
                ("server.port", "8931"),
            ])
        );
        assert_eq!(seen[1].0, "mcp_server_session");
        assert_eq!(
            fields(&seen[1]),
            BTreeMap::from([
                ("mcp.protocol.version", "2025-06-18"),
                ("network.transport", "tcp"),
                ("network.protocol.name", "http"),
                ("network.protocol.version", "1.1"),
            ])
        );
        for event in &seen {
            let duration: f64 = event.1["duration"].parse().unwrap();
            assert!(duration >= 0.0, "{event:?}");
        }
    }

    #[test]
    fn a_2026_exchange_over_http_is_no_session_but_a_pipe_is_one() {
        let seen = events(|| {
            let mut http = Session::start(TCP);
            http.exchanged(Some("2026-07-28"));
            http.client_ended(Some("127.0.0.1"), Some(80));
            http.server_ended();
            let mut pipe = Session::start(PIPE);
            pipe.exchanged(Some("2026-07-28"));
            pipe.exchanged(None);
            pipe.server_ended();
            // Nothing answered: no session.
            Session::start(PIPE).client_ended(None, None);
        });
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].0, "mcp_server_session");
        assert_eq!(
            fields(&seen[0]),
            BTreeMap::from([
                ("mcp.protocol.version", "2026-07-28"),
                ("network.transport", "pipe"),
            ])
        );
    }
}
