//! Building the registry from the command line's tool sources and budgets.

use std::sync::Arc;

use dsh_tools::Registry;
use dsh_tools::code::{CodeRuntime, SubprocessConfig, SubprocessRuntime};
use dsh_tools::guards::TimeoutPolicy;
use dsh_tools::mcp::McpHandle;
use dsh_tools::sdk::Language;

use crate::args::{Budgets, Builtin, RuntimeKind, Sources};
use crate::toolset;
use dsh_tools::prelude::*;

/// The registry of one command and the MCP servers bridged into it.
pub(crate) struct Loaded {
    /// Every tool the sources name, with the timeout policy installed.
    pub registry: Registry,
    servers: Vec<McpHandle>,
}

impl Loaded {
    /// Stops the bridged MCP servers.
    pub(crate) async fn close(self) {
        for server in self.servers {
            server.disconnect().await;
        }
    }
}

/// Loads every tool the sources name. An MCP server that fails to start is skipped with a
/// `warning: MCP server skipped: …` line on stderr; start-up fails only when no tool source is
/// left (no `--builtin` and no MCP server started).
pub(crate) async fn registry(sources: &Sources) -> Result<Loaded, String> {
    if sources.builtin.is_none()
        && sources.mcp.is_empty()
        && sources.mcp_http.is_empty()
        && sources.config.is_none()
    {
        return Err(
            "no tools: pass --builtin repo [--root DIR], --mcp \"COMMAND\", --mcp-http URL or --config FILE"
                .to_owned(),
        );
    }
    let registry = Registry::new();
    TimeoutPolicy::new().install(&registry);
    if let Some(Builtin::Repo) = sources.builtin {
        let root = sources.root.clone().unwrap_or_else(|| ".".into());
        let root = root
            .canonicalize()
            .map_err(|error| format!("--root {}: {error}", root.display()))?;
        if !root.is_dir() {
            return Err(format!("--root {}: not a directory", root.display()));
        }
        registry
            .register_all(toolset::definitions(root))
            .map_err(|error| error.to_string())?;
    }
    let started = crate::mcp_sources::add(&registry, sources).await?;
    // One failed server costs its own tools only; when the failures leave no tool source
    // there is nothing to run, and they are the error.
    if sources.builtin.is_none() && started.handles.is_empty() && !started.failures.is_empty() {
        return Err(started.failures.join("; "));
    }
    for failure in &started.failures {
        eprintln!(
            "warning: MCP server skipped: {}",
            crate::terminal::escaped(failure)
        );
    }
    Ok(Loaded {
        registry,
        servers: started.handles,
    })
}

/// Mounts a code runtime of `kind` for `language` under `budgets`. `standby` keeps a subprocess
/// child ready for the next program (worth it for a server, not for one run).
pub(crate) async fn mount_runtime(
    registry: &Registry,
    language: Language,
    kind: RuntimeKind,
    budgets: Budgets,
    standby: bool,
) -> Result<Arc<dyn CodeRuntime>, String> {
    let runtime = match kind {
        RuntimeKind::Subprocess => subprocess(language, budgets, standby).await?,
        RuntimeKind::Embedded => embedded(language, budgets)?,
    };
    registry.set_code_runtime(runtime.clone());
    Ok(runtime)
}

async fn subprocess(
    language: Language,
    budgets: Budgets,
    standby: bool,
) -> Result<Arc<dyn CodeRuntime>, String> {
    let mut config = SubprocessConfig {
        standby,
        ..SubprocessConfig::default()
    };
    budgets.apply(&mut config.budgets);
    Ok(match language {
        Language::Python => Arc::new(
            SubprocessRuntime::python(config)
                .await
                .map_err(|error| format!("Python runtime: {error}"))?,
        ),
        _ => Arc::new(
            SubprocessRuntime::typescript(config)
                .await
                .map_err(|error| format!("TypeScript runtime: {error}"))?,
        ),
    })
}

#[cfg(feature = "embedded-python")]
fn embedded(language: Language, budgets: Budgets) -> Result<Arc<dyn CodeRuntime>, String> {
    use dsh_tools::code::{EmbeddedConfig, EmbeddedRuntime};
    let mut config = EmbeddedConfig::default();
    budgets.apply(&mut config.budgets);
    // Both languages run in the sandboxed worker pool, so every budget holds for a model's
    // program (an in-process QuickJS cannot stop a long built-in).
    Ok(match language {
        Language::Python => Arc::new(
            EmbeddedRuntime::python(config)
                .map_err(|error| format!("embedded Python runtime: {error}"))?,
        ),
        _ => Arc::new(
            EmbeddedRuntime::javascript(config)
                .map_err(|error| format!("embedded TypeScript runtime: {error}"))?,
        ),
    })
}

#[cfg(not(feature = "embedded-python"))]
fn embedded(_: Language, _: Budgets) -> Result<Arc<dyn CodeRuntime>, String> {
    Err(
        "--runtime embedded: this dsh-tools was built without the embedded-python feature (its \
         worker program serves both languages)"
            .to_owned(),
    )
}
