//! `dsh-tools serve` driven by real MCP clients written elsewhere, installed at pinned versions by
//! `.ci/install-tools.sh`: the official Python SDK client (`mcp`), the official TypeScript SDK
//! client (`@modelcontextprotocol/sdk`) over streamable HTTP, and pydantic-ai as an agent host
//! with a deterministic model. The client scripts live in `tests/mcp_clients/` and exit non-zero
//! with the check that failed. `list_changed` is checked in-process with this crate's rmcp-based
//! MCP client against `Registry::serve_mcp` over HTTP.

// The test calls libc directly (`fcntl` of a pipe's flags), with a SAFETY note at each block.
#![allow(unsafe_code)]

use crate::http_server::printed_token;
use crate::mcp_support;
use crate::toolset;

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use dsh_tools::events::ToolEvent;
use dsh_tools::mcp::McpServer;
use dsh_tools::mcp::McpTransport;
use dsh_tools::prelude::*;
use dsh_tools::{Registry, ToolCall, ToolDefinition};
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BIN: &str = env!("CARGO_BIN_EXE_dsh-tools");

/// Runs a client script to completion; its failure output is the test's failure message.
fn run_client(program: &str, args: &[&str]) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("cannot start {program}: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{program} {args:?} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    eprintln!("{stdout}");
}

fn script(name: &str) -> String {
    format!("{ROOT}/tests/mcp_clients/{name}")
}

#[test]
fn python_client_lists_pages_and_calls_native_tools() {
    let tools = require_tools!();
    run_client(
        &tools.python(),
        &[&script("python_client.py"), "native", BIN, ROOT],
    );
}

#[test]
fn python_client_runs_code_gets_progress_and_cancels_a_slow_call() {
    let tools = require_tools!();
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let events_path = events.display().to_string();
    run_client(
        &tools.python(),
        &[&script("python_client.py"), "code", BIN, ROOT, &events_path],
    );
    // The log is complete once the server exits (the client closed stdin). The cancelled call
    // settled as aborted: the pipeline saw the client's notifications/cancelled.
    let results: Vec<Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["event"] == "result" && event["parent"].is_null())
        .collect();
    // Ordered by call id: the cancelled call may settle after the next call has answered.
    let mut by_call: Vec<(&str, &str)> = results
        .iter()
        .map(|event| {
            let code = event["result"]["error"]["info"]["code"].as_str();
            (event["call_id"].as_str().unwrap(), code.unwrap_or("ok"))
        })
        .collect();
    by_call.sort();
    let codes: Vec<&str> = by_call.into_iter().map(|(_, code)| code).collect();
    assert_eq!(
        codes,
        ["ok", "CODE_RUN_FAILED", "ABORTED", "ok"],
        "{results:#?}"
    );
}

#[test]
fn python_client_uses_a_real_mcp_server_through_the_code_mode_proxy() {
    let tools = require_tools!();
    let everything = format!("{} stdio", tools.bin("mcp-server-everything"));
    run_client(
        &tools.python(),
        &[&script("python_client.py"), "proxy", BIN, &everything],
    );
}

#[test]
fn python_client_sees_declared_and_upstream_annotations_as_declared() {
    let tools = require_tools!();
    run_client(
        &tools.python(),
        &[
            &script("python_client.py"),
            "annotations",
            BIN,
            ROOT,
            &tools.bin("mcp-server-filesystem"),
        ],
    );
}

/// A `dsh-tools serve --http` child, stopped (SIGTERM, then kill) on drop.
struct HttpServer {
    child: Child,
    url: String,
    /// The bearer token it generated and printed.
    token: String,
}

