use dsh_tools::tool;

/// Wait several times.
#[tool]
async fn wait(pauses: Vec<std::time::Duration>) -> u64 {
    pauses.iter().map(|pause| pause.as_secs()).sum()
}

fn main() {}
