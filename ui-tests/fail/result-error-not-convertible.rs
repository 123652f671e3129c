use dsh_tools::tool;

struct Overdrawn;

/// Withdraw.
#[tool]
async fn withdraw(amount: u64) -> Result<u64, Overdrawn> {
    if amount > 100 { Err(Overdrawn) } else { Ok(100 - amount) }
}

fn main() {}
