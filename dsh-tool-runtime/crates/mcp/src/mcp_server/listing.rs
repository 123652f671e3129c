//! The scope's model view in MCP's shapes: `Tool` entries and the server `instructions`.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Map, Value};

use crate::code_mode::CodeModeExt;
use crate::code_mode::{CodeModeError, ModelView};
use crate::definition::ToolDefinition;
use crate::dialect::Dialect;
use crate::registry::{RUN_CODE, Registry, ToolSchema};
use crate::scope::AgentId;

/// What one scope shows an MCP client.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Listing {
    pub(crate) tools: Vec<Tool>,
    pub(crate) instructions: Option<String>,
}

impl Listing {
    pub(crate) fn of(
        registry: &Registry,
        scope: Option<&AgentId>,
    ) -> Result<Listing, CodeModeError> {
        let view = registry.model_view(scope)?;
        let tools = view
            .tools
            .iter()
            .map(|schema| mcp_tool(registry, scope, &view, schema))
            .collect();
        let instructions = view
            .sections
            .iter()
            .find(|section| section.id == "tools:code-only")
            .map(|section| section.text.clone());
        Ok(Listing {
            tools,
            instructions,
        })
    }
}

fn mcp_tool(
    registry: &Registry,
    scope: Option<&AgentId>,
    view: &ModelView,
    schema: &ToolSchema,
) -> Tool {
    let definition = registry.get(&schema.name, scope);
    let mut description = schema.description.clone();
    if schema.name == RUN_CODE {
        // MCP has no prompt sections: the SDK, and the runtime's note after it, travel in the
        // one place every host shows the model.
        for id in ["tools:sdk", "tools:runtime"] {
            if let Some(section) = view.sections.iter().find(|section| section.id == id) {
                description.push_str("\n\n");
                description.push_str(&section.text);
            }
        }
    }
    // The schema as the tool declares it (the model view's is in the Portable dialect, whose
    // inlining MCP does not want).
    let parameters = definition
        .as_ref()
        .map_or(&schema.parameters, |definition| definition.parameters());
    let input = object_schema(
        Dialect::Mcp
            .transform(parameters)
            .unwrap_or_else(|_| parameters.clone()),
    )
    .unwrap_or_else(empty_object_schema);
    let mut tool = Tool::new(schema.name.clone(), description, Arc::new(input));
    // Served as declared: a hint the tool did not declare is left out, so hosts assume the
    // specification's cautious defaults. Being safe to run concurrently is no read-only promise.
    let declared = definition
        .as_ref()
        .and_then(|def| def.annotations().cloned())
        .unwrap_or_default();
    // The title too: an MCP server's tool keeps its own (or none), ours the one `#[tool(title)]`
    // gives; hosts show the name where there is none.
    if let Some(title) = &declared.title {
        tool = tool.with_title(title.clone());
    }
    if declared != Default::default() {
        tool = tool.with_annotations(ToolAnnotations::from_raw(
            declared.title,
            declared.read_only_hint,
            declared.destructive_hint,
            declared.idempotent_hint,
            declared.open_world_hint,
        ));
    }
    if let Some(output) = definition.as_ref().and_then(output_schema) {
        tool = tool.with_raw_output_schema(Arc::new(output));
    }
    tool
}

/// The MCP `outputSchema` of a tool: MCP requires an object root, so tools whose output is not
/// an object (strings, lists, unit) publish none and answer with content blocks only.
pub(crate) fn output_schema(definition: &ToolDefinition) -> Option<JsonObject> {
    if !declares_object_output(definition) {
        return None;
    }
    let schema = definition.output_schema()?;
    object_schema(
        Dialect::Mcp
            .transform(schema)
            .unwrap_or_else(|_| schema.clone()),
    )
}

/// Whether the tool's `outputSchema` is listed (MCP takes object schemas only), so its results
/// carry `structuredContent`: the test of [`output_schema`] without converting the schema.
pub(crate) fn declares_object_output(definition: &ToolDefinition) -> bool {
    definition
        .output_schema()
        .is_some_and(|schema| schema.get("type").and_then(Value::as_str) == Some("object"))
}

fn object_schema(schema: Value) -> Option<JsonObject> {
    match schema {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

fn empty_object_schema() -> JsonObject {
    let mut map = Map::new();
    map.insert("type".to_owned(), Value::String("object".to_owned()));
    map.insert("properties".to_owned(), Value::Object(Map::new()));
    map
}
