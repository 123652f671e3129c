//! Durable `run_code` runs on Restate, against the real `restate-server` (pinned in
//! `.ci/tools/restate`, installed by `.ci/install-tools.sh`): the deployment process
//! (`examples/restate_append.rs`) is SIGKILLed in the middle of a program making 100 binding
//! calls to a tool that appends to a file; a new deployment process on the same address serves
//! Restate's retry of the invocation, which answers the calls already made from Restate's
//! journal and finishes the run.
//!
//! Approvals are awakeables: a program whose call asks for approval (`--ask FILE:LINE`) waits,
//! its approval recorded in the object `DurableApprovals` under the run's key, until
//! `dsh-tools runs --restate INGRESS approve|deny CONTINUATION` answers it with a continuation
//! signed with the deployment's secret (one signed otherwise is refused); it survives its
//! deployment being SIGKILLed while it waits.
//!
//! Every wait is on an event (a port accepting, the server healthy, a line in the file, the
//! ingress answering), bounded only as a failure bound. SKIPPED when the server cannot be
//! installed (a failure under CI).

mod mcp_support;
#[cfg(feature = "otel")]
mod otlp_support;
mod restate_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

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

/// [`serve`] with the deployment's spans exported over OTLP to `endpoint`, each batch sent
/// within 50 ms.
#[cfg(feature = "otel")]
async fn serve_traced(port: u16, dir: &Path, flags: &[&str], endpoint: &str) -> Process {
    let mut command = Command::new(deployment());
    command
        .arg(format!("127.0.0.1:{port}"))
        .arg(dir)
        .args(flags)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_BSP_SCHEDULE_DELAY", "50")
        .env("OTEL_METRICS_EXPORTER", "none")
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

/// The program the approval tests run: five appends to `file`, the third one `gate`; a denied
/// gate is caught and the program goes on, returning what the program read.
fn gated(file: &str, run_id: &str) -> Value {
    json!({
        "run_id": run_id,
        "description": "Append five lines, one of them gated",
        "code": format!(
            "const counts = [];\nlet denied = null;\nfor (const line of [\"a\", \"b\", \"gate\", \"c\", \"d\"]) {{\n  try {{\n    counts.push(await tools.append_line({{ file: \"{file}\", line }}));\n  }} catch (e) {{\n    denied = {{ code: e.code, message: e.message }};\n  }}\n}}\nreturn {{ counts, denied }};\n"
        ),
    })
}

/// `POST /DurableApprovals/{key}/pending`: the approval the run `key` waits for, or null.
async fn pending(http: &reqwest::Client, ingress: &str, key: &str) -> Value {
    let response = http
        .post(format!("{ingress}/DurableApprovals/{key}/pending"))
        .send()
        .await
        .expect("the ingress answers");
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.expect("JSON")
}

/// Waits until the run `key` waits for an approval, and returns it.
async fn wait_for_pending(http: &reqwest::Client, ingress: &str, key: &str) -> Value {
    let found = std::sync::Arc::new(std::sync::Mutex::new(Value::Null));
    wait_until(&format!("an approval pending for {key}"), || {
        let (found, http) = (found.clone(), http.clone());
        let (ingress, key) = (ingress.to_owned(), key.to_owned());
        async move {
            let answer = pending(&http, &ingress, &key).await;
            let waiting = !answer.is_null();
            *found.lock().unwrap() = answer;
            waiting
        }
    })
    .await;
    found.lock().unwrap().clone()
}

/// `dsh-tools [--json] runs --restate INGRESS ARGS...`: exit code, stdout, stderr.
async fn cli(ingress: &str, args: &[&str]) -> (i32, String, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_dsh-tools"))
        .args(["runs", "--restate", ingress])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("dsh-tools runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `runs --restate INGRESS --restate-secret-file DIR/restate.secret show KEY`: the
/// continuation it prints for the waiting call.
async fn continuation(ingress: &str, dir: &Path, key: &str) -> String {
    let secret = dir.join("restate.secret");
    let (code, stdout, stderr) = cli(
        ingress,
        &[
            "--restate-secret-file",
            secret.to_str().unwrap(),
            "show",
            key,
        ],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    stdout
        .lines()
        .find_map(|line| line.strip_prefix("continuation: "))
        .unwrap_or_else(|| panic!("no continuation in {stdout}"))
        .to_owned()
}

fn gated_lines(lines: &[&str]) -> Vec<String> {
    lines.iter().map(|line| (*line).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_waits_on_an_awakeable_until_approved_through_the_ingress() {
    let Some((
        Deployed {
            http, server, dir, ..
        },
        _deployment,
    )) = deployed(&["--ask", "out.txt:gate"]).await
    else {
        return;
    };
    // The same program where nothing asks: an uninterrupted run's result.
    let reference = invoke(
        http.clone(),
        server.ingress.clone(),
        "reference",
        gated("reference.txt", "reference"),
    )
    .await;
    assert_eq!(reference["result"]["counts"], json!([1, 2, 3, 4, 5]));

    let (code, stdout, stderr) = cli(&server.ingress, &["show", "approved-run"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("has no approval pending"), "{stdout}");
    // A run key is no continuation.
    let (code, _, stderr) = cli(&server.ingress, &["approve", "approved-run"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("is not a continuation"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");

    let out = dir.path().join("out.txt");
    let run = tokio::spawn(invoke(
        http.clone(),
        server.ingress.clone(),
        "approved",
        gated("out.txt", "approved-run"),
    ));
    let waiting = wait_for_pending(&http, &server.ingress, "approved-run").await;
    assert_eq!(waiting["run"], "approved-run");
    assert_eq!(waiting["seq"], 2);
    assert_eq!(waiting["tool"], "tools.append_line");
    assert_eq!(waiting["args"], r#"{"file":"out.txt","line":"gate"}"#);
    assert_eq!(waiting["reason"], "append \"gate\"?");
    // Whoever reaches the ingress learns neither the awakeable nor the invocation.
    assert!(waiting.get("awakeable").is_none(), "{waiting}");
    assert!(waiting.get("invocation").is_none(), "{waiting}");
    let digest = waiting["digest"].as_str().expect("the arguments' digest");
    assert_eq!(lines(&out), gated_lines(&["a", "b"]), "the gate waits");

    // Approvals the deployment did not sign: another secret's, none at all, the raw handler.
    let stranger = dsh_tools::durable::ContinuationSecret::generate().unwrap();
    let forged = stranger.sign_for_owner("approved-run", 2, digest, Duration::from_secs(60));
    let (code, _, stderr) = cli(&server.ingress, &["approve", &forged]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("403") && stderr.contains("CONTINUATION_REFUSED"),
        "{stderr}"
    );
    let bare = http
        .post(format!(
            "{}/DurableApprovals/approved-run/approve",
            server.ingress
        ))
        .send()
        .await
        .expect("the ingress answers");
    assert!(!bare.status().is_success(), "{}", bare.status());
    assert_eq!(
        lines(&out),
        gated_lines(&["a", "b"]),
        "the gate still waits"
    );

    let (code, stdout, stderr) =
        cli(&server.ingress, &["--restate-admin", &server.admin, "list"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout.trim(),
        r#"approved-run parked at call #2 tools.append_line({"file":"out.txt","line":"gate"}): append "gate"?"#
    );
    let (code, stdout, _) = cli(&server.ingress, &["show", "approved-run"]).await;
    assert_eq!(code, 0);
    assert!(
        stdout.contains("approved-run parked at call #2 tools.append_line"),
        "{stdout}"
    );
    let signed = continuation(&server.ingress, dir.path(), "approved-run").await;
    let (code, stdout, stderr) = cli(&server.ingress, &["approve", &signed]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("approved call #2 tools.append_line"),
        "{stdout}"
    );

    let resumed = run.await.expect("the invocation task");
    assert_eq!(
        resumed, reference,
        "the approved run's result is an uninterrupted run's"
    );
    assert_eq!(
        lines(&out),
        gated_lines(&["a", "b", "gate", "c", "d"]),
        "each line once"
    );
    assert!(
        pending(&http, &server.ingress, "approved-run")
            .await
            .is_null()
    );
    // The same approval again is used.
    let (code, _, stderr) = cli(&server.ingress, &["approve", &signed]).await;
    assert_eq!(code, 1);
    assert!(
        stderr.contains("CONTINUATION_REFUSED")
            && stderr.contains("call #2 tools.append_line was approved already"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_fails_with_denied_and_the_reason_and_the_program_goes_on() {
    let Some((
        Deployed {
            http, server, dir, ..
        },
        _deployment,
    )) = deployed(&["--ask", "out.txt:gate"]).await
    else {
        return;
    };
    let out = dir.path().join("out.txt");
    let run = tokio::spawn(invoke(
        http.clone(),
        server.ingress.clone(),
        "denied",
        gated("out.txt", "denied-run"),
    ));
    wait_for_pending(&http, &server.ingress, "denied-run").await;
    let signed = continuation(&server.ingress, dir.path(), "denied-run").await;
    let (code, stdout, stderr) = cli(&server.ingress, &["deny", &signed, "not on a Friday"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("denied (not on a Friday (denied by the run's owner)) call #2"),
        "{stdout}"
    );

    let ended = run.await.expect("the invocation task");
    assert_eq!(
        ended["result"]["denied"],
        json!({"code": "DENIED", "message": "not on a Friday (denied by the run's owner)"})
    );
    assert_eq!(ended["result"]["counts"], json!([1, 2, 3, 4]));
    assert_eq!(
        lines(&out),
        gated_lines(&["a", "b", "c", "d"]),
        "the gate never ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_run_survives_its_deployment_being_killed_and_completes_once_approved() {
    let Some((
        Deployed {
            http,
            server,
            dir,
            port,
        },
        first,
    )) = deployed(&["--ask", "out.txt:gate"]).await
    else {
        return;
    };
    let out = dir.path().join("out.txt");
    let run = tokio::spawn(invoke(
        http.clone(),
        server.ingress.clone(),
        "killed-while-waiting",
        gated("out.txt", "killed-run"),
    ));
    wait_for_pending(&http, &server.ingress, "killed-run").await;
    let signed = continuation(&server.ingress, dir.path(), "killed-run").await;
    drop(first); // SIGKILL, then reaped: no process holds the waiting run now.
    assert!(
        !run.is_finished(),
        "the waiting run outlives its deployment"
    );

    // The approval is taken by Restate and answered once a deployment serves it again.
    let ingress = server.ingress.clone();
    let approve = tokio::spawn(async move { cli(&ingress, &["approve", &signed]).await });
    let _second = serve(port, dir.path(), &["--ask", "out.txt:gate"]).await;
    let (code, stdout, stderr) = approve.await.expect("the approval task");
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("approved call #2"), "{stdout}");

    let resumed = run.await.expect("the invocation task");
    assert_eq!(resumed["result"]["counts"], json!([1, 2, 3, 4, 5]));
    assert_eq!(resumed["result"]["denied"], Value::Null);
    assert_eq!(
        lines(&out),
        gated_lines(&["a", "b", "gate", "c", "d"]),
        "every line exactly once: the calls before the kill were answered from the journal"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_restate_errors_are_one_line() {
    // Nothing listens on this port: the ingress is unreachable.
    let ingress = format!("http://127.0.0.1:{}", mcp_support::free_port());
    let (code, _, stderr) = cli(&ingress, &["show", "some-run"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.starts_with("error: cannot reach Restate at"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let (code, _, stderr) = cli(&ingress, &["list"]).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("needs --restate-admin"), "{stderr}");
    let (code, _, stderr) = cli(&ingress, &["resume", "some-run"]).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("Restate retries a run"), "{stderr}");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_dsh-tools"))
        .args(["runs", "--restate", &ingress, "--journal", "x.db", "list"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(2),
        "--journal and --restate conflict"
    );
}

/// The spans a call's pipeline opens besides its `execute_tool` span.
#[cfg(feature = "otel")]
const STAGE_SPANS: [&str; 4] = ["pre_execute", "approval", "execute", "post_execute"];

/// The `execute_tool` spans in OTLP trace requests: (`gen_ai.tool.call.id`, whether
/// `dsh.replayed` is `true`) of each span of tool `tool`; and the names of the spans that are
/// no tool call's nor one of its [`STAGE_SPANS`].
#[cfg(feature = "otel")]
fn tool_spans(requests: &[hyper::body::Bytes], tool: &str) -> (Vec<(String, bool)>, Vec<String>) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use prost::Message;

    let mut found = Vec::new();
    let mut foreign = Vec::new();
    for body in requests {
        let request = ExportTraceServiceRequest::decode(body.clone()).expect("OTLP traces");
        for span in request
            .resource_spans
            .into_iter()
            .flat_map(|resource| resource.scope_spans)
            .flat_map(|scope| scope.spans)
        {
            let value = |key: &str| {
                span.attributes
                    .iter()
                    .find(|attribute| attribute.key == key)
                    .and_then(|attribute| attribute.value.clone()?.value)
            };
            if span.name != format!("execute_tool {tool}") {
                if !span.name.starts_with("execute_tool ")
                    && !STAGE_SPANS.contains(&span.name.as_str())
                {
                    foreign.push(span.name);
                }
                continue;
            }
            let Some(Any::StringValue(id)) = value("gen_ai.tool.call.id") else {
                panic!("a call id: {span:?}");
            };
            found.push((
                id,
                matches!(value("dsh.replayed"), Some(Any::BoolValue(true))),
            ));
        }
    }
    (found, foreign)
}

/// A retried invocation answers the calls its first attempt made from Restate's journal: each
/// is still a span, marked `dsh.replayed`, and the calls made live are not marked.
#[cfg(feature = "otel")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_calls_a_retried_invocation_replays_are_spans_marked_replayed() {
    let Some((
        Deployed {
            http,
            server,
            dir,
            port,
        },
        first,
    )) = deployed(&["--idempotent", "--pause-in", "out.txt:line-4"]).await
    else {
        return;
    };
    let out = dir.path().join("out.txt");
    let run = tokio::spawn(invoke(
        http.clone(),
        server.ingress.clone(),
        "traced",
        hundred_appends("out.txt"),
    ));
    wait_for_lines(&out, 5).await;
    drop(first);
    let (endpoint, mut received) = otlp_support::receiver().await;
    let _second = serve_traced(port, dir.path(), &["--idempotent"], &endpoint).await;
    run.await.expect("the invocation task");
    assert_eq!(lines(&out), expected_lines(100));

    // The first four calls were journaled before the kill; the fifth (cut off in its body) and
    // the rest ran in the second process.
    let mut requests = Vec::new();
    let spans = loop {
        let (path, body) = tokio::time::timeout(restate_support::BOUND, received.recv())
            .await
            .expect("the deployment exports its spans")
            .expect("the receiver runs");
        if path == "/v1/traces" {
            requests.push(body);
        }
        let (spans, foreign) = tool_spans(&requests, "append_line");
        // Other crates' spans (the HTTP/2 stack opens one per frame) would fill the
        // exporter's bounded queue and crowd the calls' spans out of it.
        assert!(
            foreign.is_empty(),
            "only the project's spans are exported: {} others, such as {:?}",
            foreign.len(),
            &foreign[..foreign.len().min(5)]
        );
        if spans.len() >= 100 {
            break spans;
        }
    };
    let mut replayed: Vec<&str> = spans
        .iter()
        .filter(|(_, replayed)| *replayed)
        .map(|(id, _)| id.rsplit_once(':').map_or(id.as_str(), |(_, seq)| seq))
        .collect();
    replayed.sort_unstable();
    assert_eq!(replayed, ["0", "1", "2", "3"], "{spans:?}");
    assert!(
        spans
            .iter()
            .filter(|(_, replayed)| *replayed)
            .all(|(id, _)| id.contains(":journal:")),
        "{spans:?}"
    );
    assert_eq!(spans.iter().filter(|(_, replayed)| !replayed).count(), 96);
}
