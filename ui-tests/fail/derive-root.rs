use dsh_tools::{Deserialize, JsonSchema, Serialize, tool};

// The root derives, written by hand without serde's and schemars' `crate = …` attributes.
#[derive(Deserialize, Serialize, JsonSchema)]
struct Query {
    text: String,
}

/// Search.
#[tool]
async fn search(#[args] query: Query) -> Vec<Query> {
    vec![query]
}

fn main() {}
