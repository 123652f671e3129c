//! Durable `run_code` runs on Restate, against the real `restate-server` (pinned in
//! `.ci/tools/restate`, installed by `.ci/install-tools.sh`): the deployment process
//! (`examples/restate_append.rs`) is SIGKILLed in the middle of a program making 100 binding
//! calls to a tool that appends to a file; a new deployment process on the same address serves
//! Restate's retry of the invocation, which answers the calls already made from Restate's
//! journal and finishes the run.
//!
//! Every wait is on an event (a port accepting, the server healthy, a line in the file, the
//! ingress answering), bounded only as a failure bound. SKIPPED when the server cannot be
//! installed (a failure under CI).

mod mcp_support;
mod restate_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use restate_support::{Process, Server, client, server_binary, wait_for_port, wait_until};
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The example deployment, built by Cargo for this test target's features.
fn deployment() -> PathBuf {
    let mut path = std::env::current_exe().expect("the test's path");
    path.pop();
    if path.ends_with("deps") {
        path.pop();
    }
    path.join("examples").join("restate_append")
}

/// Builds the example once, with the features `cargo test --all-features` builds it with
/// (`--test durable_restate` alone does not build examples).
fn build_deployment() {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--example", "restate_append", "--all-features"])
        .current_dir(ROOT)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "the example builds");
    assert!(deployment().exists(), "{} exists", deployment().display());
}

/// Starts the example deployment on `port` over `dir` with `flags`, and waits until it accepts
/// connections.
async fn serve(port: u16, dir: &Path, flags: &[&str]) -> Process {
    let mut command = Command::new(deployment());
    command
        .arg(format!("127.0.0.1:{port}"))
        .arg(dir)
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let process = Process(command.spawn().expect("the deployment starts"));
    wait_for_port("the deployment accepts connections", port).await;
    process
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn expected_lines(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("line-{i}")).collect()
}

fn hundred_appends(file: &str) -> Value {
    json!({
        "description": "Append 100 lines",
        "code": format!(
            "const counts = [];\nfor (let i = 0; i < 100; i++) {{\n  counts.push(await tools.append_line({{ file: \"{file}\", line: `line-${{i}}` }}));\n}}\nreturn counts;\n"
        ),
    })
}

/// Runs `program` through the ingress (`POST /DurableRuns/run`, idempotency key `key`) and
/// returns the status and body of its answer.
async fn invoke_raw(
    http: reqwest::Client,
    ingress: String,
    key: &str,
    program: Value,
) -> (reqwest::StatusCode, String) {
    let response = http
        .post(format!("{ingress}/DurableRuns/run"))
        .header("idempotency-key", key)
        .json(&program)
        .send()
        .await
        .expect("the ingress answers");
    let status = response.status();
    (status, response.text().await.expect("a body"))
}

/// [`invoke_raw`], for a run that succeeds: its output.
async fn invoke(http: reqwest::Client, ingress: String, key: &str, program: Value) -> Value {
    let (status, body) = invoke_raw(http, ingress, key, program).await;
    assert!(status.is_success(), "the run failed ({status}): {body}");
    serde_json::from_str(&body).expect("JSON output")
}

/// Waits until `path` holds at least `n` lines.
async fn wait_for_lines(path: &Path, n: usize) {
    wait_until(&format!("{} lines in {}", n, path.display()), || {
        let count = lines(path).len();
        async move { count >= n }
    })
    .await;
}

/// A Restate server with one deployment process (started with `flags`) registered on it, a
/// scratch folder and the deployment's port; `None` (the test has skipped) without the server.
async fn deployed(flags: &[&str]) -> Option<(Deployed, Process)> {
    let binary = server_binary()?;
    build_deployment();
    let http = client();
    let server = Server::start(&binary, &http).await;
    let dir = tempfile::tempdir().unwrap();
    let port = mcp_support::free_port();
    let first = serve(port, dir.path(), flags).await;
    server
        .register(&http, &format!("http://127.0.0.1:{port}"))
        .await;
    Some((
        Deployed {
            http,
            server,
            dir,
            port,
        },
        first,
    ))
}