impl HttpServer {
    fn start(sources: &[&str], serve: &[&str]) -> HttpServer {
        let mut child = Command::new(BIN)
            .args(sources)
            .args(["serve", "--http", "0"])
            .args(serve)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("dsh-tools: serving MCP on ")
            .and_then(|rest| rest.split_once(' '))
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .0
            .to_owned();
        let mut notice = String::new();
        stderr.read_line(&mut notice).unwrap();
        let token =
            printed_token(&notice).unwrap_or_else(|| panic!("no generated token in {notice:?}"));
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        HttpServer { child, url, token }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

#[test]
fn typescript_client_over_streamable_http_sees_both_modes() {
    let tools = require_tools!();
    let server = HttpServer::start(&["--builtin", "repo", "--root", ROOT], &["--mode", "both"]);
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "loopback by default: {}",
        server.url
    );
    let node_modules = tools.node_bin.parent().unwrap().display().to_string();
    run_client(
        "node",
        &[
            &script("ts_client.mjs"),
            &node_modules,
            &server.url,
            &server.token,
        ],
    );
}

#[test]
fn pydantic_ai_host_sees_and_calls_run_code() {
    let tools = require_tools!();
    run_client(
        &tools.python(),
        &[&script("pydantic_ai_host.py"), BIN, ROOT],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_changes_reach_clients_as_list_changed() {
    let served = Registry::new();
    served.register_all(toolset::definitions(ROOT)).unwrap();
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let addr = transport.local_addr().unwrap();
    assert!(addr.ip().is_loopback(), "loopback by default: {addr}");
    let served_with = authorized(&transport);
    let server = tokio::spawn({
        let served = served.clone();
        async move { served.serve_mcp(None, transport).await }
    });

    let client = Registry::new();
    let mut events = client.subscribe();
    let handle = client
        .add_mcp_server(served_with(McpServer::http(
            "served",
            format!("http://{addr}/mcp"),
        )))
        .await
        .unwrap();
    assert_eq!(handle.tools().len(), 4);

    let extra = ToolDefinition::builder("shout")
        .description("Upper-case a text.")
        .parameters(json!({"type": "object", "properties": {"text": {"type": "string"}}}))
        .handler(|args: Value, _exec| async move {
            Ok(json!(
                args["text"].as_str().unwrap_or_default().to_uppercase()
            ))
        })
        .build()
        .unwrap();
    let registration = served.register(extra).unwrap();
    let shout = "mcp__served__shout".to_owned();
    let (added, names) = tools_changed(&mut events, |names| names.contains(&shout)).await;
    assert_eq!(names.len(), 5, "{names:?}");

    registration.unregister();
    let (removed, names) = tools_changed(&mut events, |names| !names.contains(&shout)).await;
    assert!(removed > added, "a later generation");
    assert_eq!(names.len(), 4, "{names:?}");

    handle.disconnect().await;
    server.abort();
}

/// Hints are served as declared: a concurrency-safe tool that writes is not read-only, a tool
/// that declares `read_only` says so, and a tool that declares nothing has no hint at all. The
/// parameters schema travels as it is: the client refuses a misspelt key of a closed one by name
/// before the call leaves it, and passes an extra key of an open one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_tools_keep_their_hints_and_closed_arguments() {
    /// Reads a counter.
    #[dsh_tools::tool(read_only, idempotent, open_world = false, title = "Peek")]
    async fn peek() -> u32 {
        7
    }
    /// Assign a ticket.
    #[dsh_tools::tool]
    async fn assign(assignee: String) -> String {
        assignee
    }
    let served = Registry::new();
    let appends = ToolDefinition::builder("append_line")
        .description("Append a line to a log.")
        .parameters(json!({"type": "object", "properties": {}}))
        .concurrency_safe()
        .handler(|_args: Value, _exec| async move { Ok(json!("appended")) })
        .build()
        .unwrap();
    served.register(appends).unwrap();
    served.register(PeekTool).unwrap();
    served.register(AssignTool).unwrap();
    let transport = McpTransport::http(McpTransport::DEFAULT_HTTP_ADDR)
        .await
        .unwrap();
    let addr = transport.local_addr().unwrap();
    let served_with = authorized(&transport);
    let server = tokio::spawn({
        let served = served.clone();
        async move { served.serve_mcp(None, transport).await }
    });
    let client = Registry::new();
    let handle = client
        .add_mcp_server(served_with(McpServer::http(
            "served",
            format!("http://{addr}/mcp"),
        )))
        .await
        .unwrap();
    let hints = |name: &str| {
        let definition = client.get(name, None).unwrap();
        let annotations = definition.annotations().cloned().unwrap_or_default();
        (
            annotations.title,
            annotations.read_only_hint,
            annotations.destructive_hint,
            annotations.idempotent_hint,
            annotations.open_world_hint,
        )
    };
    assert_eq!(
        hints("mcp__served__append_line"),
        (None, None, None, None, None)
    );
    assert_eq!(
        hints("mcp__served__peek"),
        (
            Some("Peek".to_owned()),
            Some(true),
            None,
            Some(true),
            Some(false)
        )
    );
    // The client validates against the served schema as it is: the closed one refuses a
    // misspelt key by name, the open one lets an extra key through.
    let refused = client
        .execute(ToolCall::new(
            "1",
            "mcp__served__assign",
            json!({"asignee": "ada"}),
        ))
        .await;
    let failure = refused.error().expect("the misspelt key is refused");
    assert_eq!(
        failure.info.as_ref().map(|info| info.code.as_str()),
        Some("INVALID_ARGS"),
        "{}",
        failure.message
    );
    assert!(
        failure
            .message
            .contains("unknown property \"asignee\"; did you mean \"assignee\"?"),
        "{}",
        failure.message
    );
    let passed = client
        .execute(ToolCall::new(
            "2",
            "mcp__served__append_line",
            json!({"line": "x"}),
        ))
        .await;
    assert!(!passed.is_error(), "{passed:?}");
    handle.disconnect().await;
    server.abort();
}

/// What makes an [`McpServer`] send the bearer token `transport` was bound with.
fn authorized(transport: &McpTransport) -> impl Fn(McpServer) -> McpServer + use<> {
    let token = transport
        .bearer_token()
        .expect("a generated token")
        .to_owned();
    move |server| server.header("authorization", format!("Bearer {token}"))
}

/// The first re-sync the client bridge publishes whose tool list passes `wanted`, with its
/// generation; the timeout only bounds a failure.
async fn tools_changed(
    events: &mut tokio::sync::broadcast::Receiver<ToolEvent>,
    wanted: impl Fn(&Vec<String>) -> bool,
) -> (u64, Vec<String>) {
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if let Ok(ToolEvent::ToolsChanged {
                tools, generation, ..
            }) = events.recv().await
                && generation > 1
                && wanted(&tools)
            {
                return (generation, tools);
            }
        }
    })
    .await
    .expect("no tools/list_changed reached the client")
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
const PING: &str = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;

