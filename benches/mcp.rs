//! MCP over stdio with a real client (rmcp's): one `tools/call` of a trivial tool through
//! `dsh-tools serve` (the built-in `file_stats` on a one-line file: arguments validated, the
//! pipeline run, the result rendered) against the same client calling server-everything's `echo`
//! directly. Figures: BENCHMARKS.md.

use std::process::Command as StdCommand;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};

fn main() {
    divan::main();
}

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
