//! Three `dsh-tools serve --http` replicas on Restate behind haproxy (Debian's, pinned in
//! `.ci/tools/haproxy.txt`, installed by `.ci/install-haproxy.sh`): one round-robin frontend
//! over their MCP ports, one (h2c) over their Restate deployment ports, registered with the
//! pinned `restate-server` as ONE deployment. Every replica's tool source is the MCP server
//! `tests/mcp_servers/append_server.py`, whose `append_line` appends to one shared file and is
//! neither read-only nor idempotent.
//!
//! 50 clients, stateless (2026-07-28) JSON-RPC through haproxy, each start a program of 20
//! `append_line` calls as a task and poll `tasks/get` through haproxy until it ends. Once the
//! file holds some lines, one replica is SIGKILLed and started again on the same ports. Every
//! run completes; no line is in the file twice; every call a program saw succeed is in the file;
//! and each replica, asked directly, answers `tasks/get` for the runs. A call cut off by the kill
//! reads `OUTCOME_UNKNOWN`, which the program catches (it is not run again).
//!
//! Every wait is on an event, bounded only to fail. SKIPPED without the Restate server or
//! haproxy (root and apt needed); a failure under CI.

mod mcp_support;
mod restate_support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use restate_support::{
    BOUND, Process, Replica, ReplicaSetup, Server, client, lines, meta, rpc, server_binary,
    wait_for_port, wait_until,
};
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const TOKEN: &str = "replicas-test-token-0001";
const CLIENTS: usize = 50;
const CALLS: usize = 20;

/// haproxy from `.ci/install-haproxy.sh`; `None` (printed) where it cannot be installed, a
/// panic under CI.
fn haproxy() -> Option<PathBuf> {
    let output = Command::new(format!("{ROOT}/.ci/install-haproxy.sh"))
        .stderr(Stdio::inherit())
        .output();
    match output {
        Ok(output) if output.status.success() => Some(PathBuf::from(
            String::from_utf8_lossy(&output.stdout).trim(),
        )),
        other => {
            assert!(
                std::env::var_os("CI").is_none(),
                ".ci/install-haproxy.sh failed under CI: {other:?}"
            );
            eprintln!("SKIPPED: haproxy could not be installed (root and apt needed): {other:?}");
            None
        }
    }
}

/// haproxy's configuration: round robin over the replicas' MCP ports on `mcp`, and over their
/// deployment ports, HTTP/2 without TLS, on `deployment`. A replica that refuses connections
/// is skipped (`redispatch`) and marked down by its check.
fn haproxy_config(mcp: u16, deployment: u16, replicas: &[(u16, u16)]) -> String {
    let servers = |pick: fn(&(u16, u16)) -> u16, proto: &str| {
        replicas
            .iter()
            .enumerate()
            .map(|(n, ports)| {
                format!(
                    "    server r{n} 127.0.0.1:{}{proto} check inter 200ms fall 1 rise 1\n",
                    pick(ports)
                )
            })
            .collect::<String>()
    };
    format!(
        "global\n    maxconn 4096\n\
         defaults\n    mode http\n    timeout connect 5s\n    timeout client 5m\n    \
         timeout server 5m\n    timeout tunnel 5m\n    retries 3\n    option redispatch\n\
         frontend mcp\n    bind 127.0.0.1:{mcp}\n    default_backend replicas_mcp\n\
         backend replicas_mcp\n    balance roundrobin\n{}\
         frontend restate\n    bind 127.0.0.1:{deployment} proto h2\n    default_backend replicas_restate\n\
         backend replicas_restate\n    balance roundrobin\n{}",
        servers(|ports| ports.0, ""),
        servers(|ports| ports.1, " proto h2"),
    )
}

/// The program of client `client`'s attempt `attempt`: 20 appends, each line naming the run and
/// the call; a call whose outcome is unknown is left out of what it returns.
fn program(client: usize, attempt: usize) -> String {
    format!(
        "const ok = [];\nfor (let i = 0; i < {CALLS}; i++) {{\n  const line = `c{client}-a{attempt}-call${{i}}`;\n  try {{\n    await tools.mcp__append__append_line({{ line }});\n    ok.push(line);\n  }} catch (e) {{\n    if (e.code !== \"OUTCOME_UNKNOWN\") throw e;\n  }}\n}}\nreturn ok;\n"
    )
}

