use dsh_tools::tool;

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Query {
    text: String,
}

/// Search.
#[tool(args = SearchArguments, allow_unknown)]
async fn search(#[args] query: Query, limit: u32, #[args] #[arg(rename = "q")] again: Query) -> String {
    let _ = (limit, again);
    query.text
}

fn main() {}
