//! From a server's raw `tools/list` entry to the parts of a definition: name, description,
//! parameters and output schemas, annotations. Every check here is iterative, so a hostile
//! schema (thousands of nested `oneOf`/`items`) is refused for its tool instead of overflowing the
//! stack in the compiler or validator.

use serde_json::{Map, Value, json};

use std::ops::ControlFlow;

use crate::annotations::ToolAnnotations;
use crate::json::walk;
use crate::validate::SchemaValidator;

/// Deepest schema an MCP server may send for a tool; a deeper one is refused for its tool. Real
/// servers stay far below (the deepest in the corpus is under 20); `jsonschema` compiles
/// recursively, so the bound keeps it stack-safe.
pub const MAX_SCHEMA_DEPTH: usize = 64;

/// Dialects whose meta-schemas `jsonschema` carries; any other `$schema` is dropped before
/// compiling (never fetched) and the schema is read as 2020-12.
const KNOWN_DIALECTS: &[&str] = &[
    "http://json-schema.org/draft-07/schema",
    "https://json-schema.org/draft-07/schema",
    "http://json-schema.org/draft-06/schema",
    "http://json-schema.org/draft-04/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
];

/// One tool of a server's list, checked and ready to become a definition.
#[derive(Debug, Clone)]
pub(crate) struct McpToolSpec {
    /// The name on the wire.
    pub raw_name: String,
    pub description: String,
    /// The input schema as the server sent it (object root guaranteed).
    pub parameters: Value,
    /// The canonical output schema `{content, structuredContent?}`.
    pub output_schema: Value,
    pub annotations: Option<ToolAnnotations>,
}

/// Level of the deepest value in `value`, scalars included (the root is level 1); stops at the
/// first level past [`MAX_SCHEMA_DEPTH`].
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let _ = walk(value, |_, level| {
        deepest = deepest.max(level);
        if level > MAX_SCHEMA_DEPTH {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    deepest
}

/// Removes a root `$schema` naming a dialect `jsonschema` does not bundle (so nothing is fetched
/// and the compile does not fail on an unknown URI).
fn drop_unknown_dialect(schema: &mut Map<String, Value>) {
    let known = match schema.get("$schema") {
        None => return,
        Some(Value::String(uri)) => {
            let uri = uri.trim_end_matches('#');
            KNOWN_DIALECTS.contains(&uri)
        }
        Some(_) => false,
    };
    if !known {
        schema.remove("$schema");
    }
}

/// Checks a server schema is usable: an object, not too deep, and compiles.
fn usable_schema(schema: &Value, which: &str) -> Result<Map<String, Value>, String> {
    let Value::Object(map) = schema else {
        return Err(format!("{which} is not an object"));
    };
    if depth(schema) > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "{which} is nested deeper than {MAX_SCHEMA_DEPTH} levels"
        ));
    }
    let mut map = map.clone();
    drop_unknown_dialect(&mut map);
    SchemaValidator::new(&Value::Object(map.clone()))
        .map_err(|message| format!("{which} does not compile: {message}"))?;
    Ok(map)
}

/// The canonical output schema of an MCP tool: a closed object with `content` (an array of any
/// JSON) and `structuredContent` (the server's `outputSchema`, required when one is declared).
pub(crate) fn canonical_output_schema(structured: Option<Map<String, Value>>) -> Value {
    let mut root = Map::new();
    let mut required = vec![json!("content")];
    let structured = match structured {
        Some(mut schema) => {
            // The dialect applies to the whole canonical schema; a nested `$schema` is not
            // allowed outside a resource root.
            if let Some(dialect) = schema.remove("$schema") {
                root.insert("$schema".to_owned(), dialect);
            }
            // `#/$defs/…` references inside the output schema point at its root, which becomes
            // the canonical root: its definitions move up with it.
            for key in ["$defs", "definitions"] {
                if let Some(defs) = schema.remove(key) {
                    root.insert(key.to_owned(), defs);
                }
            }
            required.push(json!("structuredContent"));
            Value::Object(schema)
        }
        None => json!({}),
    };
    root.insert("type".to_owned(), json!("object"));
    root.insert(
        "properties".to_owned(),
        json!({"content": {"type": "array"}, "structuredContent": structured}),
    );
    root.insert("required".to_owned(), Value::Array(required));
    root.insert("additionalProperties".to_owned(), json!(false));
    Value::Object(root)
}

