//! The bounds on kept task results: their bytes, all tasks together, and each principal's
//! share of the task slots; tasks an OAuth subject owns. On tokio's paused clock, as the store's other tests.

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock, TaskPayload, TaskStatus};
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;

use super::{McpTaskLimits, Tasks};
use crate::durable::Principal;

const TTL: Duration = Duration::from_millis(1_000);
const MS: Duration = Duration::from_millis(1);

fn text(size: usize) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text("x".repeat(size))])
}

/// A result past what is left of the byte budget is dropped: its task ends `failed` with a
/// typed error naming the sizes; one that fits is kept; the room comes back once a kept result
/// is forgotten at its TTL.
#[tokio::test(start_paused = true)]
async fn results_past_the_byte_budget_are_dropped_saying_so() {
    let tasks = Tasks::new(McpTaskLimits::default().ttl(TTL).max_result_bytes(10_000));
    let kept = tasks
        .spawn(CancellationToken::new(), None, |_| async { text(6_000) })
        .unwrap()
        .task
        .task_id;
    sleep(MS).await;
    let dropped = tasks
        .spawn(CancellationToken::new(), None, |_| async { text(6_000) })
        .unwrap()
        .task
        .task_id;
    sleep(MS).await;
    assert_eq!(
        tasks.get(&kept).unwrap().task.status(),
        TaskStatus::Completed
    );
    match tasks.get(&dropped).unwrap().task.payload {
        TaskPayload::Failed { error } => {
            let message = error["message"].as_str().unwrap();
            assert!(
                message.starts_with("task result dropped: its 6") && message.contains("10000"),
                "{message}"
            );
            assert_eq!(error["code"], -32603);
            assert_eq!(error["data"]["code"], "TASK_RESULT_BUDGET");
            assert_eq!(error["data"]["budgetBytes"], 10_000);
            assert!(error["data"]["resultBytes"].as_u64().unwrap() > 6_000);
        }
        other => panic!("not failed: {other:?}"),
    }
    // A small one still fits beside the kept one.
    let small = tasks
        .spawn(CancellationToken::new(), None, |_| async { text(100) })
        .unwrap()
        .task
        .task_id;
    sleep(MS).await;
    assert_eq!(
        tasks.get(&small).unwrap().task.status(),
        TaskStatus::Completed
    );

    // The first is forgotten at its TTL, and its room with it.
    sleep(TTL).await;
    let later = tasks
        .spawn(CancellationToken::new(), None, |_| async { text(6_000) })
        .unwrap()
        .task
        .task_id;
    sleep(MS).await;
    assert_eq!(
        tasks.get(&later).unwrap().task.status(),
        TaskStatus::Completed
    );
}

/// One session cannot take every slot: past its share its calls are refused, while another
/// session still starts tasks; a slot comes back when a task of the session is forgotten.
#[tokio::test(start_paused = true)]
async fn a_session_gets_its_share_of_the_task_slots_and_no_more() {
    let server = Tasks::new(
        McpTaskLimits::default()
            .ttl(TTL)
            .max_live(8)
            .max_per_session(3),
    );
    let greedy = server.of(Principal::mcp_session("greedy"), false);
    let other = server.of(Principal::mcp_session("other"), false);
    for _ in 0..3 {
        greedy
            .spawn(CancellationToken::new(), None, |_| async { text(1) })
            .unwrap();
    }
    let refused = greedy
        .spawn(CancellationToken::new(), None, |_| async { text(1) })
        .unwrap_err();
    assert!(
        refused.starts_with("too many live tasks for this client (limit 3 of the server's 8)"),
        "{refused}"
    );
    other
        .spawn(CancellationToken::new(), None, |_| async { text(1) })
        .unwrap();
    sleep(TTL + MS).await;
    greedy
        .spawn(CancellationToken::new(), None, |_| async { text(1) })
        .unwrap();
}

/// The name of the variable that makes the test below its own child process.
const CHILD: &str = "DSH_TASKS_RSS_CHILD";

/// The process's resident size now, bytes.
fn resident_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: usize = line["VmRSS:".len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib * 1024
}

/// 32 calls each leaving a 4 MiB result (128 MiB if all were kept) under a budget of 16 MiB:
/// the results kept grow the resident size by less than 48 MiB. Measured in a child process
/// of this test binary running this test alone, so no other test's memory counts.
#[test]
fn large_results_stay_within_the_budget_in_resident_memory() {
    if std::env::var_os(CHILD).is_none() {
        let name = format!(
            "{}::large_results_stay_within_the_budget_in_resident_memory",
            module_path!().split_once("::").unwrap().1
        );
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &name, "--test-threads=1", "--nocapture"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("1 passed"),
            "the child failed: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let tasks = Tasks::new(
            McpTaskLimits::default()
                .ttl(TTL)
                .max_per_session(64)
                .max_result_bytes(16 << 20),
        );
        sleep(MS).await;
        let before = resident_bytes();
        let mut ids = Vec::new();
        for _ in 0..32 {
            let created = tasks
                .spawn(CancellationToken::new(), None, |_| async { text(4 << 20) })
                .unwrap();
            ids.push(created.task.task_id);
            // Each call settles before the next starts, as results arrive one by one.
            sleep(MS).await;
        }
        let grown = resident_bytes().saturating_sub(before);
        let completed = ids
            .iter()
            .filter(|id| tasks.get(id).unwrap().task.status() == TaskStatus::Completed)
            .count();
        println!("kept {completed} results; the resident size grew by {grown} bytes");
        assert_eq!(
            completed, 3,
            "16 MiB holds three results of 4 MiB and their JSON"
        );
        assert!(grown < 48 << 20, "the resident size grew by {grown} bytes");
    });
}

/// A task started by an OAuth subject is its own: another subject's `tasks/get`,
/// `tasks/update` and `tasks/cancel` find no such task, and cancel nothing; the owner sees it.
/// A task no one owns (a bearer-token client's) is seen by every client.
#[tokio::test(start_paused = true)]
async fn a_subjects_task_is_hidden_from_other_subjects() {
    let server = Tasks::new(McpTaskLimits::default().ttl(TTL));
    let alice = server.of(Principal::oauth_subject("https://issuer", "alice"), true);
    let mallory = server.of(Principal::oauth_subject("https://issuer", "mallory"), true);
    let signal = CancellationToken::new();
    let id = alice
        .spawn(signal.clone(), None, |_| async { text(1) })
        .unwrap()
        .task
        .task_id;
    let unknown = rmcp::model::ErrorCode::INVALID_PARAMS;
    assert_eq!(mallory.get(&id).unwrap_err().code, unknown);
    assert_eq!(mallory.cancel(&id).unwrap_err().code, unknown);
    assert_eq!(
        mallory.update(&id, Default::default()).unwrap_err().code,
        unknown
    );
    assert_eq!(server.get(&id).unwrap_err().code, unknown, "no subject");
    assert!(!signal.is_cancelled(), "another subject cancelled nothing");
    assert!(alice.get(&id).is_ok());

    let shared = server
        .of(Principal::mcp_session(""), false)
        .spawn(CancellationToken::new(), None, |_| async { text(1) })
        .unwrap()
        .task
        .task_id;
    assert!(mallory.get(&shared).is_ok());
}
