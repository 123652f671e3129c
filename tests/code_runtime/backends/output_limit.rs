//! The `output-limit` failure on every backend for one line or one thrown message far past the
//! budget: the run ends with the fixed text `outer output exceeded <max_output_bytes> bytes`
//! whole (nothing printed before it takes its room), logs plus message within the budget, also
//! when the logs leave less room than an empty message takes.

use dsh_tools::code::{Budgets, FailureKind, RunOutcome};

use super::{Backend, budgets};

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

/// Empty lines that fill the budget to its last byte or one short leave no room for even an
/// empty message (`""`, 2 bytes): the last kept line gives way to it, so logs plus message still
/// fit the budget exactly.
async fn logs_plus_message_never_pass_the_budget(backend: Backend) {
    for (cap, message) in [(7u64, "o"), (8, "ou")] {
        let b = Budgets {
            max_output_bytes: cap,
            ..budgets()
        };
        let out = backend
            .run_once(
                b,
                "for (let i = 0; i < 3; i++) console.log(''); return 1",
                "for _ in range(3):\n    print('')\nreturn 1",
            )
            .await;
        let error = out.error.as_ref().unwrap_or_else(|| panic!("{out:?}"));
        assert_eq!(error.kind, FailureKind::OutputLimit, "{out:?}");
        assert_eq!(
            (out.logs.as_slice(), error.message.as_str()),
            (&[String::new()][..], message)
        );
        let bytes = serde_json::to_string(&out.logs).unwrap().len()
            + serde_json::to_string(&error.message).unwrap().len();
        assert_eq!(bytes as u64, cap, "{out:?}");
    }
}

on_every_backend!(
    a_huge_line_keeps_the_prefix_that_fits,
    a_thrown_message_past_the_budget_is_an_output_limit,
    logs_plus_message_never_pass_the_budget,
);