struct Deployed {
    http: reqwest::Client,
    server: Server,
    dir: tempfile::TempDir,
    port: u16,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_killed_mid_run_is_retried_by_restate_and_appends_every_line_once() {
    // The first process blocks in the call that appends line-49: killed in the middle of it.
    let Some((
        Deployed {
            http,
            server,
            dir,
            port,
        },
        first,
    )) = deployed(&["--idempotent", "--pause-in", "out.txt:line-49"]).await
    else {
        return;
    };

    let reference = invoke(
        http.clone(),
        server.ingress.clone(),
        "reference",
        hundred_appends("reference.txt"),
    )
    .await;
    assert_eq!(
        lines(&dir.path().join("reference.txt")),
        expected_lines(100)
    );
    let counts: Vec<Value> = (1..=100).map(Value::from).collect();
    assert_eq!(reference["result"], Value::Array(counts));

    let out = dir.path().join("out.txt");
    let run = tokio::spawn(invoke(
        http.clone(),
        server.ingress.clone(),
        "killed",
        hundred_appends("out.txt"),
    ));
    wait_for_lines(&out, 50).await;
    drop(first); // SIGKILL, then reaped
    assert_eq!(
        lines(&out),
        expected_lines(50),
        "killed in the middle of the run"
    );
    let _second = serve(port, dir.path(), &["--idempotent"]).await;

    let resumed = run.await.expect("the invocation task");
    assert_eq!(lines(&out), expected_lines(100), "each line exactly once");
    assert_eq!(
        resumed, reference,
        "the resumed run's result is an uninterrupted run's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_off_reads_outcome_unknown_instead_of_running_twice() {
    let Some((
        Deployed {
            http,
            server,
            dir,
            port,
        },
        first,
    )) = deployed(&["--pause-in", "unknown.txt:line-5"]).await
    else {
        return;
    };

    // Not idempotent: the call running when the deployment died is not run again.
    let tolerating = json!({
        "description": "Append 10 lines",
        "code": "const unknown = [];\nfor (let i = 0; i < 10; i++) {\n  try {\n    await tools.append_line({ file: \"unknown.txt\", line: `line-${i}` });\n  } catch (e) {\n    if (e.code !== \"OUTCOME_UNKNOWN\") throw e;\n    unknown.push(i);\n  }\n}\nreturn unknown;\n",
    });
    let out = dir.path().join("unknown.txt");
    let run = tokio::spawn(invoke(
        http.clone(),
        server.ingress.clone(),
        "unknown",
        tolerating,
    ));
    wait_for_lines(&out, 6).await;
    drop(first);
    let _second = serve(port, dir.path(), &[]).await;
    let resumed = run.await.expect("the invocation task");
    assert_eq!(
        resumed["result"],
        json!([5]),
        "call 5 reads OUTCOME_UNKNOWN"
    );
    assert_eq!(
        lines(&out),
        expected_lines(10),
        "line-5 appended once, before the kill"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_branching_on_randomness_ends_diverged_on_the_retry() {
    // Killed in the middle of the call after the random one.
    let Some((
        Deployed {
            http,
            server,
            dir,
            port,
        },
        first,
    )) = deployed(&["--pause-in", "random.txt:gate"]).await
    else {
        return;
    };
    let random = json!({
        "description": "Branch on randomness",
        "code": "await tools.append_line({ file: \"random.txt\", line: \"first\" });\nconst r = Math.random();\nawait tools.append_line({ file: \"random.txt\", line: r < 0.5 ? `heads-${r}` : `tails-${r}` });\nawait tools.append_line({ file: \"random.txt\", line: \"gate\" });\nawait tools.append_line({ file: \"random.txt\", line: \"last\" });\nreturn \"done\";\n",
    });
    let out = dir.path().join("random.txt");
    let run = tokio::spawn(invoke_raw(
        http.clone(),
        server.ingress.clone(),
        "random",
        random,
    ));
    wait_for_lines(&out, 3).await;
    drop(first);
    let journaled = lines(&out)[1].clone();
    let _second = serve(port, dir.path(), &[]).await;
    // The retry makes another second call: the invocation ends with the terminal error naming
    // both calls instead of being retried for ever.
    let (status, body) = run.await.expect("the invocation task");
    assert!(!status.is_success(), "{status}: {body}");
    assert!(body.contains("replay-diverged"), "{body}");
    assert!(body.contains("call #1 diverged"), "{body}");
    assert!(
        body.contains(&journaled),
        "names the journaled call: {body}"
    );
    // Nothing after the divergence ran: neither the gate again nor the last line.
    let after = lines(&out);
    assert_eq!(after.len(), 3, "{after:?}");
    assert_eq!(after[0], "first");
    assert_eq!(after[2], "gate");
}
