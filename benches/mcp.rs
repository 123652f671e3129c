//! Per-call cost of an MCP tool through the registry against calling it with rmcp directly:
//! server-everything's `echo` over stdio, one call at a time and 100 concurrent calls. Each side
//! talks to its own server-everything process; the interleaved measurement also calls rmcp's
//! peer of the registry's own connection ([`McpHandle::peer`]), the same server process and
//! transport (whose reader parses `tools/call` answers for that peer too), which leaves out the
//! noise of two processes and shows what the registry's own layers add. Figures: BENCHMARKS.md.
//!
//!
//! `serve`: one `tools/call` of a trivial tool through `dsh-tools serve` over stdio (the built-in
//! `file_stats` on a one-line file: arguments validated, the pipeline run, the result rendered)
//! against the same rmcp client calling server-everything's `echo` directly.
//!
//! `serve_http` (run by the filter `serve`): requests per second of 50 concurrent clients calling
//! a trivial tool over streamable HTTP, `Registry::serve_mcp` on `McpTransport::http` with its
//! bearer token against a minimal plain rmcp streamable-HTTP server serving the same tool, rounds
//! alternating; then the resident memory an idle initialized session costs `dsh-tools serve
//! --http`.
//!
//! Needs the pinned server from `.ci/install-tools.sh` (run on first use); without node the
//! bench prints that it skipped.

use std::sync::OnceLock;

use dsh_tools::mcp::{McpHandle, McpServer};
use dsh_tools::prelude::*;
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
    handle: McpHandle,
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
                handle,
                direct,
            })
        })
        .as_ref()
}

fn main() {
    // Like divan's own filters: positional arguments name what to run.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    if filters.is_empty() || filters.iter().any(|f| "interleaved".contains(f.as_str())) {
        interleaved();
    }
    if filters.is_empty() || filters.iter().any(|f| "serve_http".contains(f.as_str())) {
        serve_http::run();
    }
    divan::main();
}

/// Two interleaved comparisons, one call at a time, the two paths alternating call by call
/// (which goes first swaps every round), so that noise drifting over the run falls on both
/// alike and each server process sees the same pattern of calls: the registry against rmcp on
/// its own connection (the baseline: its own server process and rmcp's own child-process
/// transport), then the registry against rmcp's peer of the registry's own connection (the same
/// server process and transport: what the registry and the bridge add per call, without the
/// difference of two processes). Then batches of 100 concurrent calls on the own-connection
/// paths, alternating batch by batch, and the host process's CPU time per call on the registry
/// and the own-connection paths, in alternating phases.
fn interleaved() {
    const ROUNDS: usize = 5_000;
    const BATCHES: usize = 500;
    const PHASE: usize = 1_000;
    let Some(setup) = setup() else { return };
    let peer = setup.handle.peer().expect("connected");
    let block_on =
        |registry: bool, same_connection: bool, i: usize| match (registry, same_connection) {
            (true, _) => setup.runtime.block_on(registry_echo(setup, i)),
            (false, true) => setup.runtime.block_on(peer_echo(&peer, i)),
            (false, false) => setup.runtime.block_on(rmcp_echo(setup, i)),
        };
    let median = |samples: &mut Vec<std::time::Duration>| {
        samples.sort();
        samples[samples.len() / 2].as_secs_f64() * 1e6
    };
    let compare = |same_connection: bool| {
        for i in 0..200 {
            block_on(i % 2 == 0, same_connection, i);
        }
        let mut latency = [Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS)];
        for round in 0..ROUNDS {
            for registry in [round % 2 == 0, round % 2 == 1] {
                let start = std::time::Instant::now();
                block_on(registry, same_connection, round);
                latency[usize::from(registry)].push(start.elapsed());
            }
        }
        latency.each_mut().map(median)
    };
    let [direct, registry] = compare(false);
    let [same, registry_same] = compare(true);
    // Batches of 100 concurrent calls, the two paths (own connections) alternating batch by
    // batch in the same way.
    let batch = |registry: bool, round: usize| {
        let first = round * CONCURRENT;
        if registry {
            setup.runtime.block_on(join_all(
                (first..first + CONCURRENT).map(|i| registry_echo(setup, i)),
            ));
        } else {
            setup.runtime.block_on(join_all(
                (first..first + CONCURRENT).map(|i| rmcp_echo(setup, i)),
            ));
        }
    };
    let mut batches = [Vec::with_capacity(BATCHES), Vec::with_capacity(BATCHES)];
    for round in 0..BATCHES {
        for registry in [round % 2 == 0, round % 2 == 1] {
            let start = std::time::Instant::now();
            batch(registry, round);
            batches[usize::from(registry)].push(start.elapsed());
        }
    }
    let [direct_batch, registry_batch] = batches.each_mut().map(median);
    let cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
        t.tv_sec as f64 * 1e6 + t.tv_nsec as f64 / 1e3
    };
    let mut cpu_us = [0.0f64; 2];
    for phase in 0..6 {
        let registry = phase % 2 == 0;
        let start = cpu();
        for i in 0..PHASE {
            block_on(registry, false, i);
        }
        cpu_us[usize::from(registry)] += cpu() - start;
    }
    let per_call = |total: f64| total / (3 * PHASE) as f64;
    println!(
        "interleaved sequential echo, {ROUNDS} rounds each: registry {registry:.1} µs vs rmcp on \
         its own connection {direct:.1} µs, ratio {:.3}; registry {registry_same:.1} µs vs rmcp \
         on the registry's connection {same:.1} µs, ratio {:.3}; {CONCURRENT} concurrent, \
         {BATCHES} batches each: registry {:.2} ms vs rmcp on its own connection {:.2} ms, ratio \
         {:.3}; host CPU per call registry {:.1} µs, rmcp direct {:.1} µs, ratio {:.3}",
        registry / direct,
        registry_same / same,
        registry_batch / 1e3,
        direct_batch / 1e3,
        registry_batch / direct_batch,
        per_call(cpu_us[1]),
        per_call(cpu_us[0]),
        cpu_us[1] / cpu_us[0],
    );
}

