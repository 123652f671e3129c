use dsh_tools::tool;

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Result {
    ok: bool,
}

/// Check.
#[tool]
async fn check() -> Result {
    Result { ok: true }
}

fn main() {}
