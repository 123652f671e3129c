//! The `output-limit` failure on every backend: its message is always the whole fixed text
//! `outer output exceeded <max_output_bytes> bytes`, and the kept logs give way so that logs plus
//! message fit the budget, whatever the channel that went past it.

use dsh_tools::code::{Budgets, FailureKind, RunOutcome};
use dsh_tools::{Mode, Registry, ToolCall};
use serde_json::json;

use super::{Backend, budgets};
use crate::code_runtime_support::run;

fn capped(max_output_bytes: u64) -> Budgets {
    Budgets {
        max_output_bytes,
        ..budgets()
    }
}

/// The run ended as `output-limit` with exactly the whole message, and logs plus message
/// serialize within `cap` bytes.
fn assert_whole_limit(out: &RunOutcome, cap: u64) {
    let error = out.error.as_ref().unwrap_or_else(|| panic!("{out:?}"));
    assert_eq!(error.kind, FailureKind::OutputLimit, "{out:?}");
    assert_eq!(error.message, format!("outer output exceeded {cap} bytes"));
    let bytes = serde_json::to_string(&out.logs).unwrap().len()
        + serde_json::to_string(&error.message).unwrap().len();
    assert!(
        bytes as u64 <= cap,
        "{bytes} bytes of output for a {cap}-byte budget"
    );
}

async fn many_small_lines_past_the_budget_keep_the_whole_message(backend: Backend) {
    let out = backend
        .run_once(
            capped(100),
            "for (let i = 0; i < 100; i++) console.log('0123456789');",
            "for i in range(100):\n    print('0123456789')",
        )
        .await;
    assert_whole_limit(&out, 100);
    // 100 - 2 (`[]`) - 33 (the message) leaves 65 bytes: five 12-byte entries and their commas.
    assert_eq!(out.logs, vec!["0123456789"; 5]);
}

async fn a_line_then_a_throw_keeps_the_whole_message(backend: Backend) {
    let out = backend
        .run_once(
            capped(100),
            "console.log('y'.repeat(90)); throw new Error('boom');",
            "print('y' * 90)\nraise ValueError('boom')",
        )
        .await;
    assert_whole_limit(&out, 100);
    // The entry gives way to the message: its quotes and 63 characters fill the 65 bytes left.
    assert_eq!(out.logs, vec!["y".repeat(63)]);
}

async fn the_smallest_budget_holds_the_whole_message(backend: Backend) {
    let out = backend
        .run_once(
            capped(34),
            "console.log('a'); return 'x'.repeat(40);",
            "print('a')\nreturn 'x' * 40",
        )
        .await;
    assert_whole_limit(&out, 34);
    assert!(out.logs.is_empty(), "{out:?}");
    let rt = backend.runtime(capped(34)).await;
    let fits = run(rt.as_ref(), "return 'ab'").await;
    assert_eq!(fits.error, None, "{fits:?}");
    rt.dispose().await;
}

async fn run_code_shows_the_whole_message(backend: Backend) {
    let registry = Registry::new();
    registry.set_code_runtime(backend.runtime(capped(100)).await);
    registry.set_mode(Mode::Code);
    let program = backend.pick(
        "for (let i = 0; i < 100; i++) console.log('0123456789');",
        "for i in range(100):\n    print('0123456789')",
    );
    let result = registry
        .execute(ToolCall::new(
            "1",
            "run_code",
            json!({"code": program, "description": "Print past the budget"}),
        ))
        .await;
    let message = &result.error().expect("an output-limit failure").message;
    assert_eq!(
        message,
        &format!(
            "code run failed (output-limit): outer output exceeded 100 bytes\nCaptured output:\n{}",
            ["0123456789"; 5].join("\n")
        )
    );
}

async fn a_huge_line_keeps_the_prefix_that_fits(backend: Backend) {
    let b = Budgets {
        max_output_bytes: 1 << 20,
        compute_ms: 30_000,
        max_memory_mb: 512,
        ..budgets()
    };
    let out = backend
        .run_once(
            b,
            "console.log('x'.repeat(3_000_000));",
            "print('x' * 3_000_000)",
        )
        .await;
    assert_whole_limit(&out, 1 << 20);
    // `[]`, the entry's quotes and the message `outer output exceeded 1048576 bytes` quoted
    // (37) leave the rest of the budget to the prefix.
    assert_eq!(out.logs.len(), 1, "{:?}", out.error);
    assert_eq!(out.logs[0].len(), (1 << 20) - 2 - 2 - 37);
    assert!(out.logs[0].bytes().all(|b| b == b'x'));
}

/// An uncaught exception whose message is far past the budget ends as `output-limit`: rendering
/// it does not cost the run its memory budget.
async fn a_thrown_message_past_the_budget_is_an_output_limit(backend: Backend) {
    let b = Budgets {
        compute_ms: 60_000,
        max_wall_ms: 120_000,
        ..Budgets::default()
    };
    let out = backend
        .run_once(
            b,
            "throw new Error('x'.repeat(100_000_000));",
            "raise ValueError('x' * 100_000_000)",
        )
        .await;
    assert_whole_limit(&out, 64 << 20);
    assert!(out.logs.is_empty(), "{:?}", out.logs.len());
}

on_every_backend!(
    many_small_lines_past_the_budget_keep_the_whole_message,
    a_line_then_a_throw_keeps_the_whole_message,
    the_smallest_budget_holds_the_whole_message,
    run_code_shows_the_whole_message,
    a_huge_line_keeps_the_prefix_that_fits,
    a_thrown_message_past_the_budget_is_an_output_limit,
);

/// A budget too small for the whole message is refused when the runtime is built.
#[test]
fn a_budget_under_the_message_is_refused() {
    let config = |max_output_bytes| dsh_tools::code::EmbeddedConfig {
        budgets: capped(max_output_bytes),
        ..Default::default()
    };
    let err = dsh_tools::code::EmbeddedRuntime::javascript(config(33))
        .expect_err("33 bytes cannot hold the message");
    assert!(
        err.to_string()
            .contains("max_output_bytes must be a safe integer of at least 34"),
        "{err}"
    );
    assert!(dsh_tools::code::EmbeddedRuntime::javascript(config(34)).is_ok());
}
