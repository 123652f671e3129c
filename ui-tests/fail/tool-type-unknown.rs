use dsh_tools::tool_type;

#[tool_type]
struct Page {
    limit: u32,
}

#[tool_type]
struct Query {
    text: String,
    #[serde(flatten)]
    page: Page,
}

#[tool_type]
enum Action {
    Search {
        #[serde(flatten)]
        page: Page,
    },
}

#[tool_type(allow_unknown)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Loose {
    text: String,
}

fn main() {}
