//! `dsh-tools serve --restate`: served `run_code` calls run as Restate invocations, against the
//! real `restate-server` (pinned, installed by `.ci/install-tools.sh`) and two `dsh-tools serve
//! --http` processes, the first also serving the Restate deployment. A task started on one is
//! polled to its result and cancelled from the other (its id is the invocation id, resolved
//! through Restate alone); a plain call waits for its run, and closing its stream kills the
//! invocation; a failed run is an `isError` result; an unknown invocation id is `-32602`.
//! Stateless (2026-07-28) JSON-RPC requests written by hand. Every wait is on an event, bounded
//! only to fail. SKIPPED without the server (a failure under CI).

mod mcp_support;
mod restate_support;

use std::path::Path;

use restate_support::{ReplicaSetup, Server, client, lines, meta, rpc, server_binary, wait_until};
use serde_json::{Value, json};

const TOKEN: &str = "serve-restate-test-token";

/// `tools/call` of `run_code` with `code` on `url`, as a task when `task`.
async fn run_code(http: &reqwest::Client, url: &str, code: &str, task: bool) -> Value {
    let params = json!({
        "name": "run_code",
        "arguments": {"description": "test", "code": code},
        "_meta": meta(task),
    });
    let answer = rpc(http, url, TOKEN, "tools/call", Some("run_code"), params)
        .await
        .expect("the replica answers");
    answer["result"].clone()
}

/// `tasks/get` or `tasks/cancel` of `id` on `url`: the whole JSON-RPC answer.
async fn task_request(http: &reqwest::Client, url: &str, method: &str, id: &str) -> Value {
    let params = json!({"taskId": id, "_meta": meta(true)});
    rpc(http, url, TOKEN, method, Some(id), params)
        .await
        .expect("the replica answers")
}

/// Polls `tasks/get` of `id` on `url` until the task has ended; its state.
async fn ended(http: &reqwest::Client, url: &str, id: &str) -> Value {
    let deadline = std::time::Instant::now() + restate_support::BOUND;
    loop {
        let task = task_request(http, url, "tasks/get", id).await["result"].clone();
        if matches!(
            task["status"].as_str(),
            Some("completed" | "failed" | "cancelled")
        ) {
            return task;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "task {id} never ended: {task}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The ids of the invocations Restate killed.
async fn killed(http: &reqwest::Client, server: &Server) -> Vec<String> {
    let query = "SELECT id FROM sys_invocation WHERE completion_failure LIKE '%killed%'";
    let answer: Value = http
        .post(format!("{}/query", server.admin))
        .header("accept", "application/json")
        .json(&json!({ "query": query }))
        .send()
        .await
        .expect("the admin API answers")
        .json()
        .await
        .expect("JSON rows");
    answer["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|row| row["id"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_code_runs_on_restate_and_any_replica_answers_for_its_tasks() {
    let Some(binary) = server_binary() else {
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
    let a = setup.start_free().await;
    let b = setup.start_free().await;
    server
        .register(&http, &format!("http://127.0.0.1:{}", a.deployment_port))
        .await;

    // A task started on A is the invocation; B polls it to its result.
    let three = "const out = [];\nfor (let i = 0; i < 3; i++) out.push((await tools.mcp__append__append_line({ line: `t-${i}` })).structuredContent.result);\nreturn out;";
    let created = run_code(&http, &a.url, three, true).await;
    assert_eq!(created["resultType"], "task", "{created}");
    let id = created["taskId"].as_str().unwrap().to_owned();
    assert!(id.starts_with("inv_"), "{id}");
    let done = ended(&http, &b.url, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["result"],
        json!(["t-0", "t-1", "t-2"])
    );
    assert!(done["ttlMs"].as_u64().is_some_and(|ttl| ttl > 0), "{done}");
    assert_eq!(lines(&out), ["t-0", "t-1", "t-2"]);
    // A answers the same from Restate.
    let again = task_request(&http, &a.url, "tasks/get", &id).await;
    assert_eq!(again["result"]["result"], done["result"]);

    // A plain call waits for its run.
    let plain = run_code(&http, &b.url, "return 6 * 7;", false).await;
    assert_eq!(plain["isError"], false, "{plain}");
    assert_eq!(plain["content"][0]["text"], "42");
    assert_eq!(plain["structuredContent"]["result"], 42);

    // A failed run is an isError result, the task completed.
    let failing = run_code(&http, &b.url, "throw new Error(\"boom\");", true).await;
    let failed = ended(&http, &a.url, failing["taskId"].as_str().unwrap()).await;
    assert_eq!(failed["status"], "completed", "{failed}");
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    let text = failed["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("CODE_RUN_FAILED") && text.contains("boom"),
        "{text}"
    );

    // A task cancelled on B, started on A: Restate kills the invocation.
    let forever =
        "for (let i = 0; ; i++) await tools.mcp__append__append_line({ line: `loop-${i}` });";
    let looping = run_code(&http, &a.url, forever, true).await;
    let loop_id = looping["taskId"].as_str().unwrap().to_owned();
    wait_until("the looping run appends", || {
        let seen = lines(&out).contains(&"loop-0".to_owned());
        async move { seen }
    })
    .await;
    let working = task_request(&http, &b.url, "tasks/get", &loop_id).await;
    assert_eq!(working["result"]["status"], "working", "{working}");
    let message = working["result"]["statusMessage"]
        .as_str()
        .unwrap_or_default();
    assert!(message.starts_with("running, attempt 1"), "{working}");
    let cancel = task_request(&http, &b.url, "tasks/cancel", &loop_id).await;
    assert!(cancel.get("error").is_none(), "{cancel}");
    let cancelled = ended(&http, &a.url, &loop_id).await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    // The task id is the invocation id and its tag.
    let (invocation, _tag) = loop_id.split_once('.').unwrap();
    assert_eq!(killed(&http, &server).await, [invocation]);

    // A plain call whose client closes its stream: its invocation is killed too.
    let plain_forever =
        "for (let i = 0; ; i++) await tools.mcp__append__append_line({ line: `plain-${i}` });";
    let call = {
        let (http, url) = (http.clone(), b.url.clone());
        tokio::spawn(async move { run_code(&http, &url, plain_forever, false).await })
    };
    wait_until("the plain run appends", || {
        let seen = lines(&out).contains(&"plain-0".to_owned());
        async move { seen }
    })
    .await;
    call.abort();
    let _ = call.await;
    wait_until("the plain call's invocation is killed", || {
        let killed = killed(&http, &server);
        async move { killed.await.len() == 2 }
    })
    .await;

    // An invocation id Restate never made is an unknown task.
    let unknown = task_request(
        &http,
        &b.url,
        "tasks/get",
        "inv_1axOHcZ8EYYs1l7B8zvJcT7bRlfVDrD0xB",
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    drop((a, b));
}
