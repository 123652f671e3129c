//! The process's `tracing` subscriber: the last stderr lines of each stdio MCP server (quoted
//! when one fails to start), the MCP server's and the OTLP export's warnings on stderr, and
//! with `--otlp-endpoint` the OpenTelemetry layers.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Lines of a failing server's stderr quoted in its error.
const STDERR_TAIL: usize = 5;

/// The last stderr lines of each stdio server, collected from the MCP client's `tracing`
/// events, so a server that fails to start can be quoted.
#[derive(Clone, Default)]
pub(super) struct StderrTails(Arc<Mutex<HashMap<String, VecDeque<String>>>>);

/// The tails [`install_tracing`] collects into.
static TAILS: OnceLock<StderrTails> = OnceLock::new();

/// Sets the process's `tracing` subscriber: stdio servers' stderr tails for their errors, and
/// the MCP server's warnings (an OAuth issuer's keys that cannot be fetched, failing `accept`)
/// printed on stderr, as nothing else would show them.
/// With `otlp`, this crate's spans (and the events in them) are also exported, every call's
/// duration recorded in the `gen_ai.execute_tool.duration` histogram (and every MCP request's
/// in `mcp.client.operation.duration` or `mcp.server.operation.duration`), MCP requests carry
/// trace context; a failed export is printed once as a warning.
pub(crate) fn install_tracing(otlp: Option<&dsh_tools::otel::Otlp>) {
    if otlp.is_some() {
        dsh_tools::otel::install_propagator();
    }
    let subscriber = tracing_subscriber::registry()
        .with(StderrTails::installed())
        .with(ServerWarnings)
        .with(otlp.map(|otlp| {
            otlp.layer()
                .with_filter(filter_fn(dsh_tools::otel::is_library_target))
        }))
        .with(otlp.and_then(dsh_tools::otel::Otlp::duration_layer))
        .with(otlp.and_then(dsh_tools::otel::Otlp::mcp_duration_layer));
    // Another subscriber already set (none is, in this binary) would only cost these.
    let _ = tracing::subscriber::set_global_default(subscriber);
}

impl StderrTails {
    pub(super) fn installed() -> StderrTails {
        TAILS.get_or_init(StderrTails::default).clone()
    }

    /// The server's tail, waiting briefly for lines still in its pipe when there are none yet.
    pub(super) async fn wait_for(&self, server: &str) -> Vec<String> {
        for _ in 0..20 {
            let tail: Vec<String> = self.lines(server);
            if !tail.is_empty() {
                return tail;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Vec::new()
    }

    fn lines(&self, server: &str) -> Vec<String> {
        let tails = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tails
            .get(server)
            .map(|tail| tail.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[derive(Default)]
struct StderrLine {
    server: Option<String>,
    message: Option<String>,
}

impl Visit for StderrLine {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "server" {
            self.server = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = Some(format!("{value:?}")),
            "server" => self.server = Some(format!("{value:?}")),
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for StderrTails {
    fn on_event(&self, event: &tracing::Event<'_>, _context: Context<'_, S>) {
        if event.metadata().target() != "dsh_tool_mcp::mcp" {
            return;
        }
        let mut line = StderrLine::default();
        event.record(&mut line);
        let (Some(server), Some(message)) = (line.server, line.message) else {
            return;
        };
        let Some(text) = message.strip_prefix("stderr: ") else {
            return;
        };
        let mut tails = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let tail = tails.entry(server).or_default();
        if tail.len() == STDERR_TAIL {
            tail.pop_front();
        }
        tail.push_back(text.to_owned());
    }
}

/// Prints each warning or error of the MCP server (`dsh_tool_mcp::mcp_server`) and of the
/// OTLP export (`dsh_tools::otel`) as one line on stderr:
/// `dsh-tools: warning: MESSAGE (FIELD=VALUE, …)`.
struct ServerWarnings;

/// An event's message and its other fields.
#[derive(Default)]
struct Fields {
    message: String,
    others: Vec<String>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            name => self.others.push(format!("{name}={value:?}")),
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_owned(),
            name => self.others.push(format!("{name}={value}")),
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for ServerWarnings {
    fn on_event(&self, event: &tracing::Event<'_>, _context: Context<'_, S>) {
        let metadata = event.metadata();
        if *metadata.level() > tracing::Level::WARN
            || !["dsh_tool_mcp::mcp_server", "dsh_tools::otel"]
                .iter()
                .any(|target| metadata.target().starts_with(target))
        {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut line = format!("dsh-tools: warning: {}", fields.message);
        if !fields.others.is_empty() {
            line.push_str(&format!(" ({})", fields.others.join(", ")));
        }
        // One line, whatever the fields hold (an issuer's or a server's text among them).
        eprintln!("{}", crate::terminal::escaped(&line));
    }
}
