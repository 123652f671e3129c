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

/// Closed already by its own attribute: `#[tool_type]` adds no second one.
#[tool_type]
#[serde(deny_unknown_fields)]
struct Page {
    limit: u32,
}

/// A flattened field needs the object open.
#[tool_type(allow_unknown)]
struct Scope {
    path: String,
    #[serde(flatten)]
    page: Page,
}

/// Narrow a search.
#[tool]
async fn narrow(scope: Scope) -> u32 {
    let _ = scope.path;
    scope.page.limit
}

/// Search an area.
#[tool]
async fn search(filter: Filter) -> Vec<Hit> {
    let _ = (filter.area, filter.limit);
    vec![Hit { line: 1 }]
}

/// Runs the case.
pub(crate) fn main() {
    let definition = ToolDefinition::from_tool(SearchTool);
    let schema = definition.parameters().to_string();
    assert!(schema.contains("source_tree"), "{schema}");
    assert!(schema.contains("The area to search."), "{schema}");
    let filter = &definition.parameters()["$defs"]["Filter"];
    assert_eq!(filter["additionalProperties"], false, "{schema}");

    let definition = ToolDefinition::from_tool(NarrowTool);
    let scope = &definition.parameters()["$defs"]["Scope"];
    assert!(scope.get("additionalProperties").is_none(), "{scope}");
    assert!(scope["properties"].get("limit").is_some(), "{scope}");
}
