//! [`Dialect::Gemini`](super::Dialect::Gemini): Gemini `functionDeclarations[].parameters`, an
//! OpenAPI 3.0 Schema subset (Gemini API `Schema` reference).
//!
//! The expansion already inlined every `$ref` and refused recursion; this pass keeps only the
//! fields Gemini's `Schema` has, writes nullability as `nullable: true`, turns `const` into a
//! one-value `enum`, and leaves `anyOf` alone on its node (Gemini 3 via Vertex rejects siblings).

use serde_json::{Map, Value};

use super::Dialect;
use super::error::{DialectError, DialectErrorKind, Path};
use super::json_schema::is_null_branch;
use super::keywords::{
    append_notes, children_mut, combinators, is_annotation, json_type, split_type_list,
    type_of_values, types_of,
};

/// The fields of Gemini's `Schema` object.
const SUPPORTED: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "items",
    "minItems",
    "maxItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "anyOf",
    "default",
    "example",
    "propertyOrdering",
];

/// Keywords Gemini rejects and that carry nothing for the model: dropped, not noted
/// (`additionalProperties` only when it is a boolean).
const DROPPED: &[&str] = &["$schema", "$comment"];

/// Rewrites the expanded schema for Gemini, or names the first node it cannot express.
pub(super) fn gemini(root: &mut Value) -> Result<(), DialectError> {
    rewrite(root, &mut Path::default())
}

fn rewrite(node: &mut Value, path: &mut Path) -> Result<(), DialectError> {
    let fail = |path: &Path, kind| path.error(Dialect::Gemini, kind);
    let map = match node {
        Value::Object(map) => map,
        Value::Bool(true) => {
            *node = Value::Object(Map::new());
            return Ok(());
        }
        Value::Bool(false) => return Err(fail(path, DialectErrorKind::Unsatisfiable)),
        other => {
            let found = json_type(other);
            return Err(fail(path, DialectErrorKind::NotASchema { found }));
        }
    };
    let mut notes = Map::new();
    // A map's value schema still tells the model what the values are.
    if let Some(values @ Value::Object(_)) = map.shift_remove("additionalProperties") {
        notes.insert("additionalProperties".to_owned(), values);
    }
    for keyword in DROPPED {
        map.shift_remove(*keyword);
    }
    combinators(map, &mut notes);
    const_to_enum(map, &mut notes);
    string_enum(map, &mut notes);
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && values.iter().any(|value| value == "")
    {
        // Gemini refuses an empty-string enum value (400); absent is the way to say "none".
        values.retain(|value| value != "");
        if values.is_empty() {
            path.push("enum");
            return Err(fail(
                path,
                DialectErrorKind::InvalidKeyword {
                    keyword: "enum".to_owned(),
                    reason: "holds only the empty string, which Gemini refuses",
                },
            ));
        }
    }
    if map.contains_key("enum") && !map.contains_key("type") {
        map.insert("type".to_owned(), Value::String("string".to_owned()));
    }
    let types = types_of(map).map_err(|kind| fail(path, kind))?;
    if let Some(types) = &types {
        nullable_types(map, types, &mut notes);
    }
    string_format(map, &mut notes);
    if types_of(map)
        .ok()
        .flatten()
        .is_some_and(|types| types.iter().any(|ty| ty == "array"))
        && !map.contains_key("items")
    {
        // Gemini requires `items` on an array; `{}` admits any item, as the absent keyword did.
        map.insert("items".to_owned(), Value::Object(Map::new()));
    }
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        if !SUPPORTED.contains(&key.as_str())
            && let Some(value) = map.shift_remove(&key)
        {
            notes.insert(key, value);
        }
    }
    append_notes(map, notes);
    for (keyword, name, child) in children_mut(map) {
        path.push(&keyword);
        if let Some(name) = &name {
            path.push(name);
        }
        let result = rewrite(child, path);
        if name.is_some() {
            path.pop();
        }
        path.pop();
        result?;
    }
    union_alone(map);
    Ok(())
}

/// String formats Gemini's `Schema` accepts; others (`uri`, `uuid`, `email`, which real MCP
/// servers send) are a 400 error and move into the description.
const STRING_FORMATS: &[&str] = &["enum", "date-time"];

/// Keeps `format` only where Gemini accepts it: `enum`/`date-time` on strings,
/// `float`/`double`/`int32`/`int64` never survive (every dialect drops them first).
fn string_format(map: &mut Map<String, Value>, notes: &mut Map<String, Value>) {
    let Some(format) = map.get("format") else {
        return;
    };
    let is_string = map.get("type").and_then(Value::as_str) == Some("string");
    let accepted = is_string && format.as_str().is_some_and(|f| STRING_FORMATS.contains(&f));
    if !accepted && let Some(format) = map.shift_remove("format") {
        notes.insert("format".to_owned(), format);
    }
}

