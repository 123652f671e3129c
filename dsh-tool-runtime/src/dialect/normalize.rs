//! Arguments produced under a strict schema, brought back to the original schema's form.

use serde_json::Value;

use super::json_schema::required_names;
use super::keywords::resolve_local;

/// Most `$ref` hops followed from one node (a chain longer than this is a cycle of aliases).
const MAX_REF_HOPS: usize = 32;
/// Most schema nodes examined to find the branches that describe one value.
const MAX_CANDIDATES: usize = 64;

/// Removes `null` from every property that the *original* schema declares but does not list in
/// `required`, at every depth (nested objects, array items, `additionalProperties` values).
///
/// Under [`Dialect::OpenAiStrict`](super::Dialect::OpenAiStrict) every property is required and
/// an optional one is a nullable union, so the model sends `"x": null` for "no value"; the
/// original schema says "absent", which is what validation and deserialization expect
/// (`Option<T>` without `#[serde(default)]` accepts both, a plain `T` with a default only
/// absence).
///
/// `original_schema` is the schema before any dialect transform (local `$ref`s are followed;
/// in `anyOf`/`oneOf`/`allOf` the first object branch that names every non-null key of the value
/// is used). Keys the schema does not declare and non-null values are left alone. The walk is
/// iterative, so argument depth is bounded by memory only; the input is consumed and returned.
pub fn normalize_strict_arguments(original_schema: &Value, mut args: Value) -> Value {
    let mut stack: Vec<(&Value, &mut Value)> = vec![(original_schema, &mut args)];
    while let Some((schema, value)) = stack.pop() {
        if !(value.is_object() || value.is_array()) {
            continue;
        }
        let candidates = candidates(original_schema, schema);
        match value {
            Value::Object(fields) => {
                let Some(shape) = pick_object(&candidates, fields) else {
                    continue;
                };
                let properties = shape.get("properties").and_then(Value::as_object);
                let required = required_names(shape);
                fields.retain(|name, field| {
                    let optional = properties.is_some_and(|p| p.contains_key(name))
                        && !required.contains(name);
                    !(optional && field.is_null())
                });
                let additional = shape.get("additionalProperties").filter(|s| s.is_object());
                for (name, field) in fields.iter_mut() {
                    let child = properties.and_then(|p| p.get(name)).or(additional);
                    if let Some(child) = child {
                        stack.push((child, field));
                    }
                }
            }
            Value::Array(items) => {
                let Some(shape) = candidates
                    .iter()
                    .find(|c| c.contains_key("items") || c.contains_key("prefixItems"))
                else {
                    continue;
                };
                let prefix = shape.get("prefixItems").and_then(Value::as_array);
                let rest = shape.get("items").filter(|s| s.is_object());
                for (index, item) in items.iter_mut().enumerate() {
                    let child = prefix.and_then(|p| p.get(index)).or(rest);
                    if let Some(child) = child {
                        stack.push((child, item));
                    }
                }
            }
            _ => {}
        }
    }
    args
}

type Schema = serde_json::Map<String, Value>;

/// The schema objects that may describe a value at `schema`: the node itself and the branches
/// of its combinators, with `$ref`s followed; bounded.
fn candidates<'a>(root: &'a Value, schema: &'a Value) -> Vec<&'a Schema> {
    let mut out = Vec::new();
    let mut queue = vec![schema];
    let mut seen = 0;
    while let Some(mut node) = queue.pop() {
        seen += 1;
        if seen > MAX_CANDIDATES {
            break;
        }
        let mut hops = 0;
        while let Some(reference) = node.get("$ref").and_then(Value::as_str) {
            hops += 1;
            match resolve_local(root, reference) {
                Some(target) if hops <= MAX_REF_HOPS => node = target,
                _ => break,
            }
        }
        let Value::Object(map) = node else { continue };
        out.push(map);
        for keyword in ["allOf", "oneOf", "anyOf"] {
            if let Some(Value::Array(branches)) = map.get(keyword) {
                queue.extend(branches.iter().rev());
            }
        }
    }
    out
}

/// The candidate that declares every non-null key of the object, else the first that declares
/// properties at all.
fn pick_object<'a>(
    candidates: &[&'a Schema],
    fields: &serde_json::Map<String, Value>,
) -> Option<&'a Schema> {
    fn declared(schema: &Schema) -> Option<&Schema> {
        schema.get("properties").and_then(Value::as_object)
    }
    candidates
        .iter()
        .find(|c| {
            declared(c).is_some_and(|properties| {
                fields
                    .iter()
                    .all(|(name, field)| field.is_null() || properties.contains_key(name))
            })
        })
        .or_else(|| candidates.iter().find(|c| declared(c).is_some()))
        .copied()
}
