use std::time::Duration;

use dsh_tools::{ToolError, tool};

/// Time a run.
#[tool]
async fn time_run() -> Result<Duration, ToolError> {
    Ok(Duration::from_millis(5))
}

/// Time several runs.
#[tool]
async fn time_runs() -> Vec<Duration> {
    vec![Duration::from_millis(5)]
}

fn main() {}
