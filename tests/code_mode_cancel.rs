//! Cancelling a `run_code` call mid-run leaves no child process behind. A test binary of its own,
//! so no other test's children are counted.

use std::sync::Arc;

use dsh_tools::code::{SubprocessConfig, SubprocessRuntime};
use dsh_tools::prelude::*;
use dsh_tools::result::ErrorCode;
use dsh_tools::{Mode, Registry, ToolCall, ToolDefinition, ToolExec};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Processes whose parent is this test process.
fn children() -> Vec<u32> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the parenthesised command: state, then the parent pid.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(me) {
            found.push(pid);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_run_code_leaves_no_child_process() {
    assert!(children().is_empty(), "clean start");
    for python in [false, true] {
        let registry = Registry::new();
        let called = Arc::new(Notify::new());
        let notify = called.clone();
        let nap = ToolDefinition::builder("nap")
            .concurrency_safe()
            .handler(move |_args: Value, exec: ToolExec| {
                let notify = notify.clone();
                async move {
                    notify.notify_one();
                    exec.signal().cancelled().await;
                    Ok(Value::Null)
                }
            })
            .build()
            .unwrap();
        registry.register(nap).unwrap();
        let config = SubprocessConfig {
            standby: false,
            ..Default::default()
        };
        let runtime: Arc<dyn dsh_tools::code::CodeRuntime> = if python {
            Arc::new(SubprocessRuntime::python(config).await.unwrap())
        } else {
            Arc::new(SubprocessRuntime::typescript(config).await.unwrap())
        };
        registry.set_code_runtime(runtime.clone());
        registry.set_mode(Mode::Code);
        let program = if python {
            "import asyncio\nawait asyncio.gather(tools.nap({}), tools.nap({}))"
        } else {
            "await Promise.all([tools.nap({}), tools.nap({})]);"
        };
        let signal = CancellationToken::new();
        let canceller = signal.clone();
        // Once the program waits in a call, its interpreter is our child: the check can see it.
        let seen = tokio::spawn(async move {
            called.notified().await;
            let during = children();
            canceller.cancel();
            during
        });
        let call = ToolCall::new(
            "run",
            "run_code",
            json!({"code": program, "description": "Wait forever"}),
        )
        .with_signal(signal);
        let result = registry.execute(call).await;
        assert_eq!(result.error_code(), Some(ErrorCode::Aborted), "{result:?}");
        assert!(
            !seen.await.unwrap().is_empty(),
            "python={python}: no child was seen during the run"
        );
        runtime.dispose().await;
        assert!(
            children().is_empty(),
            "python={python}: children left: {:?}",
            children()
        );
    }
}