/// One client: starts its program as a task through `url` (a new attempt when the start itself
/// is cut off: that attempt's lines are its own) and polls it through `url` until it ends,
/// polling again when a poll is cut off. Its task id and final state.
async fn one_client(http: reqwest::Client, url: String, client: usize) -> (String, Value) {
    // Fifty programs of twenty calls each share two cores with a replica's restart: a run's
    // end is bounded, only to fail, by many times [`BOUND`], not by one wait's bound.
    let deadline = Instant::now() + 5 * BOUND;
    let mut attempt = 0;
    let id = loop {
        let params = json!({
            "name": "run_code",
            "arguments": {"description": "appends", "code": program(client, attempt)},
            "_meta": meta(true),
        });
        match rpc(&http, &url, TOKEN, "tools/call", Some("run_code"), params).await {
            Ok(answer) => match answer["result"]["taskId"].as_str() {
                Some(id) => break id.to_owned(),
                None => panic!("client {client}: no task: {answer}"),
            },
            Err(cut) => {
                assert!(
                    Instant::now() < deadline,
                    "client {client} never started: {cut}"
                );
                attempt += 1;
            }
        }
    };
    loop {
        let params = json!({"taskId": id, "_meta": meta(true)});
        if let Ok(answer) = rpc(&http, &url, TOKEN, "tasks/get", Some(&id), params).await {
            let task = &answer["result"];
            assert!(answer.get("error").is_none(), "client {client}: {answer}");
            if task["status"] != "working" {
                return (id, task.clone());
            }
        }
        assert!(
            Instant::now() < deadline,
            "client {client}'s task {id} never ended"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_behind_haproxy_share_runs_through_a_replica_kill() {
    let Some(binary) = server_binary() else {
        return;
    };
    let Some(haproxy) = haproxy() else {
        return;
    };
    let tools = mcp_support::tools().expect("installed with the server");
    let http = client();
    let server = Server::start(&binary, &http).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
    std::fs::set_permissions(&token_file, private).unwrap();
    let out = dir.path().join("lines.txt");
    let setup = ReplicaSetup {
        binary: Path::new(env!("CARGO_BIN_EXE_dsh-tools")),
        python: tools.python(),
        lines: &out,
        token_file: &token_file,
        server: &server,
    };
    let port = mcp_support::free_port;
    let mut replicas: Vec<Replica> = Vec::new();
    for _ in 0..3 {
        replicas.push(setup.start_free().await);
    }
    let ports: Vec<(u16, u16)> = replicas
        .iter()
        .map(|replica| (replica.mcp_port, replica.deployment_port))
        .collect();
    let (front, front_deployment) = (port(), port());
    let config = dir.path().join("haproxy.cfg");
    std::fs::write(&config, haproxy_config(front, front_deployment, &ports)).unwrap();
    let _balancer = Process(
        Command::new(haproxy)
            .arg("-f")
            .arg(&config)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("haproxy starts"),
    );
    wait_for_port("haproxy serves MCP", front).await;
    wait_for_port("haproxy serves the deployment", front_deployment).await;
    server
        .register(&http, &format!("http://127.0.0.1:{front_deployment}"))
        .await;

    let url = format!("http://127.0.0.1:{front}/mcp");
    let clients: Vec<_> = (0..CLIENTS)
        .map(|n| tokio::spawn(one_client(http.clone(), url.clone(), n)))
        .collect();

    // Some runs are under way: kill one replica, then start it again on the same ports.
    wait_until("the runs append", || {
        let count = lines(&out).len();
        async move { count >= 100 }
    })
    .await;
    let (mcp, deployment) = ports[1];
    drop(replicas.remove(1));
    replicas.insert(1, setup.start(mcp, deployment).await);

    let mut runs = Vec::new();
    for client in clients {
        runs.push(client.await.expect("a client task"));
    }
    let written = lines(&out);
    let mut seen = HashSet::new();
    for line in &written {
        assert!(seen.insert(line.as_str()), "{line} appended twice");
    }
    for (id, task) in &runs {
        assert_eq!(task["status"], "completed", "{id}: {task}");
        assert_eq!(task["result"]["isError"], false, "{id}: {task}");
        let ok = task["result"]["structuredContent"]["result"]
            .as_array()
            .expect("the lines the program saw appended");
        assert!(
            ok.len() >= CALLS - 1,
            "{id}: one call at most cut off: {task}"
        );
        for line in ok {
            let line = line.as_str().unwrap();
            assert!(
                seen.contains(line),
                "{id}: {line} succeeded but is not in the file"
            );
        }
    }
    let unknown: usize = runs
        .iter()
        .map(|(_, task)| {
            CALLS
                - task["result"]["structuredContent"]["result"]
                    .as_array()
                    .map_or(0, Vec::len)
        })
        .sum();
    eprintln!(
        "{} lines from {} runs; {unknown} calls cut off by the kill read OUTCOME_UNKNOWN",
        written.len(),
        runs.len()
    );
    // Each replica answers for the runs on its own, whichever served them.
    for replica in &replicas {
        for (id, task) in runs.iter().take(5) {
            let params = json!({"taskId": id, "_meta": meta(true)});
            let answer = rpc(&http, &replica.url, TOKEN, "tasks/get", Some(id), params)
                .await
                .expect("the replica answers");
            assert_eq!(answer["result"]["result"], task["result"], "{id}");
        }
    }
}
