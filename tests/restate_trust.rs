//! Who may use a deployment and the replicas on Restate, against the pinned `restate-server`
//! (installed by `.ci/install-tools.sh`) and `dsh-tools serve`: only the Restate server holding
//! the deployment's identity key may register and call it (a second server, unsigned or signing
//! with another key, is refused); a deployment off loopback without a key does not start; a
//! replica refuses a secret file others can read or a short one, and answers `tasks/get` and
//! `tasks/cancel` only for runs a replica started, not for an invocation started on the ingress
//! directly; idle HTTP/2 connections to the deployment under a low descriptor limit leave the
//! MCP port answering; and the deployment closes a silent, an idle and an unauthenticated
//! connection. Every wait is on an event, bounded only to fail. SKIPPED without the server (a
//! failure under CI).

mod mcp_support;
mod restate_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use dsh_tools::Registry;
use dsh_tools::durable::restate::{DeploymentError, DeploymentOptions, serve_deployment};
use restate_support::{
    BOUND, Process, ReplicaSetup, Server, client, lines, meta, rpc, server_binary, wait_for_port,
    wait_until,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const TOKEN: &str = "restate-trust-test-token";

/// Test keys only (Ed25519, PKCS#8 PEM) and the public key of the first as Restate writes it.
const KEY_A: &str = "-----BEGIN PRIVATE KEY-----\n\
                     MC4CAQAwBQYDK2VwBCIEIAUZdpJ7RCpJOpyj9+FMNNDbFz2fY66Uu2dgKiKScR4z\n\
                     -----END PRIVATE KEY-----\n";
const PUBLIC_A: &str = "publickeyv1_7kHQm2FbDbUiJrnbk35iKpdLBqUQ8KivpkYUZZiXT4Pn";
const KEY_B: &str = "-----BEGIN PRIVATE KEY-----\n\
                     MC4CAQAwBQYDK2VwBCIEIHYMQ9lRex+NyZQFu171wDrh2/xuQnDqJTYxknkLygSh\n\
                     -----END PRIVATE KEY-----\n";

/// The client preface of HTTP/2 (RFC 9113 §3.4) and an empty SETTINGS frame.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// A HEADERS frame on stream 1 (END_STREAM, END_HEADERS): `GET /health`, HPACK without
/// Huffman (`:method GET`, `:scheme http` indexed; `:path` a literal with an indexed name).
const GET_HEALTH: &[u8] = b"\x00\x00\x0b\x01\x05\x00\x00\x00\x01\x82\x86\x04\x07/health";

/// A scratch folder with the token file, the tool's output file, and the pinned tools.
struct Scratch {
    dir: tempfile::TempDir,
    python: String,
}

impl Scratch {
    fn new() -> Scratch {
        let tools = mcp_support::tools().expect("installed with the server");
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, TOKEN).unwrap();
        // `serve` refuses a token file others may read.
        std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        Scratch {
            dir,
            python: tools.python(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `dsh-tools serve --mode code --http 127.0.0.1:MCP_PORT` over the `append` MCP server,
    /// with `flags`, behind `wrapper` (a program and its arguments) when given.
    fn serve(&self, mcp_port: u16, flags: &[&str], wrapper: &[&str]) -> Process {
        let append = format!(
            "append={} {ROOT}/tests/mcp_servers/append_server.py {}",
            self.python,
            self.path("lines.txt").display()
        );
        let binary = env!("CARGO_BIN_EXE_dsh-tools");
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(binary);
                command
            }
            None => Command::new(binary),
        };
        let child = command
            .args(["--mcp", &append, "serve", "--mode", "code"])
            .arg("--http")
            .arg(format!("127.0.0.1:{mcp_port}"))
            .arg("--auth-token-file")
            .arg(self.path("token"))
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dsh-tools serve starts");
        Process(child)
    }

    /// Writes `pem` to a private file; its path.
    fn key_file(&self, name: &str, pem: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, pem).unwrap();
        path
    }
}

