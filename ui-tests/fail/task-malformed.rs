use dsh_tools::tool;

/// Run a long job.
#[tool(task = "yes")]
async fn long_job(steps: u32) -> u32 {
    steps
}

/// Run another long job.
#[tool(task(ttl_ms = 1000))]
async fn other_job(steps: u32) -> u32 {
    steps
}

/// Run a third long job.
#[tool(task, task = false)]
async fn third_job(steps: u32) -> u32 {
    steps
}

fn main() {}
