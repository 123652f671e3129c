use std::time::Duration;

use dsh_tools::tool;

/// Wait a while, or not at all.
#[tool]
async fn wait(pause: Option<Duration>) -> u64 {
    pause.map_or(0, |pause| pause.as_secs())
}

fn main() {}