/// Waits until `path` holds `lines` lines, failing if the server exits first; the timeout only
/// bounds a failure.
fn wait_for_lines(path: &std::path::Path, lines: usize, child: &mut Child) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= lines {
            return;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "serve exited after {} line(s): {text}",
            text.lines().count()
        );
        assert!(
            std::time::Instant::now() < deadline,
            "no line {lines}: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes `text` and a newline to a child's stdin.
fn send_line(stdin: &mut impl std::io::Write, text: &str) {
    stdin.write_all(format!("{text}\n").as_bytes()).unwrap();
}

/// Sends `signal` (a `kill` option such as `-TERM`) to `child`.
fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// `serve` over the built-in toolset of `root` with stdin a pipe and stdout the file `out`
/// (which cannot be polled); returns it once it answered `initialize`.
fn serve_into_file(
    root: &std::path::Path,
    out: &std::path::Path,
    serve_args: &[&str],
) -> (Child, ChildStdin) {
    let mut child = Command::new(BIN)
        .args(["--builtin", "repo", "--root"])
        .arg(root)
        .arg("serve")
        .args(serve_args)
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    send_line(&mut stdin, INITIALIZE);
    wait_for_lines(out, 1, &mut child);
    (child, stdin)
}

/// `serve` over stdio with stdin a pipe and stdout a regular file (which cannot be polled)
/// answers each request however long its input pauses between them, then exits at end of input.
#[test]
fn serve_over_stdio_answers_into_a_file_across_pauses() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let (mut child, mut stdin) = serve_into_file(dir.path(), &out, &[]);
    send_line(&mut stdin, PING);
    wait_for_lines(&out, 2, &mut child);
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let text = std::fs::read_to_string(&out).unwrap();
    let answers: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers[1], json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
}

