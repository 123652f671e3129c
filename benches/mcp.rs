//! Per-call cost of an MCP tool through the registry against calling it with rmcp directly:
//! server-everything's `echo` over stdio, one call at a time and 100 concurrent calls. Each side
//! talks to its own server-everything process. Figures: BENCHMARKS.md.
//!
//! Needs the pinned server from `.ci/install-tools.sh` (run on first use); without node the
//! bench prints that it skipped.

use std::sync::OnceLock;

use dsh_tools::mcp::{McpHandle, McpServer};
use dsh_tools::{Registry, ToolCall};
use futures::future::join_all;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

const CONCURRENT: usize = 100;

struct Setup {
    runtime: tokio::runtime::Runtime,
    registry: Registry,
    _handle: McpHandle,
    direct: RunningService<RoleClient, ()>,
}

fn server_bin() -> Option<String> {
    let root = env!("CARGO_MANIFEST_DIR");
    let installed = std::process::Command::new(format!("{root}/.ci/install-tools.sh"))
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    installed.then(|| format!("{root}/.tools/node/node_modules/.bin/mcp-server-everything"))
}

fn setup() -> Option<&'static Setup> {
    static SETUP: OnceLock<Option<Setup>> = OnceLock::new();
    SETUP
        .get_or_init(|| {
            let Some(bin) = server_bin() else {
                eprintln!("SKIPPED: benches/mcp.rs needs server-everything (.ci/install-tools.sh)");
                return None;
            };
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            let (registry, handle, direct) = runtime.block_on(async {
                let registry = Registry::new();
                let handle = registry
                    .add_mcp_server(McpServer::stdio("everything", bin.as_str(), ["stdio"]))
                    .await
                    .expect("server-everything through the registry");
                let mut command = tokio::process::Command::new(&bin);
                command.arg("stdio").stderr(std::process::Stdio::null());
                let direct =
                    ().serve(TokioChildProcess::new(command).expect("spawn"))
                        .await
                        .expect("server-everything through rmcp");
                (registry, handle, direct)
            });
            Some(Setup {
                runtime,
                registry,
                _handle: handle,
                direct,
            })
        })
        .as_ref()
}

fn main() {
    divan::main();
}

async fn rmcp_echo(setup: &Setup, i: usize) {
    let arguments = json!({"message": format!("hello {i}")});
    let params = CallToolRequestParams::new("echo")
        .with_arguments(arguments.as_object().cloned().unwrap_or_default());
    let result = setup.direct.peer().call_tool(params).await.expect("echo");
    assert!(result.is_error != Some(true));
}

async fn registry_echo(setup: &Setup, i: usize) {
    let call = ToolCall::new(
        format!("c{i}"),
        "mcp__everything__echo",
        json!({"message": format!("hello {i}")}),
    );
    let result = setup.registry.execute(call).await;
    assert!(!result.is_error(), "{result:?}");
}

#[divan::bench]
fn rmcp_direct_sequential(bencher: divan::Bencher) {
    let Some(setup) = setup() else { return };
    bencher.bench_local(|| setup.runtime.block_on(rmcp_echo(setup, 0)));
}

#[divan::bench]
fn registry_sequential(bencher: divan::Bencher) {
    let Some(setup) = setup() else { return };
    bencher.bench_local(|| setup.runtime.block_on(registry_echo(setup, 0)));
}

#[divan::bench]
fn rmcp_direct_concurrent_100(bencher: divan::Bencher) {
    let Some(setup) = setup() else { return };
    bencher.bench_local(|| {
        setup
            .runtime
            .block_on(join_all((0..CONCURRENT).map(|i| rmcp_echo(setup, i))))
    });
}

#[divan::bench]
fn registry_concurrent_100(bencher: divan::Bencher) {
    let Some(setup) = setup() else { return };
    bencher.bench_local(|| {
        setup
            .runtime
            .block_on(join_all((0..CONCURRENT).map(|i| registry_echo(setup, i))))
    });
}