/// `const: v` → `enum: [v]` (Gemini has no `const`), with the value's type when none is given.
fn const_to_enum(map: &mut Map<String, Value>, notes: &mut Map<String, Value>) {
    let Some(value) = map.shift_remove("const") else {
        return;
    };
    if map.contains_key("enum") {
        notes.insert("const".to_owned(), value);
        return;
    }
    if !map.contains_key("type")
        && let Some(ty) = type_of_values([&value])
    {
        map.insert("type".to_owned(), ty);
    }
    map.insert("enum".to_owned(), Value::Array(vec![value]));
}

/// Gemini enums hold strings: `null` among the values becomes `nullable: true`; other
/// non-string values move the whole `enum` into the description.
fn string_enum(map: &mut Map<String, Value>, notes: &mut Map<String, Value>) {
    let Some(Value::Array(values)) = map.get_mut("enum") else {
        return;
    };
    if values.iter().any(Value::is_null) {
        values.retain(|value| !value.is_null());
        map.insert("nullable".to_owned(), Value::Bool(true));
    }
    let all_strings = map
        .get("enum")
        .and_then(Value::as_array)
        .is_some_and(|values| values.iter().all(Value::is_string));
    if !all_strings && let Some(values) = map.shift_remove("enum") {
        notes.insert("enum".to_owned(), values);
    }
}

/// `type` lists: `null` becomes `nullable: true`, one remaining type stays scalar, several
/// become `anyOf` branches (or a note when the node already has an `anyOf`).
fn nullable_types(map: &mut Map<String, Value>, types: &[String], notes: &mut Map<String, Value>) {
    if !map.get("type").is_some_and(Value::is_array) {
        return;
    }
    let rest: Vec<String> = types.iter().filter(|ty| *ty != "null").cloned().collect();
    if rest.len() < types.len() {
        map.insert("nullable".to_owned(), Value::Bool(true));
    }
    match rest.as_slice() {
        [] => {
            map.insert("type".to_owned(), Value::String("null".to_owned()));
        }
        [one] => {
            map.insert("type".to_owned(), Value::String(one.clone()));
        }
        _ if map.contains_key("anyOf") => {
            if let Some(ty) = map.shift_remove("type") {
                notes.insert("type".to_owned(), ty);
            }
        }
        many => {
            let branches = split_type_list(map, many);
            map.insert("anyOf".to_owned(), Value::Array(branches));
        }
    }
}

/// Nested unions are flattened, null branches of `anyOf` become `nullable: true`, a single
/// branch left is merged into the node; otherwise the node's other fields are copied into every
/// branch so `anyOf` stands alone.
fn union_alone(map: &mut Map<String, Value>) {
    let Some(Value::Array(mut branches)) = map.shift_remove("anyOf") else {
        return;
    };
    // A branch that is itself only an `anyOf` (already alone on its node) is spliced in.
    branches = branches
        .into_iter()
        .flat_map(|branch| match branch {
            Value::Object(mut inner) if inner.len() == 1 && inner.contains_key("anyOf") => {
                match inner.shift_remove("anyOf") {
                    Some(Value::Array(nested)) => nested,
                    Some(other) => vec![other],
                    None => Vec::new(),
                }
            }
            other => vec![other],
        })
        .collect();
    let before = branches.len();
    branches.retain(|branch| !is_null_branch(branch));
    if branches.len() < before {
        map.insert("nullable".to_owned(), Value::Bool(true));
    }
    match branches.len() {
        0 => {
            map.insert("type".to_owned(), Value::String("null".to_owned()));
        }
        1 => {
            if let Some(Value::Object(branch)) = branches.pop() {
                for (key, value) in branch {
                    if !(is_annotation(&key) && map.contains_key(&key)) {
                        map.insert(key, value);
                    }
                }
            }
        }
        _ => {
            let siblings = std::mem::take(map);
            for branch in &mut branches {
                if let Value::Object(branch) = branch {
                    for (key, value) in &siblings {
                        // The node's own description (the property's) stays readable in
                        // every branch, ahead of the branch's.
                        if key == "description"
                            && let (Some(outer), Some(Value::String(inner))) =
                                (value.as_str(), branch.get_mut("description"))
                        {
                            *inner = format!("{outer}\n\n{inner}");
                            continue;
                        }
                        branch.entry(key.clone()).or_insert_with(|| value.clone());
                    }
                }
            }
            map.insert("anyOf".to_owned(), Value::Array(branches));
        }
    }
}