async fn rmcp_echo(setup: &Setup, i: usize) {
    let arguments = json!({"message": format!("hello {i}")});
    let params = CallToolRequestParams::new("echo")
        .with_arguments(arguments.as_object().cloned().unwrap_or_default());
    let result = setup.direct.peer().call_tool(params).await.expect("echo");
    assert!(result.is_error != Some(true));
}

async fn peer_echo(peer: &rmcp::Peer<RoleClient>, i: usize) {
    let arguments = json!({"message": format!("hello {i}")});
    let params = CallToolRequestParams::new("echo")
        .with_arguments(arguments.as_object().cloned().unwrap_or_default());
    let result = peer.call_tool(params).await.expect("echo");
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

/// `dsh-tools serve` as an MCP server, against server-everything, both as child processes.
mod serve {
    use std::process::Command as StdCommand;

    use rmcp::model::CallToolRequestParams;
    use rmcp::service::RunningService;
    use rmcp::transport::TokioChildProcess;
    use rmcp::{RoleClient, ServiceExt};
    use serde_json::{Map, Value, json};

    const ROOT: &str = env!("CARGO_MANIFEST_DIR");
    const BIN: &str = env!("CARGO_BIN_EXE_dsh-tools");

    type Client = RunningService<RoleClient, ()>;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    }

    fn connect(rt: &tokio::runtime::Runtime, program: &str, args: &[&str]) -> Client {
        let mut command = tokio::process::Command::new(program);
        command.args(args).stderr(std::process::Stdio::null());
        rt.block_on(async {
            let transport = TokioChildProcess::new(command).expect("server starts");
            ().serve(transport).await.expect("initialize")
        })
    }

    fn call(rt: &tokio::runtime::Runtime, client: &Client, name: &'static str, arguments: &Value) {
        let Value::Object(arguments) = arguments.clone() else {
            unreachable!("object arguments")
        };
        let params = CallToolRequestParams::new(name).with_arguments(arguments);
        let result = rt
            .block_on(client.peer().call_tool(params))
            .expect("tools/call");
        assert_ne!(result.is_error, Some(true), "{result:?}");
    }

    #[divan::bench(sample_count = 200)]
    fn dsh_tools_serve_file_stats(bencher: divan::Bencher) {
        let root = tempfile::tempdir().expect("temp dir");
        std::fs::write(root.path().join("a.txt"), "one line\n").expect("file");
        let rt = runtime();
        let root_arg = root.path().display().to_string();
        let client = connect(
            &rt,
            BIN,
            &["--builtin", "repo", "--root", &root_arg, "serve"],
        );
        let arguments = json!({"path": "a.txt"});
        bencher.bench_local(|| call(&rt, &client, "file_stats", &arguments));
        rt.block_on(client.cancel()).expect("closed");
    }

    #[divan::bench(sample_count = 200)]
    fn server_everything_echo(bencher: divan::Bencher) {
        let status = StdCommand::new(format!("{ROOT}/.ci/install-tools.sh"))
            .stdout(std::process::Stdio::null())
            .status()
            .expect("install script");
        assert!(
            status.success(),
            "the pinned MCP servers could not be installed"
        );
        let rt = runtime();
        let everything = format!("{ROOT}/.tools/node/node_modules/.bin/mcp-server-everything");
        let client = connect(&rt, &everything, &["stdio"]);
        let mut arguments = Map::new();
        arguments.insert("message".to_owned(), Value::from("hello"));
        let arguments = Value::Object(arguments);
        bencher.bench_local(|| call(&rt, &client, "echo", &arguments));
        rt.block_on(client.cancel()).expect("closed");
    }
}

// Beside this file rather than in `benches/`, where Cargo would take it for a bench of its own.
#[path = "mcp/serve_http.rs"]
mod serve_http;
