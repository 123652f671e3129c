//! The real MCP servers the MCP tests start, installed at pinned versions by
//! `.ci/install-tools.sh`, and helpers to wait for registry events.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use dsh_tools::events::ToolEvent;
use dsh_tools::mcp::{McpServer, ReconnectPolicy};
use tokio::sync::broadcast;

/// Where the pinned servers live.
pub(crate) struct Tools {
    pub node_bin: PathBuf,
    pub venv: PathBuf,
    /// The MCP conformance suite's install root (`node_modules` with its Node 22).
    pub conformance: PathBuf,
    /// The pinned OAuth authorization server's `node_modules`.
    pub oauth_modules: PathBuf,
}

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Installs the pinned tools once per test binary; `None` (with a printed reason) when this
/// machine cannot (no node/npm/python3), and a panic under CI (`CI` set), where it must.
pub(crate) fn tools() -> Option<&'static Tools> {
    static TOOLS: OnceLock<Option<Tools>> = OnceLock::new();
    TOOLS
        .get_or_init(|| {
            let status = std::process::Command::new(format!("{ROOT}/.ci/install-tools.sh"))
                .stdout(std::process::Stdio::null())
                .status();
            match status {
                Ok(status) if status.success() => Some(Tools {
                    node_bin: PathBuf::from(format!("{ROOT}/.tools/node/node_modules/.bin")),
                    venv: PathBuf::from(format!("{ROOT}/.tools/venv")),
                    conformance: PathBuf::from(format!("{ROOT}/.tools/conformance/node_modules")),
                    oauth_modules: PathBuf::from(format!("{ROOT}/.tools/oauth/node_modules")),
                }),
                // Under CI the install is part of the suite: a failure fails, never skips.
                other if std::env::var_os("CI").is_some() => panic!(
                    ".ci/install-tools.sh could not install the MCP servers ({other:?}) under CI"
                ),
                other => {
                    eprintln!(
                        "SKIPPED: .ci/install-tools.sh could not install the MCP servers ({other:?}); \
                         needs node + npm and python3 with venv"
                    );
                    None
                }
            }
        })
        .as_ref()
}

/// Returns early (printing that it skipped) when the pinned servers are not available.
#[macro_export]
macro_rules! require_tools {
    () => {
        match mcp_support::tools() {
            Some(tools) => tools,
            None => {
                eprintln!("SKIPPED: {}: MCP servers unavailable", module_path!());
                return;
            }
        }
    };
}

/// Fast reconnects for tests (the failure bounds stay generous).
pub(crate) fn quick_reconnect() -> ReconnectPolicy {
    ReconnectPolicy::default()
        .initial_delay_ms(50)
        .max_delay_ms(500)
        .max_attempts(40)
}

impl Tools {
    pub(crate) fn bin(&self, name: &str) -> String {
        self.node_bin.join(name).display().to_string()
    }

    pub(crate) fn python(&self) -> String {
        self.venv.join("bin/python").display().to_string()
    }

    /// server-everything over stdio.
    pub(crate) fn everything(&self, name: &str) -> McpServer {
        McpServer::stdio(name, self.bin("mcp-server-everything"), ["stdio"])
            .reconnect(quick_reconnect())
    }

    /// server-filesystem over stdio, serving `dir`.
    pub(crate) fn filesystem(&self, name: &str, dir: &str) -> McpServer {
        McpServer::stdio(name, self.bin("mcp-server-filesystem"), [dir])
            .reconnect(quick_reconnect())
    }

    /// mcp-server-time over stdio, answering in UTC.
    pub(crate) fn time(&self, name: &str) -> McpServer {
        McpServer::stdio(
            name,
            self.venv.join("bin/mcp-server-time").display().to_string(),
            ["--local-timezone", "UTC"],
        )
        .reconnect(quick_reconnect())
    }

    /// Our own test server on `mcp==2.3.0` (tests/mcp_servers/dsh_test_server.py).
    pub(crate) fn ours(&self, name: &str, args: &[&str]) -> McpServer {
        let mut all = vec![format!("{ROOT}/tests/mcp_servers/dsh_test_server.py")];
        all.extend(args.iter().map(|arg| (*arg).to_owned()));
        McpServer::stdio(name, self.python(), all).reconnect(quick_reconnect())
    }

    /// A raw JSON-RPC server for lists the SDK would refuse to send
    /// (tests/mcp_servers/raw_list_server.py).
    pub(crate) fn raw_lists(&self, name: &str, mode: &str) -> McpServer {
        McpServer::stdio(
            name,
            self.python(),
            [
                format!("{ROOT}/tests/mcp_servers/raw_list_server.py"),
                mode.to_owned(),
            ],
        )
        .reconnect(ReconnectPolicy::disabled())
    }
}

/// A free TCP port on the loopback interface.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

/// The failure bound for waits: generous, because the machine is shared.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// Waits for the first event `pick` accepts; panics after [`WAIT`].
pub(crate) async fn wait_for<T>(
    events: &mut broadcast::Receiver<ToolEvent>,
    mut pick: impl FnMut(&ToolEvent) -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Ok(event)) => {
                if let Some(found) = pick(&event) {
                    return found;
                }
            }
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Err(err)) => panic!("event stream ended: {err}"),
            Err(_) => panic!("no matching event within {WAIT:?}"),
        }
    }
}

/// Waits for `ToolsChanged` of `server` with a generation above `after`; returns its tools.
pub(crate) async fn wait_for_generation(
    events: &mut broadcast::Receiver<ToolEvent>,
    server: &str,
    after: u64,
) -> (u64, Vec<String>) {
    wait_for(events, |event| match event {
        ToolEvent::ToolsChanged {
            source,
            generation,
            tools,
        } if source == server && *generation > after => Some((*generation, tools.clone())),
        _ => None,
    })
    .await
}

/// Kills a process with SIGKILL.
pub(crate) fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -9 {pid} failed");
}
