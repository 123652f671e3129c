//! The lifecycle of one bridged server: the first sync, generations of registered tools,
//! re-sync on `list_changed`, reconnection after the transport closes, disconnect.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::config::{McpError, McpServer};
use super::connection::{self, Conn};
use super::names::mcp_tool_name;
use super::progress::Link;
use super::results;
use super::schema::{McpToolSpec, canonical_output_schema, parse_tool};
use crate::definition::{DefinitionError, ToolDefinition, ToolDefinitionBuilder};
use crate::events::ToolEvent;
use crate::registry::Handle;
use crate::scope::AgentId;

/// The tools of one successful sync.
#[derive(Default)]
struct Generation {
    handles: Vec<Handle>,
    names: Vec<String>,
}

pub(crate) struct Bridge {
    pub(crate) config: McpServer,
    pub(crate) link: Arc<Link>,
    agent: Option<AgentId>,
    pub(crate) conn: Mutex<Option<Arc<Conn>>>,
    generation: tokio::sync::Mutex<Generation>,
    names: Mutex<Vec<String>>,
    generation_id: AtomicU64,
    pub(crate) shutdown: CancellationToken,
}

impl Bridge {
    pub(crate) fn new(config: McpServer, link: Arc<Link>, agent: Option<AgentId>) -> Arc<Self> {
        Arc::new(Bridge {
            config,
            link,
            agent,
            conn: Mutex::new(None),
            generation: tokio::sync::Mutex::new(Generation::default()),
            names: Mutex::new(Vec::new()),
            generation_id: AtomicU64::new(0),
            shutdown: CancellationToken::new(),
        })
    }

    pub(crate) fn server(&self) -> &str {
        &self.config.name
    }

    pub(crate) fn current(&self) -> Option<Arc<Conn>> {
        self.conn
            .lock()
            .as_ref()
            .filter(|conn| !conn.closed.is_cancelled())
            .cloned()
    }

    pub(crate) fn tool_names(&self) -> Vec<String> {
        self.names.lock().clone()
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation_id.load(Ordering::SeqCst)
    }

