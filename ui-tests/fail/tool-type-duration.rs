use std::time::Duration;

use dsh_tools::{tool, tool_type};

#[tool_type]
struct Retry {
    attempts: u32,
    backoff: Duration,
    // Skipped: not on the wire, so not reported.
    #[serde(skip)]
    elapsed: Duration,
}

#[tool_type]
enum Wait {
    For { pause: Option<Duration> },
    Forever,
}

/// Retry a job.
#[tool]
async fn retry(retry: Retry, wait: Wait) -> u32 {
    let _ = (retry.backoff, retry.elapsed, wait);
    retry.attempts
}

fn main() {}
