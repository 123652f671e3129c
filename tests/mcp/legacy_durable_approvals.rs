//! A 2025-era session's answer for a parked durable run decides the call the person was shown
//! and no other: when the journal's owner decides that call while the person looks at it
//! (`runs approve`, here `approve_run`), the person's accept is refused and the call the run
//! went on to wait at stays parked. The client is the official Python SDK
//! (`tests/mcp_clients/legacy_accept_after_move.py`).

use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_tools::durable::DurableRun;
use dsh_tools::mcp::McpServeOptions;
use dsh_tools::{ToolError, tool};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::session_principals::{asking_registry, journaled_code_mode, serve_http};
use dsh_tools::prelude::*;

static UNSEEN: AtomicUsize = AtomicUsize::new(0);

/// Appends a line (asks first).
#[tool]
async fn append_line(line: String) -> Result<String, ToolError> {
    if line == "unseen-two" {
        UNSEEN.fetch_add(1, Ordering::SeqCst);
    }
    Ok(format!("appended {line}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_accept_approves_only_the_call_it_was_shown() {
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/.tools/venv/bin/python");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/mcp_clients/legacy_accept_after_move.py"
    );
    let dir = tempfile::tempdir().unwrap();
    let registry = asking_registry(AppendLineTool, "append_line");
    let store = journaled_code_mode(&registry, dir.path()).await;
    let (url, token, server) =
        serve_http(&registry, McpServeOptions::default().journal(store.clone())).await;

    let mut child = tokio::process::Command::new(python)
        .args([script, &url, &token])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut output = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        if line == "ASKED" {
            // The person is looking at call #0. The journal's owner decides it meanwhile.
            let runs = store.runs().await.unwrap();
            let run = DurableRun::new(store.clone(), runs[0].run_id.clone());
            let parked = registry.parked_run(&run).await.unwrap();
            assert_eq!(parked.seq, 0);
            registry
                .approve_run(store.clone(), &parked.continuation)
                .await
                .unwrap();
            child
                .stdin
                .as_mut()
                .unwrap()
                .write_all(b"go\n")
                .await
                .unwrap();
        } else {
            output.push(line);
        }
    }
    assert!(child.wait().await.unwrap().success(), "{output:#?}");
    server.abort();
    let shown = output.iter().filter(|l| l.starts_with("SHOWN")).count();
    assert_eq!(shown, 1, "{output:#?}");
    assert_eq!(
        UNSEEN.load(Ordering::SeqCst),
        0,
        "call #1 ran on an accept given for call #0 (the only call shown): {output:#?}"
    );
    // The client reads why its answer did nothing, naming the call it was about.
    let result = output
        .iter()
        .find(|l| l.starts_with("RESULT"))
        .unwrap_or_else(|| panic!("{output:#?}"));
    assert!(
        result.starts_with("RESULT True")
            && result.contains("CONTINUATION_REFUSED")
            && result.contains("call #0"),
        "{result}"
    );
    // The call the run went on to wait at is still undecided, for whoever is shown it.
    let runs = store.runs().await.unwrap();
    let run = DurableRun::new(store.clone(), runs[0].run_id.clone());
    assert_eq!(registry.parked_run(&run).await.unwrap().seq, 1);
}