    /// Connects, syncs, and starts watching: the first connection of `add_mcp_server`.
    pub(crate) async fn start(self: &Arc<Self>) -> Result<(), McpError> {
        let conn = connection::open(&self.config, &self.link).await?;
        *self.conn.lock() = Some(conn.clone());
        if let Err(err) = self.sync(&conn).await {
            conn.closed.cancel();
            conn.stopped.cancelled().await;
            return Err(err);
        }
        self.watch(conn);
        let bridge = Arc::downgrade(self);
        let shutdown = self.shutdown.clone();
        let link = self.link.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = link.list_changed.notified() => {}
                }
                let Some(bridge) = bridge.upgrade() else {
                    return;
                };
                if let Some(conn) = bridge.current()
                    && let Err(err) = bridge.sync(&conn).await
                {
                    tracing::error!(target: "dsh_tool_mcp::mcp", server = %bridge.server(), "re-sync after list_changed failed: {err}");
                }
            }
        });
        Ok(())
    }

    /// Reconnects with backoff once `conn` closes (unless the bridge is shutting down).
    fn watch(self: &Arc<Self>, conn: Arc<Conn>) {
        let bridge = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = conn.closed.cancelled() => {}
                _ = bridge.shutdown.cancelled() => return,
            }
            tracing::warn!(target: "dsh_tool_mcp::mcp", server = %bridge.server(), "transport closed");
            let policy = bridge.config.reconnect.clone();
            if !policy.enabled {
                return;
            }
            for attempt in 0..policy.max_attempts {
                let delay = Duration::from_millis(policy.delay_ms(attempt));
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = bridge.shutdown.cancelled() => return,
                }
                let opened = tokio::select! {
                    opened = connection::open(&bridge.config, &bridge.link) => opened,
                    _ = bridge.shutdown.cancelled() => return,
                };
                match opened {
                    Ok(conn) => {
                        *bridge.conn.lock() = Some(conn.clone());
                        if bridge.shutdown.is_cancelled() {
                            conn.closed.cancel();
                            return;
                        }
                        if let Err(err) = bridge.sync(&conn).await {
                            tracing::error!(target: "dsh_tool_mcp::mcp", server = %bridge.server(), "sync after reconnect failed: {err}");
                        }
                        bridge.watch(conn);
                        return;
                    }
                    Err(err) => {
                        tracing::warn!(target: "dsh_tool_mcp::mcp", server = %bridge.server(), attempt = attempt + 1, "reconnect failed: {err}");
                    }
                }
            }
            tracing::error!(target: "dsh_tool_mcp::mcp", server = %bridge.server(), "gave up reconnecting after {} attempts", policy.max_attempts);
        });
    }

    /// Lists the tools and replaces the registered generation. A tool that cannot be used is
    /// skipped with a warning and its siblings register: a malformed entry, a tool with the
    /// public name of an earlier usable one, or a name a foreign tool already holds.
    async fn sync(self: &Arc<Self>, conn: &Conn) -> Result<(), McpError> {
        let server = self.server().to_owned();
        let mut generation = self.generation.lock().await;
        let raw_tools = connection::list_tools(&self.config, conn).await?;
        let mut seen = HashSet::new();
        let mut definitions = Vec::new();
        for raw in &raw_tools {
            let spec = match parse_tool(raw) {
                Ok(spec) => spec,
                Err(message) => {
                    tracing::warn!(target: "dsh_tool_mcp::mcp", server = %server, "skipping tool: {message}");
                    continue;
                }
            };
            let name = mcp_tool_name(&server, &spec.raw_name);
            if seen.contains(&name) {
                tracing::warn!(target: "dsh_tool_mcp::mcp", server = %server, "skipping tool \"{}\": the list already has a tool named {name}", spec.raw_name);
                continue;
            }
            match self.definition(spec) {
                Ok(definition) => {
                    seen.insert(name);
                    definitions.push(definition);
                }
                Err(message) => {
                    tracing::warn!(target: "dsh_tool_mcp::mcp", server = %server, "skipping tool: {message}");
                }
            }
        }
        let id = self.generation_id.fetch_add(1, Ordering::SeqCst) + 1;
        let registry = &self.link.registry;
        let old = std::mem::take(&mut generation.handles);
        // One write: a reader (a `tools` listing, a call) sees the old tools or the new ones.
        let crate::registry::Replaced {
            registered,
            refused,
        } = registry.replace_tools(self.agent.as_ref(), &old, definitions);
        for (name, source) in refused {
            tracing::warn!(target: "dsh_tool_mcp::mcp", server = %server, "skipping tool {name}: {source}");
        }
        (generation.names, generation.handles) = registered.into_iter().unzip();
        *self.names.lock() = generation.names.clone();
        let tools = generation.names.clone();
        registry.publish(|| ToolEvent::ToolsChanged {
            source: server,
            generation: id,
            tools,
        });
        Ok(())
    }

    /// The registry definition of one listed tool. An output schema that does not compile in
    /// its canonical wrapper falls back to unconstrained JSON, like one that does not compile
    /// alone.
    fn definition(self: &Arc<Self>, spec: McpToolSpec) -> Result<ToolDefinition, String> {
        let output = spec.output_schema.clone();
        match self.builder(&spec, output).build() {
            Err(DefinitionError::UnsupportedSchema {
                which: "output",
                message,
                ..
            }) => {
                tracing::debug!(target: "dsh_tool_mcp::mcp", server = %self.server(), tool = %spec.raw_name, "ignoring outputSchema: {message}");
                self.builder(&spec, canonical_output_schema(None))
                    .build()
                    .map_err(|err| err.to_string())
            }
            built => built.map_err(|err| err.to_string()),
        }
    }

    fn builder(self: &Arc<Self>, spec: &McpToolSpec, output: Value) -> ToolDefinitionBuilder {
        let name = mcp_tool_name(self.server(), &spec.raw_name);
        // Without a declared `outputSchema` every value `call_tool` builds is valid.
        let unconstrained = output == canonical_output_schema(None);
        let raw_name: Arc<str> = Arc::from(spec.raw_name.as_str());
        let render_name = raw_name.clone();
        let bridge = Arc::downgrade(self);
        let read_only = spec
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.read_only_hint)
            == Some(true);
        let mut builder = ToolDefinition::builder(name)
            .body_leaves_signal_alone()
            .description(spec.description.clone())
            .parameters(spec.parameters.clone())
            .output_schema(output)
            .coerce_non_object_arguments()
            .render(move |_, value| results::render(&render_name, value))
            .present_call({
                let raw_name = raw_name.clone();
                let annotations = spec.annotations.clone();
                move |args| Some(results::call_card(&raw_name, annotations.as_ref(), args))
            })
            .handler(move |args: Value, exec| {
                let bridge = bridge.clone();
                let raw_name = raw_name.clone();
                async move {
                    let Some(bridge) = bridge.upgrade() else {
                        return Err(connection::not_connected("<removed>"));
                    };
                    let Some(conn) = bridge.current() else {
                        return Err(connection::not_connected(bridge.server()));
                    };
                    let arguments = match args {
                        Value::Object(map) => map,
                        _ => serde_json::Map::new(),
                    };
                    connection::call_tool(
                        &bridge.config,
                        &bridge.link,
                        &conn,
                        &raw_name,
                        arguments,
                        &exec,
                    )
                    .await
                }
            });
        if let Some(annotations) = spec.annotations.clone() {
            builder = builder.annotations(annotations);
        }
        if unconstrained {
            builder = builder.output_checked_by_handler();
        }
        if read_only {
            builder = builder.concurrency_safe();
        }
        builder
    }

    /// Stops watching, closes the transport and unregisters every tool.
    pub(crate) async fn disconnect(&self) {
        self.shutdown.cancel();
        let conn = self.conn.lock().take();
        if let Some(conn) = conn {
            conn.closed.cancel();
            conn.stopped.cancelled().await;
        }
        let mut generation = self.generation.lock().await;
        let had_tools = !generation.handles.is_empty();
        for handle in std::mem::take(&mut generation.handles) {
            handle.unregister();
        }
        generation.names.clear();
        self.names.lock().clear();
        if had_tools {
            let id = self.generation_id.fetch_add(1, Ordering::SeqCst) + 1;
            self.link.registry.publish(|| ToolEvent::ToolsChanged {
                source: self.server().to_owned(),
                generation: id,
                tools: Vec::new(),
            });
        }
    }
}
