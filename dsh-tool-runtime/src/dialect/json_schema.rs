//! The JSON Schema 2020-12 dialects that rewrite: [`Dialect::Portable`](super::Dialect::Portable)
//! and [`Dialect::Anthropic`](super::Dialect::Anthropic) ([`Dialect::Mcp`](super::Dialect::Mcp)
//! serves the schema as written).
//! Both passes run on the expanded tree, whose depth is bounded by [`super::MAX_DEPTH`].

use serde_json::{Map, Value};

use super::keywords::{children_mut, split_type_list, types_of};

/// Portable: no `type` lists anywhere, `Option<T>` as "absent from `required`", `properties`
/// on every object node.
pub(super) fn portable(node: &mut Value) {
    let Value::Object(map) = node else { return };
    openapi_nullable(map);
    let required = required_names(map);
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if !required.contains(name)
                && let Value::Object(property) = property
            {
                openapi_nullable(property);
                drop_null(property);
            }
        }
    }
    if let Ok(Some(types)) = types_of(map) {
        match types.as_slice() {
            [] => {
                map.shift_remove("type");
            }
            [one] => {
                map.insert("type".to_owned(), Value::String(one.clone()));
            }
            many => {
                let branches = split_type_list(map, many);
                if let Some(existing) = map.shift_remove("anyOf") {
                    let mut wrapped = Map::new();
                    wrapped.insert("anyOf".to_owned(), existing);
                    push_all_of(map, Value::Object(wrapped));
                }
                map.insert("anyOf".to_owned(), Value::Array(branches));
            }
        }
    }
    if map.get("type").and_then(Value::as_str) == Some("object") {
        map.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    for (_, _, child) in children_mut(map) {
        portable(child);
    }
}

/// Anthropic: standard 2020-12, so only the OpenAPI `nullable` keyword (which breaks
/// some JSON Schema clients) is rewritten.
pub(super) fn standard(node: &mut Value) {
    let Value::Object(map) = node else { return };
    openapi_nullable(map);
    for (_, _, child) in children_mut(map) {
        standard(child);
    }
}

fn push_all_of(map: &mut Map<String, Value>, schema: Value) {
    match map.get_mut("allOf") {
        Some(Value::Array(all)) => all.push(schema),
        _ => {
            map.insert("allOf".to_owned(), Value::Array(vec![schema]));
        }
    }
}

pub(super) use crate::schema::required_names;

/// OpenAPI 3.0 `nullable: true` → JSON Schema: `null` added to `type` (and to `enum`), or a
/// `{"type":"null"}` branch in `anyOf`. `nullable: false` is the default and is just dropped.
pub(super) fn openapi_nullable(map: &mut Map<String, Value>) {
    if map.shift_remove("nullable") != Some(Value::Bool(true)) {
        return;
    }
    if admits_null(map) {
        return;
    }
    let null = Value::String("null".to_owned());
    match map.get_mut("type") {
        Some(Value::String(ty)) => {
            let ty = Value::String(std::mem::take(ty));
            map.insert("type".to_owned(), Value::Array(vec![ty, null]));
        }
        Some(Value::Array(types)) => types.push(null),
        _ => {
            if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
                let mut branch = Map::new();
                branch.insert("type".to_owned(), null);
                branches.push(Value::Object(branch));
            }
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.push(Value::Null);
    }
}

/// Whether a node already accepts `null` through `type`, `enum`, `const` or a null branch.
pub(super) fn admits_null(map: &Map<String, Value>) -> bool {
    let null_type = |ty: &Value| match ty {
        Value::String(ty) => ty == "null",
        Value::Array(types) => types.iter().any(|ty| ty == "null"),
        _ => false,
    };
    if let Some(ty) = map.get("type") {
        return null_type(ty);
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return values.contains(&Value::Null);
    }
    if let Some(value) = map.get("const") {
        return value.is_null();
    }
    ["anyOf", "oneOf"].iter().any(|keyword| {
        map.get(*keyword)
            .and_then(Value::as_array)
            .is_some_and(|branches| branches.iter().any(is_null_branch))
    })
}

/// `{"type":"null"}`, possibly with annotations.
pub(super) fn is_null_branch(branch: &Value) -> bool {
    branch.get("type").and_then(Value::as_str) == Some("null")
}

/// Removes `null` from an optional property: for an optional property absence is the way to
/// say "no value", so `Option<T>` keeps `T`'s schema only (`type` list, `enum` entry, null
/// `anyOf`/`oneOf` branch and `default: null` go).
pub(super) fn drop_null(map: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = map.get_mut("type")
        && types.iter().any(|ty| ty == "null")
    {
        types.retain(|ty| ty != "null");
        if let [one] = types.as_slice() {
            let one = one.clone();
            map.insert("type".to_owned(), one);
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|value| !value.is_null());
    }
    if map.get("default") == Some(&Value::Null) {
        map.shift_remove("default");
    }
    for keyword in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = map.get_mut(keyword) else {
            continue;
        };
        if !branches.iter().any(is_null_branch) {
            continue;
        }
        branches.retain(|branch| !is_null_branch(branch));
        if branches.len() == 1
            && let Some(Value::Object(kept)) = branches.pop()
        {
            map.shift_remove(keyword);
            for (key, value) in kept {
                map.entry(key).or_insert(value);
            }
        }
    }
}
