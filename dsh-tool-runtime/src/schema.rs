//! Deriving parameters and output schemas with schemars.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use std::collections::HashSet;

use serde_json::{Map, Value};

/// The schemars settings every derived schema uses: JSON Schema 2020-12, describing what serde
/// reads (the parameters schema).
pub fn settings() -> SchemaSettings {
    SchemaSettings::draft2020_12().for_deserialize()
}

/// The settings of an output schema: what serde writes (`skip_serializing_if` fields are not
/// required, `serialize_with` types are described as written).
pub fn output_settings() -> SchemaSettings {
    SchemaSettings::draft2020_12().for_serialize()
}

/// Rewrites every optional property (one not in its object's `required`) whose schema admits
/// `null` only because it is an `Option<T>` to `T`'s own schema: optional means absent, never a
/// `null` type array. Walks iteratively, so depth is bounded by memory only.
pub fn strip_optional_nulls(schema: &mut Value) {
    let mut stack: Vec<&mut Value> = vec![schema];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                let required = required_names(map);
                if let Some(Value::Object(properties)) = map.get_mut("properties") {
                    for (name, property) in properties.iter_mut() {
                        if !required.contains(name) {
                            drop_null(property);
                        }
                    }
                }
                stack.extend(map.values_mut());
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            _ => {}
        }
    }
}

fn drop_null(property: &mut Value) {
    let Value::Object(map) = property else { return };
    if let Some(Value::Array(types)) = map.get("type")
        && types.len() == 2
        && types.contains(&Value::String("null".into()))
    {
        let other = types.iter().find(|ty| ty.as_str() != Some("null")).cloned();
        if let Some(other) = other {
            map.insert("type".into(), other);
        }
        // `null` among enum values, and a `null` default, came from the same Option.
        if let Some(Value::Array(values)) = map.get_mut("enum") {
            values.retain(|value| !value.is_null());
        }
        drop_null_default(map);
        return;
    }
    let branches = match map.get("anyOf").or_else(|| map.get("oneOf")) {
        Some(Value::Array(branches)) if branches.len() == 2 => branches.clone(),
        _ => return,
    };
    let is_null = |branch: &Value| {
        branch.get("type").and_then(Value::as_str) == Some("null")
            && branch.as_object().is_some_and(|b| b.len() == 1)
    };
    let Some(kept) = branches.iter().find(|branch| !is_null(branch)) else {
        return;
    };
    if !branches.iter().any(is_null) {
        return;
    }
    let Value::Object(kept) = kept.clone() else {
        return;
    };
    map.remove("anyOf");
    map.remove("oneOf");
    for (key, value) in kept {
        map.entry(key).or_insert(value);
    }
    drop_null_default(map);
}

/// A `"default": null` beside a type that no longer admits `null` would contradict it; an
/// absent optional property means the same.
fn drop_null_default(map: &mut Map<String, Value>) {
    if map.get("default") == Some(&Value::Null) {
        map.remove("default");
    }
}

/// The names listed in an object schema's `required`, ignoring malformed entries.
pub fn required_names(map: &Map<String, Value>) -> HashSet<String> {
    map.get("required")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The parameters schema of an argument struct: object root, `properties` always present, no
/// `$schema` or root `title`; `additionalProperties: false` when `deny_unknown` or when the type
/// refuses unknown keys itself (`#[serde(deny_unknown_fields)]`, which `#[tool]` and
/// `#[tool_type]` add unless `allow_unknown`).
pub fn parameters_schema<T: JsonSchema>(deny_unknown: bool) -> Value {
    let mut value = root_schema::<T>(settings());
    strip_optional_nulls(&mut value);
    if let Value::Object(root) = &mut value {
        root.entry("type")
            .or_insert_with(|| Value::String("object".into()));
        root.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if deny_unknown {
            root.insert("additionalProperties".into(), Value::Bool(false));
        }
        if root
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
        {
            root.remove("required");
        }
    }
    value
}

/// The output schema of a tool's output type, without `$schema` or root `title`; `()` gives
/// `{"type":"null"}`. `Option<T>` fields keep their `null`: serde writes `None` as `null`.
pub fn output_schema<T: JsonSchema>() -> Value {
    root_schema::<T>(output_settings())
}

fn root_schema<T: JsonSchema>(settings: SchemaSettings) -> Value {
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = Value::from(schema);
    if let Value::Object(root) = &mut value {
        root.remove("$schema");
        root.remove("title");
    }
    value
}
