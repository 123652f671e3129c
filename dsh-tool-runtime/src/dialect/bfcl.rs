//! BFCL's function-definition dialect mapped to JSON Schema.

use serde_json::{Map, Value};

/// Converts a BFCL (Berkeley Function Calling Leaderboard) `parameters` object to JSON Schema
/// 2020-12, with the type mapping of BFCL's own converter (`GORILLA_TO_OPENAPI` in
/// `bfcl_eval/constants/type_mappings.py`):
///
/// | BFCL `type` | JSON Schema `type` |
/// |---|---|
/// | `dict`, `object`, `HashMap`, `Hashtable` | `object` |
/// | `array`, `list`, `tuple`, `ArrayList`, `Array`, `Queue`, `Stack` | `array` |
/// | `integer`, `byte`, `short`, `long`, `Bigint` | `integer` |
/// | `number`, `float`, `double` | `number` |
/// | `boolean`, `bool`, `Boolean` | `boolean` |
/// | `string`, `String`, `char`, `any`, `Any`, anything else | `string` |
///
/// The non-standard `"optional": true` keyword is removed (such a property is already absent
/// from `required`), as is a non-list `required` inside a property. Everything else (descriptions,
/// `enum`, `default`, `required` lists) is kept. Nested `properties`, `items` and
/// `additionalProperties` are converted too, iteratively. The input is not modified.
pub fn bfcl_to_json_schema(parameters: &Value) -> Value {
    let mut out = parameters.clone();
    let mut stack: Vec<&mut Value> = vec![&mut out];
    while let Some(node) = stack.pop() {
        let Value::Object(map) = node else { continue };
        if let Some(Value::String(ty)) = map.get("type") {
            let mapped = json_schema_type(ty);
            map.insert("type".to_owned(), Value::String(mapped.to_owned()));
        }
        map.shift_remove("optional");
        if map
            .get("required")
            .is_some_and(|required| !required.is_array())
        {
            map.shift_remove("required");
        }
        for (keyword, value) in map.iter_mut() {
            match (keyword.as_str(), value) {
                ("properties", Value::Object(properties)) => stack.extend(properties.values_mut()),
                ("items" | "additionalProperties", child @ Value::Object(_)) => stack.push(child),
                _ => {}
            }
        }
    }
    if let Value::Object(root) = &mut out {
        root.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    out
}

fn json_schema_type(bfcl: &str) -> &'static str {
    match bfcl {
        "dict" | "object" | "HashMap" | "Hashtable" => "object",
        "array" | "list" | "tuple" | "ArrayList" | "Array" | "Queue" | "Stack" => "array",
        "integer" | "byte" | "short" | "long" | "Bigint" => "integer",
        "number" | "float" | "double" => "number",
        "boolean" | "bool" | "Boolean" => "boolean",
        _ => "string",
    }
}