/// Over stdio, a line that is not JSON is answered `-32700 Parse error` with a `null` id, and a
/// `tools/call` whose params are not a call's (`arguments` not an object) `-32602 Invalid
/// params` saying why (JSON-RPC 2.0 §5.1); serving goes on.
#[test]
fn serve_over_stdio_answers_unparsable_lines_and_malformed_params() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let (mut child, mut stdin) = serve_into_file(dir.path(), &out, &[]);
    send_line(&mut stdin, "this is not json");
    wait_for_lines(&out, 2, &mut child);
    send_line(
        &mut stdin,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":"notanobject"}}"#,
    );
    wait_for_lines(&out, 3, &mut child);
    send_line(&mut stdin, PING);
    wait_for_lines(&out, 4, &mut child);
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let text = std::fs::read_to_string(&out).unwrap();
    let answers: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers[1]["id"], Value::Null, "{text}");
    assert_eq!(answers[1]["error"]["code"], -32700, "{text}");
    assert_eq!(answers[2]["id"], 3, "{text}");
    assert_eq!(answers[2]["error"]["code"], -32602, "{text}");
    let message = answers[2]["error"]["message"].as_str().unwrap();
    assert!(message.contains("tools/call"), "{message}");
    assert!(message.contains("invalid type"), "{message}");
    assert_eq!(answers[3], json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
}

