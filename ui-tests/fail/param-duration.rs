use std::time::Duration;

use dsh_tools::tool;

/// Wait a while.
#[tool]
async fn wait(pause: Duration) -> u64 {
    pause.as_secs()
}

fn main() {}