/// One run of `code` through `ingress`, waiting for its end: the HTTP status and answer.
async fn invoke(http: &reqwest::Client, ingress: &str, code: &str) -> (u16, Value) {
    let answer = http
        .post(format!("{ingress}/DurableRuns/run"))
        .json(&json!({"code": code, "description": "test"}))
        .send()
        .await
        .expect("the ingress answers");
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_restate_server_holding_the_identity_key_may_use_the_deployment() {
    let Some(binary) = server_binary() else {
        return;
    };
    let http = client();
    let scratch = Scratch::new();
    let (mcp_port, deployment_port) = (mcp_support::free_port(), mcp_support::free_port());
    let deployment = format!("127.0.0.1:{deployment_port}");
    let _serve = scratch.serve(
        mcp_port,
        &[
            "--restate-deployment",
            &deployment,
            "--restate-identity-key",
            PUBLIC_A,
        ],
        &[],
    );
    wait_for_port("the deployment is served", deployment_port).await;
    let uri = format!("http://{deployment}");
    let appends = "return (await tools.mcp__append__append_line({ line: 'signed' })).structuredContent.result;";

    // A second Restate server, unsigned or signing with another key: refused at discovery, so
    // it has no service to invoke and no tool runs.
    let key_b = scratch.key_file("b.pem", KEY_B);
    for identity in [None, Some(key_b.as_path())] {
        let foreign = Server::start_signing(&binary, &http, identity).await;
        let (status, answer) = foreign.try_register(&http, &uri).await;
        assert!(
            status >= 400 && answer.contains("401"),
            "{identity:?}: HTTP {status}: {answer}"
        );
        let (status, answer) = invoke(&http, &foreign.ingress, appends).await;
        assert!(status >= 400, "{identity:?}: HTTP {status}: {answer}");
        assert!(lines(&scratch.path("lines.txt")).is_empty());
    }

    // The server holding the key registers it and runs programs on it.
    let key_a = scratch.key_file("a.pem", KEY_A);
    let ours = Server::start_signing(&binary, &http, Some(&key_a)).await;
    ours.register(&http, &uri).await;
    let (status, answer) = invoke(&http, &ours.ingress, appends).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"], "signed", "{answer}");
    assert_eq!(lines(&scratch.path("lines.txt")), ["signed"]);
}

/// Waits for `process` to exit; its status code and stderr.
async fn exited(mut process: Process) -> (Option<i32>, String) {
    let deadline = std::time::Instant::now() + BOUND;
    let status = loop {
        if let Some(status) = process.0.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "serve exits");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut process.0.stderr.take().unwrap(), &mut stderr).unwrap();
    (status.code(), stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_off_loopback_without_an_identity_key_does_not_start() {
    let wildcard: std::net::SocketAddr = "0.0.0.0:9080".parse().unwrap();
    let error = serve_deployment(Registry::new(), wildcard, DeploymentOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(error, DeploymentError::NoIdentityOffLoopback(addr) if addr == wildcard),
        "{error}"
    );
    assert!(
        error.to_string().contains("--restate-identity-key"),
        "{error}"
    );
    let bad = DeploymentOptions::default().identity_key("publickeyv1_nope");
    assert!(matches!(
        bad.check(wildcard),
        Err(DeploymentError::InvalidIdentityKey { .. })
    ));
    let keyed = DeploymentOptions::default().identity_key(PUBLIC_A);
    assert!(keyed.check(wildcard).is_ok());
    for loopback in ["127.0.0.1:9080", "[::1]:9080", "[::ffff:127.0.0.1]:9080"] {
        let addr = loopback.parse().unwrap();
        assert!(DeploymentOptions::default().check(addr).is_ok(), "{addr}");
    }

    let Some(_) = server_binary() else {
        return;
    };
    let scratch = Scratch::new();
    let port = mcp_support::free_port();
    for flags in [
        vec!["--restate-deployment".to_owned(), format!("0.0.0.0:{port}")],
        vec![
            "--restate-deployment".to_owned(),
            format!("0.0.0.0:{port}"),
            "--restate-identity-key".to_owned(),
            "not-a-key".to_owned(),
        ],
    ] {
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let serve = scratch.serve(mcp_support::free_port(), &flags, &[]);
        let (code, stderr) = exited(serve).await;
        assert_ne!(code, Some(0), "{stderr}");
        assert!(
            stderr.contains(&format!("--restate-deployment 0.0.0.0:{port}"))
                && stderr.contains("request identity key"),
            "{stderr}"
        );
        // It exited with the refusal above, before binding: a connect to the port now would
        // reach whichever process took the free port next, not this one.
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicas_secret_file_others_can_read_or_too_short_is_refused() {
    let Some(_) = server_binary() else {
        return;
    };
    let scratch = Scratch::new();
    let secret = scratch.path("secret");
    let secret_flag = secret.to_str().unwrap();
    for (content, mode, expected) in [
        (
            "s".repeat(40),
            0o644,
            "group or others may read or write it (mode 0644)",
        ),
        (
            "short\n".to_owned(),
            0o600,
            "5 bytes; at least 32 are needed",
        ),
    ] {
        std::fs::write(&secret, content).unwrap();
        std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .unwrap();
        let flags = [
            "--restate",
            "http://127.0.0.1:1",
            "--restate-admin",
            "http://127.0.0.1:1",
            "--restate-secret-file",
            secret_flag,
        ];
        let (code, stderr) = exited(scratch.serve(mcp_support::free_port(), &flags, &[])).await;
        assert_ne!(code, Some(0), "{stderr}");
        assert!(
            stderr.contains("--restate-secret-file") && stderr.contains(expected),
            "{stderr}"
        );
    }
}

/// `tasks/get` or `tasks/cancel` of `id` on `url`: the whole JSON-RPC answer.
async fn task_request(http: &reqwest::Client, url: &str, method: &str, id: &str) -> Value {
    let params = json!({"taskId": id, "_meta": meta(true)});
    rpc(http, url, TOKEN, method, Some(id), params)
        .await
        .expect("the replica answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_answers_tasks_only_for_runs_a_replica_started() {
    let Some(binary) = server_binary() else {
        return;
    };
    let http = client();
    let server = Server::start(&binary, &http).await;
    let scratch = Scratch::new();
    let setup = ReplicaSetup {
        binary: Path::new(env!("CARGO_BIN_EXE_dsh-tools")),
        python: scratch.python.clone(),
        lines: &scratch.path("lines.txt"),
        token_file: &scratch.path("token"),
        server: &server,
    };
    let (a, b) = (setup.start_free().await, setup.start_free().await);
    server
        .register(&http, &format!("http://127.0.0.1:{}", a.deployment_port))
        .await;

    // Someone on the ingress starts a run under a key of their choosing: its invocation id is
    // computable from the key, and it ends with a result.
    let started: Value = http
        .post(format!("{}/DurableRuns/run/send", server.ingress))
        .header("idempotency-key", "order-42")
        .json(&json!({"code": "return 'theirs';", "description": "theirs"}))
        .send()
        .await
        .expect("the ingress answers")
        .json()
        .await
        .expect("JSON");
    let theirs = started["invocationId"].as_str().expect("an id").to_owned();
    let output: Value = http
        .get(format!(
            "{}/restate/invocation/{theirs}/attach",
            server.ingress
        ))
        .send()
        .await
        .expect("the ingress answers")
        .json()
        .await
        .expect("JSON");
    assert_eq!(output["result"], "theirs", "{output}");

    // No replica answers for it: bare, or with a made-up tag.
    for id in [theirs.clone(), format!("{theirs}.{}", "0".repeat(32))] {
        for method in ["tasks/get", "tasks/cancel"] {
            let answer = task_request(&http, &b.url, method, &id).await;
            assert_eq!(answer["error"]["code"], -32602, "{method} {id}: {answer}");
            assert!(answer.get("result").is_none(), "{answer}");
        }
    }

    // A run a replica started is answered by the other.
    let params = json!({
        "name": "run_code",
        "arguments": {"description": "ours", "code": "return 'ours';"},
        "_meta": meta(true),
    });
    let created = rpc(&http, &a.url, TOKEN, "tools/call", Some("run_code"), params)
        .await
        .expect("the replica answers");
    let ours = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    assert!(ours.starts_with("inv_") && ours.contains('.'), "{ours}");
    wait_until("the other replica answers with the run's result", || {
        let answer = task_request(&http, &b.url, "tasks/get", &ours);
        async move {
            let task = answer.await;
            assert!(task.get("error").is_none(), "{task}");
            task["result"]["status"] == "completed"
        }
    })
    .await;
    let done = task_request(&http, &b.url, "tasks/get", &ours).await;
    assert_eq!(
        done["result"]["result"]["structuredContent"]["result"],
        "ours"
    );
}

/// Opens a connection to `port`, sends the HTTP/2 preface, and waits for the deployment's
/// first answer: `true` when it sent its SETTINGS (the connection is held), `false` when it
/// closed the connection.
async fn idle_connection(port: u16) -> (bool, Option<TcpStream>) {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)).await else {
        return (false, None);
    };
    if stream.write_all(PREFACE).await.is_err() {
        return (false, None);
    }
    let mut first = [0u8; 64];
    match tokio::time::timeout(BOUND, stream.read(&mut first)).await {
        Ok(Ok(n)) if n > 0 => (true, Some(stream)),
        Ok(_) => (false, None),
        Err(_) => panic!("the deployment neither answered nor closed a connection"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_http2_connections_under_a_low_descriptor_limit_leave_the_mcp_port_answering() {
    let Some(_) = server_binary() else {
        return;
    };
    let scratch = Scratch::new();
    let (mcp_port, deployment_port) = (mcp_support::free_port(), mcp_support::free_port());
    let deployment = format!("127.0.0.1:{deployment_port}");
    let _serve = scratch.serve(
        mcp_port,
        &["--restate-deployment", &deployment],
        &["prlimit", "--nofile=256:256", "--"],
    );
    wait_for_port("the MCP port", mcp_port).await;
    wait_for_port("the deployment", deployment_port).await;

    // Far more connections than descriptors; each is answered (held) or closed.
    let connections =
        futures::future::join_all((0..600).map(|_| idle_connection(deployment_port))).await;
    let held = connections.iter().filter(|(held, _)| *held).count();
    assert!(
        (1..=64).contains(&held),
        "at most a quarter of the descriptors: {held}"
    );

    let url = format!("http://127.0.0.1:{mcp_port}/mcp");
    let params = json!({"_meta": meta(false)});
    let listed = rpc(&client(), &url, TOKEN, "tools/list", None, params)
        .await
        .expect("the MCP port answers");
    assert_eq!(listed["result"]["tools"][0]["name"], "run_code", "{listed}");
    drop(connections);
}

/// Serves a deployment of an empty registry in this process with `options`; its port.
async fn deployment(options: DeploymentOptions) -> u16 {
    let port = mcp_support::free_port();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    tokio::spawn(async move {
        serve_deployment(Registry::new(), addr, options)
            .await
            .expect("the deployment serves");
    });
    wait_for_port("the deployment", port).await;
    port
}

/// Reads `stream` until the deployment closes it; panics after 30 s (a failure bound, under the
/// 40 s of the deployment's first HTTP/2 ping, whose timeout would close the connection too).
async fn closed(stream: &mut TcpStream) {
    let mut buffer = [0u8; 4096];
    let read_all = async {
        while let Ok(n) = stream.read(&mut buffer).await {
            if n == 0 {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read_all)
        .await
        .expect("the deployment closes the connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployment_closes_silent_idle_and_unauthenticated_connections() {
    let quick = Duration::from_millis(200);
    // Silent: nothing sent within the handshake timeout.
    let port = deployment(DeploymentOptions::default().handshake_timeout(quick)).await;
    let mut silent = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    closed(&mut silent).await;

    // Idle: one request answered, then nothing for the idle timeout.
    let port = deployment(DeploymentOptions::default().idle_timeout(quick)).await;
    let mut idle = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    idle.write_all(&[PREFACE, GET_HEALTH].concat())
        .await
        .unwrap();
    closed(&mut idle).await;

    // Unauthenticated: the request is refused (401) and its connection closed, long before
    // either timeout.
    let hour = Duration::from_secs(3600);
    let keyed = DeploymentOptions::default()
        .identity_key(PUBLIC_A)
        .handshake_timeout(hour)
        .idle_timeout(hour);
    let port = deployment(keyed).await;
    let mut unsigned = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    unsigned
        .write_all(&[PREFACE, GET_HEALTH].concat())
        .await
        .unwrap();
    closed(&mut unsigned).await;
}