/// The pipes `serve` is given stay blocking for every other holder of the same ends (a shell
/// pipeline's next command, a parent that kept its copy) while it serves and after it exits.
#[test]
fn serve_over_stdio_leaves_shared_pipes_blocking() {
    fn nonblocking(fd: &impl std::os::fd::AsRawFd) -> bool {
        // SAFETY: F_GETFL reads the flags of a descriptor this test owns.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        flags & libc::O_NONBLOCK != 0
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    let (stdin_read, mut stdin_write) = std::io::pipe().unwrap();
    let (stdout_read, stdout_write) = std::io::pipe().unwrap();
    let mut child = Command::new(BIN)
        .args(["--builtin", "repo", "--root", &root, "serve"])
        .stdin(stdin_read.try_clone().unwrap())
        .stdout(stdout_write.try_clone().unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    send_line(&mut stdin_write, INITIALIZE);
    let mut answers = BufReader::new(stdout_read);
    let mut line = String::new();
    answers.read_line(&mut line).unwrap();
    assert!(line.contains(r#""id":1"#), "{line}");
    // The server is serving: the descriptions it was given must still block.
    assert!(
        !nonblocking(&stdin_read),
        "stdin's pipe was made non-blocking"
    );
    assert!(
        !nonblocking(&stdout_write),
        "stdout's pipe was made non-blocking"
    );
    send_line(&mut stdin_write, PING);
    line.clear();
    answers.read_line(&mut line).unwrap();
    assert!(line.contains(r#""id":2"#), "{line}");
    drop(stdin_write);
    assert!(child.wait().unwrap().success());
    assert!(!nonblocking(&stdin_read) && !nonblocking(&stdout_write));
}

/// The processes descended from `pid`, from `/proc`.
fn descendants(pid: u32) -> Vec<u32> {
    let parent_of = |child: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
        // `pid (comm) state ppid …`: the command may hold spaces and parentheses.
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let all: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let mut found = vec![pid];
    let mut grew = true;
    while grew {
        grew = false;
        for &candidate in &all {
            if !found.contains(&candidate)
                && parent_of(candidate).is_some_and(|parent| found.contains(&parent))
            {
                found.push(candidate);
                grew = true;
            }
        }
    }
    found.retain(|&p| p != pid);
    found
}

/// Those of `pids` still running, killed so a failed test leaves nothing spinning.
fn kill_survivors(pids: Vec<u32>) -> Vec<u32> {
    // A process the command killed as it exited may not have died yet on a busy machine: wait
    // for that, with a bound far past any such delay (a program left spinning stays).
    let bound = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while pids.iter().any(|&pid| running(pid)) && std::time::Instant::now() < bound {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let left: Vec<u32> = pids.into_iter().filter(|&pid| running(pid)).collect();
    for pid in &left {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    left
}

/// Alive and not a zombie.
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

/// SIGTERM to `serve` while a program runs: the server disposes its code runtime, so the
/// program's process does not outlive it (it used to spin on, re-parented, until its CPU budget).
#[test]
fn a_terminated_server_takes_its_running_program_with_it() {
    let _tools = require_tools!();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    let mut child = Command::new(BIN)
        .args([
            "--builtin",
            "repo",
            "--root",
            &root,
            "serve",
            "--mode",
            "code",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    send_line(&mut stdin, INITIALIZE);
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    send_line(&mut stdin, &initialized.to_string());
    let spin = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_code",
        "arguments": {"code": "while (true) {}", "description": "spin"}}});
    send_line(&mut stdin, &spin.to_string());
    // Wait for the program's process to appear (the timeout only bounds a failure).
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let program = loop {
        let spawned = descendants(child.id());
        if !spawned.is_empty() {
            break spawned;
        }
        assert!(std::time::Instant::now() < deadline, "no program process");
        std::thread::sleep(Duration::from_millis(20));
    };
    signal(&child, "-TERM");
    child.wait().unwrap();
    let left = kill_survivors(program);
    assert!(left.is_empty(), "still running after the server: {left:?}");
}

/// Waits for `child` to exit (the timeout only bounds a failure).
fn wait_for_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the command did not exit after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM to `serve` on blocking stdio (stdout a file): it stops at once, though its stdin
/// stays open and a read of it never returns.
#[test]
fn a_terminated_server_on_blocking_stdio_exits_with_its_input_open() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let (mut child, stdin) = serve_into_file(dir.path(), &out, &[]);
    signal(&child, "-TERM");
    assert!(wait_for_exit(&mut child).success());
    drop(stdin);
}

/// SIGINT to `dsh-tools run` while its program spins: the run ends, the program's process goes
/// with it, and the command says why.
#[test]
fn an_interrupted_run_ends_its_program_and_says_so() {
    let _tools = require_tools!();
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("spin.ts");
    // The tool call's line on stderr says the program runs (a standby child exists before).
    std::fs::write(
        &program,
        "await tools.file_stats({ path: \"spin.ts\" });\nwhile (true) {}\n",
    )
    .unwrap();
    let root = dir.path().display().to_string();
    let mut child = Command::new(BIN)
        .args(["--builtin", "repo", "--root", &root, "run"])
        .arg(&program)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    assert!(first.contains("file_stats"), "{first}");
    let spawned = descendants(child.id());
    assert!(!spawned.is_empty(), "no program process");
    signal(&child, "-INT");
    let exit = wait_for_exit(&mut child);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let stderr = format!("{first}{rest}");
    let left = kill_survivors(spawned);
    assert_eq!(exit.code(), Some(1), "{stderr}");
    assert!(stderr.contains("stopped by a signal"), "{stderr}");
    assert!(left.is_empty(), "still running after the command: {left:?}");
}

/// MCP has no prompt sections, so `run_code`'s description carries the SDK and, after it, the
/// code runtime's note: over Python on Monty, what Monty lacks; over CPython, nothing more.
#[test]
fn serve_passes_the_runtimes_prompt_note_to_run_code() {
    let described = |runtime: &str| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.jsonl");
        let (mut child, mut stdin) = serve_into_file(
            dir.path(),
            &out,
            &["--mode", "code", "--lang", "py", "--runtime", runtime],
        );
        send_line(
            &mut stdin,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        send_line(
            &mut stdin,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#,
        );
        wait_for_lines(&out, 2, &mut child);
        drop(stdin);
        assert!(child.wait().unwrap().success());
        let text = std::fs::read_to_string(&out).unwrap();
        let listed: Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
        let tools = listed["result"]["tools"].as_array().unwrap().clone();
        let run_code = tools.iter().find(|t| t["name"] == "run_code").unwrap();
        run_code["description"].as_str().unwrap().to_owned()
    };
    let embedded = described("embedded");
    assert!(
        embedded.contains("Python here is Monty") && embedded.contains("```py"),
        "{embedded}"
    );
    assert!(!described("subprocess").contains("Python here is Monty"));
}

/// Kills `child` if the test has not sent on the returned channel within a minute: a bound on
/// a failure (a server that never exits), never a measure of a passing run.
fn kill_if_stuck(child: &Child) -> std::sync::mpsc::Sender<()> {
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let pid = child.id().to_string();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            finished.recv_timeout(Duration::from_secs(60))
        {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
    });
    done
}

/// A 2026-07-28 client's open `subscriptions/listen` stream ends when stdin does: the server
/// answers it with the stream's final result and exits, instead of holding the stream (and the
/// process) until rmcp's drain gives up and drops the answer.
#[test]
fn serve_over_stdio_ends_a_listen_stream_when_input_ends() {
    listen_until_input_ends(json!({"toolsListChanged": true}));
}

/// The same for a stream that asked for nothing this server sends: it too is answered at end
/// of input (left to rmcp's drain, it waited out the drain and its answer was dropped).
#[test]
fn serve_over_stdio_ends_an_empty_listen_stream_when_input_ends() {
    listen_until_input_ends(json!({}));
}

/// Opens a listen stream for `notifications` and closes stdin. Each step waits for the line
/// that shows the server got there; stdin closes right after the stream's acknowledgement,
/// whatever the server is doing then.
fn listen_until_input_ends(notifications: Value) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["--builtin", "repo", "--root"])
        .arg(dir.path())
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let done = kill_if_stuck(&child);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || -> Option<Value> {
        let line = lines.next()?.unwrap();
        Some(serde_json::from_str(&line).unwrap())
    };
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
        "params": {"_meta": meta}});
    send_line(&mut stdin, &discover.to_string());
    let discovered = next().expect("the discover answer");
    assert_eq!(discovered["id"], 1, "{discovered}");
    let listen = json!({"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen",
        "params": {"_meta": meta, "notifications": notifications}});
    send_line(&mut stdin, &listen.to_string());
    let acknowledged = next().expect("the stream's acknowledgement");
    assert_eq!(
        acknowledged["method"], "notifications/subscriptions/acknowledged",
        "{acknowledged}"
    );
    drop(stdin);
    let rest: Vec<Value> = std::iter::from_fn(next).collect();
    let status = child.wait().unwrap();
    let _ = done.send(());
    assert!(status.success(), "{status}: {rest:?}");
    assert_eq!(rest.len(), 1, "only the stream's answer: {rest:?}");
    assert_eq!(rest[0]["id"], 2, "{rest:?}");
    assert_eq!(rest[0]["result"]["resultType"], "complete", "{rest:?}");
    assert_eq!(
        rest[0]["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 2,
        "{rest:?}"
    );
}