/// Reads one entry of `tools/list`.
///
/// # Errors
/// A message naming what is wrong (no name, missing or non-object `inputSchema`, a schema too
/// deep or that does not compile); the caller skips the tool with a warning.
pub(crate) fn parse_tool(raw: &Value) -> Result<McpToolSpec, String> {
    let Value::Object(tool) = raw else {
        return Err("tool entry is not an object".to_owned());
    };
    let raw_name = match tool.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        _ => return Err("tool has no name".to_owned()),
    };
    let described = |message: String| format!("tool \"{raw_name}\": {message}");
    let description = match tool.get("description") {
        Some(Value::String(text)) => text.clone(),
        _ => String::new(),
    };
    let input = tool
        .get("inputSchema")
        .ok_or_else(|| described("inputSchema is missing".to_owned()))?;
    let mut parameters = usable_schema(input, "inputSchema").map_err(described)?;
    match parameters.get("type") {
        // MCP requires an object schema; `{}` and `{"properties": …}` read as one.
        None => {
            parameters.insert("type".to_owned(), json!("object"));
        }
        Some(Value::String(kind)) if kind == "object" => {}
        Some(_) => return Err(described("inputSchema is not an object schema".to_owned())),
    }
    let structured = match tool.get("outputSchema") {
        None | Some(Value::Null) => None,
        Some(schema) => match usable_schema(schema, "outputSchema") {
            Ok(schema) => Some(schema),
            Err(message) => {
                // An unusable output schema falls back to unconstrained JSON.
                tracing::debug!(tool = %raw_name, "ignoring outputSchema: {message}");
                None
            }
        },
    };
    let output_schema = canonical_output_schema(structured);
    let mut annotations = tool
        .get("annotations")
        .and_then(|value| serde_json::from_value::<ToolAnnotations>(value.clone()).ok());
    // A tool's own `title` (MCP 2025-06-18) is shown before `annotations.title`: keep it with
    // the hints, so the tool is re-served under the title its server gave it.
    if let Some(title) = tool.get("title").and_then(Value::as_str) {
        annotations
            .get_or_insert_with(ToolAnnotations::default)
            .title = Some(title.to_owned());
    }
    Ok(McpToolSpec {
        raw_name,
        description,
        parameters: Value::Object(parameters),
        output_schema,
        annotations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nests by moving values into new maps (`json!` would serialize, recursively, the inner
    /// value).
    fn nested(levels: usize, keyword: &str) -> Value {
        let wrap = |key: &str, value: Value| {
            let mut map = Map::new();
            map.insert(key.to_owned(), value);
            Value::Object(map)
        };
        let mut schema = json!({"type": "string"});
        for _ in 0..levels {
            schema = match keyword {
                "oneOf" => wrap("oneOf", Value::Array(vec![schema])),
                _ => wrap("items", schema),
            };
        }
        wrap("properties", wrap("x", schema))
    }

    #[test]
    fn hostile_depth_is_an_error_for_the_tool() {
        for keyword in ["oneOf", "items"] {
            let mut tool = Map::new();
            tool.insert("name".to_owned(), json!("deep"));
            tool.insert("inputSchema".to_owned(), nested(5_000, keyword));
            let tool = Value::Object(tool);
            let err = parse_tool(&tool).unwrap_err();
            assert!(err.contains("nested deeper"), "{err}");
            // Dropping the 5,000-deep value must not overflow either: serde_json's drop is
            // recursive, so dismantle it.
            crate::json::dismantle(tool);
        }
    }

    #[test]
    fn missing_or_non_object_input_schema_is_refused() {
        assert!(parse_tool(&json!({"name": "a"})).is_err());
        assert!(parse_tool(&json!({"name": "a", "inputSchema": 3})).is_err());
        assert!(parse_tool(&json!({"name": "a", "inputSchema": {"type": "string"}})).is_err());
        assert!(parse_tool(&json!({"inputSchema": {"type": "object"}})).is_err());
        let bad = json!({"name": "a", "inputSchema": {"type": "object", "minProperties": "x"}});
        assert!(parse_tool(&bad).unwrap_err().contains("does not compile"));
    }

    #[test]
    fn draft_07_and_unknown_dialects_compile_without_fetching() {
        let draft7 = json!({"name": "a", "inputSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object", "properties": {"n": {"type": "number"}}}});
        let spec = parse_tool(&draft7).unwrap();
        assert_eq!(
            spec.parameters["$schema"],
            "http://json-schema.org/draft-07/schema#"
        );
        let unknown = json!({"name": "a", "inputSchema": {
            "$schema": "https://example.invalid/my-dialect", "type": "object"}});
        let spec = parse_tool(&unknown).unwrap();
        assert!(spec.parameters.get("$schema").is_none());
    }

    #[test]
    fn output_schema_and_annotations() {
        let tool = json!({"name": "t", "inputSchema": {},
            "outputSchema": {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]},
            "annotations": {"readOnlyHint": true, "title": "T"}});
        let spec = parse_tool(&tool).unwrap();
        assert_eq!(
            spec.output_schema["required"],
            json!(["content", "structuredContent"])
        );
        let annotations = spec.annotations.unwrap();
        assert_eq!(annotations.read_only_hint, Some(true));
        assert_eq!(annotations.title.as_deref(), Some("T"));
        let with_defs = json!({"name": "t", "inputSchema": {}, "outputSchema": {
            "type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"type": "string"}}}});
        let spec = parse_tool(&with_defs).unwrap();
        assert_eq!(
            spec.output_schema["$defs"],
            json!({"A": {"type": "string"}})
        );
        let validator = SchemaValidator::new(&spec.output_schema).unwrap();
        assert!(validator.is_valid(&json!({"content": [], "structuredContent": {"a": "x"}})));
        assert!(!validator.is_valid(&json!({"content": [], "structuredContent": {"a": 1}})));
        let unusable = json!({"name": "t", "inputSchema": {}, "outputSchema": "nope"});
        assert_eq!(
            parse_tool(&unusable).unwrap().output_schema["required"],
            json!(["content"])
        );
    }
}
