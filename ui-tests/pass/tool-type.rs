use dsh_tools::{ToolDefinition, tool, tool_type};

/// Where to look.
#[tool_type]
#[serde(rename_all = "snake_case")]
enum Area {
    /// The source tree.
    SourceTree,
    Docs,
}

#[tool_type]
struct Filter {
    /// The area to search.
    area: Area,
    #[serde(default)]
    limit: u32,
}

#[tool_type]
struct Hit {
    line: u64,
}

/// Search an area.
#[tool]
async fn search(filter: Filter) -> Vec<Hit> {
    let _ = (filter.area, filter.limit);
    vec![Hit { line: 1 }]
}

/// Runs the case.
pub fn main() {
    let definition = ToolDefinition::from_tool(SearchTool);
    let schema = definition.parameters().to_string();
    assert!(schema.contains("source_tree"), "{schema}");
    assert!(schema.contains("The area to search."), "{schema}");
}
