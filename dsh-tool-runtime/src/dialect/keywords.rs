//! Where subschemas live in a JSON Schema object, and small helpers every dialect pass shares.
//!
//! Only keyword positions listed here are walked as schemas: a property *named* `$schema` or
//! `$ref` inside `properties` is a name, and `enum`/`const`/`default` values are data.

use serde_json::{Map, Value};

use super::error::{DialectErrorKind, Path};

/// How a keyword holds subschemas (JSON Schema 2020-12 applicators, plus draft-07 spellings
/// `definitions`, `dependencies`, `additionalItems` and list-form `items`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holds {
    /// The value is one schema.
    One,
    /// The value maps names to schemas.
    Map,
    /// The value is a list of schemas.
    List,
}

pub(crate) fn holds(keyword: &str, value: &Value) -> Option<Holds> {
    match keyword {
        "items" if value.is_array() => Some(Holds::List),
        "items"
        | "additionalProperties"
        | "additionalItems"
        | "unevaluatedItems"
        | "unevaluatedProperties"
        | "not"
        | "if"
        | "then"
        | "else"
        | "contains"
        | "propertyNames"
        | "contentSchema" => Some(Holds::One),
        "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas"
        | "dependencies" => Some(Holds::Map),
        "allOf" | "anyOf" | "oneOf" | "prefixItems" => Some(Holds::List),
        _ => None,
    }
}

/// Keywords that describe rather than constrain; they may sit next to anything and the node's
/// own value wins when two schemas are merged.
pub(crate) const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
];

pub(crate) fn is_annotation(keyword: &str) -> bool {
    ANNOTATIONS.contains(&keyword)
}

/// Every direct subschema of a schema object, with the one or two path segments that lead to it.
/// Entries of map and list keywords that are not objects or booleans (draft-07 `dependencies`
/// arrays) are data and are skipped.
pub(crate) fn children_mut(
    map: &mut Map<String, Value>,
) -> Vec<(String, Option<String>, &mut Value)> {
    let mut out = Vec::new();
    for (keyword, value) in map.iter_mut() {
        match holds(keyword, value) {
            Some(Holds::One) => out.push((keyword.clone(), None, value)),
            Some(Holds::Map) => {
                if let Value::Object(entries) = value {
                    for (name, child) in entries.iter_mut() {
                        if child.is_object() || child.is_boolean() {
                            out.push((keyword.clone(), Some(name.clone()), child));
                        }
                    }
                }
            }
            Some(Holds::List) => {
                if let Value::Array(entries) = value {
                    for (index, child) in entries.iter_mut().enumerate() {
                        out.push((keyword.clone(), Some(index.to_string()), child));
                    }
                }
            }
            None => {}
        }
    }
    out
}

/// Like [`children_mut`], read-only, skipping `$defs`/`definitions` (they are only evaluated
/// through a `$ref`, so they are not "live" parts of the node).
pub(crate) fn live_children(map: &Map<String, Value>) -> Vec<&Value> {
    let mut out = Vec::new();
    for (keyword, value) in map {
        if keyword == "$defs" || keyword == "definitions" {
            continue;
        }
        match (holds(keyword, value), value) {
            (Some(Holds::One), _) => out.push(value),
            (Some(Holds::Map), Value::Object(entries)) => out.extend(entries.values()),
            (Some(Holds::List), Value::Array(entries)) => out.extend(entries.iter()),
            _ => {}
        }
    }
    out
}

/// The depth of the deepest node, iteratively; `Err` with the pointer of the first node that is
/// deeper than `limit` JSON levels.
pub(crate) fn check_depth(value: &Value, limit: usize) -> Result<(), (Path, DialectErrorKind)> {
    let mut path: Vec<String> = Vec::new();
    let mut stack: Vec<(&Value, usize, Option<String>)> = vec![(value, 0, None)];
    while let Some((node, depth, segment)) = stack.pop() {
        path.truncate(depth.saturating_sub(1));
        if let Some(segment) = segment {
            path.push(segment);
        }
        if depth > limit {
            let mut at = Path::default();
            for segment in &path {
                at.push(segment);
            }
            return Err((at, DialectErrorKind::TooDeep { limit }));
        }
        match node {
            Value::Object(map) => {
                for (key, child) in map.iter().rev() {
                    stack.push((child, depth + 1, Some(key.clone())));
                }
            }
            Value::Array(items) => {
                for (index, child) in items.iter().enumerate().rev() {
                    stack.push((child, depth + 1, Some(index.to_string())));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The JSON type name of a value, as JSON Schema's `type` spells it (`integer` for integral
/// numbers).
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The `type` of the smallest schema that admits every value (`integer` folds into `number`);
/// `None` for no values.
pub(crate) fn type_of_values<'a>(values: impl IntoIterator<Item = &'a Value>) -> Option<Value> {
    let mut types: Vec<&'static str> = Vec::new();
    for value in values {
        let ty = json_type(value);
        if !types.contains(&ty) {
            types.push(ty);
        }
    }
    if types.contains(&"number") {
        types.retain(|ty| *ty != "integer");
    }
    match types.as_slice() {
        [] => None,
        [one] => Some(Value::String((*one).to_owned())),
        many => Some(Value::Array(
            many.iter()
                .map(|ty| Value::String((*ty).to_owned()))
                .collect(),
        )),
    }
}

/// The entries of `type` (a string or a list of strings); `None` when absent, `Err` when
/// malformed.
pub(crate) fn types_of(map: &Map<String, Value>) -> Result<Option<Vec<String>>, DialectErrorKind> {
    match map.get("type") {
        None => Ok(None),
        Some(Value::String(ty)) => Ok(Some(vec![ty.clone()])),
        Some(Value::Array(list)) => list
            .iter()
            .map(|ty| {
                ty.as_str()
                    .map(str::to_owned)
                    .ok_or(DialectErrorKind::NotASchema {
                        found: json_type(ty),
                    })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(DialectErrorKind::NotASchema {
            found: json_type(other),
        }),
    }
}

/// Renames a keyword in place, keeping its position (output order is part of determinism).
pub(crate) fn rename_key(map: &mut Map<String, Value>, from: &str, to: &str) {
    let old = std::mem::take(map);
    *map = old
        .into_iter()
        .map(|(key, value)| {
            if key == from {
                (to.to_owned(), value)
            } else {
                (key, value)
            }
        })
        .collect();
}

/// Puts `key: value` first in the map (providers show `type` first; purely cosmetic but stable).
pub(crate) fn insert_first(map: &mut Map<String, Value>, key: &str, value: Value) {
    map.shift_insert(0, key.to_owned(), value);
}

/// Appends keywords a dialect cannot carry to the node's `description`, as
/// `"<description>\n\n{minimum: 1, format: \"uri\"}"` — the form Anthropic's SDK uses, so the
/// model still reads the constraint even though the provider does not enforce it.
pub(crate) fn append_notes(map: &mut Map<String, Value>, notes: Map<String, Value>) {
    if notes.is_empty() {
        return;
    }
    let rendered: Vec<String> = notes
        .iter()
        .map(|(key, value)| format!("{key}: {value}"))
        .collect();
    let note = format!("{{{}}}", rendered.join(", "));
    let text = match map.get("description").and_then(Value::as_str) {
        Some(existing) if !existing.is_empty() => format!("{existing}\n\n{note}"),
        _ => note,
    };
    map.insert("description".to_owned(), Value::String(text));
}

/// Which type family a type-specific keyword belongs to, for splitting a `type` list into one
/// branch per type (JSON Schema 2020-12 validation vocabulary §6).
fn family(keyword: &str) -> Option<&'static str> {
    match keyword {
        "properties"
        | "required"
        | "additionalProperties"
        | "patternProperties"
        | "propertyNames"
        | "minProperties"
        | "maxProperties"
        | "dependentRequired"
        | "dependentSchemas"
        | "unevaluatedProperties" => Some("object"),
        "items" | "prefixItems" | "contains" | "minItems" | "maxItems" | "uniqueItems"
        | "minContains" | "maxContains" | "unevaluatedItems" => Some("array"),
        "minLength" | "maxLength" | "pattern" | "format" | "contentEncoding"
        | "contentMediaType" | "contentSchema" => Some("string"),
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => {
            Some("number")
        }
        _ => None,
    }
}

/// Replaces `type: [a, b, …]` by `anyOf: [{type: a, …}, {type: b, …}]`, moving each
/// type-specific keyword into the branch of its type (numeric ones into both `integer` and
/// `number`). Equivalent in 2020-12, and needed where type lists are not accepted.
pub(crate) fn split_type_list(map: &mut Map<String, Value>, types: &[String]) -> Vec<Value> {
    map.shift_remove("type");
    let mut branches: Vec<Map<String, Value>> = types
        .iter()
        .map(|ty| {
            let mut branch = Map::new();
            branch.insert("type".to_owned(), Value::String(ty.clone()));
            branch
        })
        .collect();
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let Some(family) = family(&key) else { continue };
        let Some(value) = map.shift_remove(&key) else {
            continue;
        };
        for (ty, branch) in types.iter().zip(branches.iter_mut()) {
            let matches = ty == family || (family == "number" && ty == "integer");
            if matches {
                branch.insert(key.clone(), value.clone());
            }
        }
    }
    branches.into_iter().map(Value::Object).collect()
}

/// Resolves a local reference (`#`, `#/json/pointer`, percent-encoded or not, or a plain-name
/// `#anchor`) against `root`. External references give `None`, and so does an anchor that is
/// declared twice or inside an embedded resource (a subschema with its own `$id`), where
/// resolving it against the root could pick the wrong schema.
pub(crate) fn resolve_local<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let fragment = reference.strip_prefix('#')?;
    if fragment.is_empty() {
        return Some(root);
    }
    if !fragment.starts_with('/') {
        return resolve_anchor(root, &percent_decode(fragment)?);
    }
    root.pointer(&percent_decode(fragment)?)
}

/// The one schema of the document declaring `"$anchor": name`; iterative.
fn resolve_anchor<'a>(root: &'a Value, name: &str) -> Option<&'a Value> {
    let mut found = None;
    let mut stack = vec![(root, true)];
    while let Some((node, is_root)) = stack.pop() {
        match node {
            Value::Object(map) => {
                if !is_root && map.contains_key("$id") {
                    return None;
                }
                if map.get("$anchor").and_then(Value::as_str) == Some(name) {
                    if found.is_some() {
                        return None;
                    }
                    found = Some(node);
                }
                stack.extend(map.values().map(|child| (child, false)));
            }
            Value::Array(items) => stack.extend(items.iter().map(|child| (child, false))),
            _ => {}
        }
    }
    found
}

fn percent_decode(text: &str) -> Option<String> {
    if !text.contains('%') {
        return Some(text.to_owned());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = text.get(index + 1..index + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The last segment of a JSON Pointer fragment, unescaped: the name a kept definition gets.
pub(crate) fn last_segment(reference: &str) -> String {
    let decoded = percent_decode(reference).unwrap_or_else(|| reference.to_owned());
    decoded
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .replace("~1", "/")
        .replace("~0", "~")
}

/// A one-branch `allOf` merged into its node when nothing conflicts, then `oneOf` → `anyOf`
/// (both dialects that call this treat `oneOf` as `anyOf`); what cannot be rewritten goes to the
/// notes.
pub(crate) fn combinators(map: &mut Map<String, Value>, notes: &mut Map<String, Value>) {
    if let Some(all_of) = map.shift_remove("allOf") {
        merge_all_of(map, all_of, notes);
    }
    if map.contains_key("oneOf") {
        if map.contains_key("anyOf") {
            if let Some(one_of) = map.shift_remove("oneOf") {
                notes.insert("oneOf".to_owned(), one_of);
            }
        } else {
            rename_key(map, "oneOf", "anyOf");
        }
    }
}

fn merge_all_of(map: &mut Map<String, Value>, all_of: Value, notes: &mut Map<String, Value>) {
    let single = match &all_of {
        Value::Array(branches) if branches.len() == 1 => branches[0].as_object(),
        _ => None,
    };
    match single {
        Some(branch)
            if !branch
                .keys()
                .any(|key| !is_annotation(key) && map.contains_key(key)) =>
        {
            for (key, value) in branch {
                map.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
        _ => {
            notes.insert("allOf".to_owned(), all_of);
        }
    }
}

const TYPE_NAMES: &[&str] = &[
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Checks the keywords every dialect relies on against JSON Schema 2020-12's rules for their
/// values (draft-07's array form of `items` is accepted), iteratively. Errors carry the pointer of
/// the offending keyword.
pub(crate) fn check_keywords(schema: &Value) -> Result<(), (Path, DialectErrorKind)> {
    let mut stack: Vec<(&Value, Vec<String>)> = vec![(schema, Vec::new())];
    while let Some((node, path)) = stack.pop() {
        let Value::Object(map) = node else {
            if node.is_boolean() {
                continue;
            }
            let (keyword, parent) = match path.split_last() {
                Some((last, rest)) => (last.clone(), rest.to_vec()),
                None => continue,
            };
            return Err((
                at(&parent, &keyword),
                DialectErrorKind::NotASchema {
                    found: json_type(node),
                },
            ));
        };
        let child = |key: &str| {
            let mut next = path.clone();
            next.push(key.to_owned());
            next
        };
        for (key, value) in map {
            let bad = |reason| Err((at(&path, key), invalid(key, reason)));
            match key.as_str() {
                "type" => {
                    let ok = match value {
                        Value::String(name) => TYPE_NAMES.contains(&name.as_str()),
                        Value::Array(names) => {
                            !names.is_empty()
                                && names
                                    .iter()
                                    .all(|n| n.as_str().is_some_and(|n| TYPE_NAMES.contains(&n)))
                        }
                        _ => false,
                    };
                    if !ok {
                        return bad(
                            "must be a type name (object, array, string, number, integer, boolean, null) or a list of them",
                        );
                    }
                }
                "required"
                    if !value
                        .as_array()
                        .is_some_and(|names| names.iter().all(Value::is_string)) =>
                {
                    return bad("must be a list of property names");
                }
                "enum" if value.as_array().is_none_or(|values| values.is_empty()) => {
                    return bad("must be a non-empty list of values");
                }
                "$ref" if !value.is_string() => return bad("must be a string"),
                // draft-07 `dependencies` may map to lists of names: data, not schemas.
                "dependencies" => {}
                _ => match (holds(key, value), value) {
                    (Some(Holds::One), _) => stack.push((value, child(key))),
                    (Some(Holds::Map), Value::Object(members)) => {
                        for (name, member) in members {
                            let mut next = child(key);
                            next.push(name.clone());
                            stack.push((member, next));
                        }
                    }
                    (Some(Holds::Map), _) => {
                        return bad("must be an object mapping names to schemas");
                    }
                    (Some(Holds::List), Value::Array(members))
                        if !members.is_empty() || key == "items" =>
                    {
                        for (index, member) in members.iter().enumerate() {
                            let mut next = child(key);
                            next.push(index.to_string());
                            stack.push((member, next));
                        }
                    }
                    (Some(Holds::List), _) => return bad("must be a non-empty list of schemas"),
                    (None, _) => {}
                },
            }
        }
    }
    Ok(())
}

fn at(parent: &[String], keyword: &str) -> Path {
    let mut path = Path::default();
    for segment in parent {
        path.push(segment);
    }
    path.push(keyword);
    path
}

fn invalid(keyword: &str, reason: &'static str) -> DialectErrorKind {
    DialectErrorKind::InvalidKeyword {
        keyword: keyword.to_owned(),
        reason,
    }
}

/// `format` values schemars writes for Rust number widths that no JSON Schema draft defines
/// (the width's bounds are already `minimum`/`maximum`); every dialect drops them.
const NON_STANDARD_FORMATS: &[&str] = &[
    "int8", "int16", "int32", "int64", "int128", "int", "uint8", "uint16", "uint32", "uint64",
    "uint128", "uint", "float", "double",
];

/// Drops the non-standard `format`s of every schema node (annotations in 2020-12, so the schema
/// means the same). Recursive over schema positions; the expanded tree is at most
/// [`super::MAX_DEPTH`] deep.
pub(crate) fn drop_non_standard_formats(node: &mut Value) {
    let Value::Object(map) = node else { return };
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|format| NON_STANDARD_FORMATS.contains(&format))
    {
        map.shift_remove("format");
    }
    for (_, _, child) in children_mut(map) {
        drop_non_standard_formats(child);
    }
}

/// A `oneOf`/`anyOf` whose every branch is a `const` (schemars writes documented enum variants
/// so) becomes the `enum` it is, with the values' `type`; the branches' descriptions are kept in
/// the node's description (`- "glob": Shell globs.`). Same meaning when the values are
/// distinct, which is checked.
pub(crate) fn const_union_to_enum(map: &mut Map<String, Value>) {
    if map.contains_key("enum") || map.contains_key("const") {
        return;
    }
    for keyword in ["oneOf", "anyOf"] {
        let Some(values) = map.get(keyword).and_then(crate::validate::const_branches) else {
            continue;
        };
        let distinct = values
            .iter()
            .enumerate()
            .all(|(index, value)| !values[..index].contains(value));
        if !distinct {
            return;
        }
        let Some(Value::Array(branches)) = map.shift_remove(keyword) else {
            return;
        };
        let documented: Vec<String> = branches
            .iter()
            .filter_map(|branch| {
                let text = branch.get("description").and_then(Value::as_str)?;
                Some(format!("- {}: {text}", branch.get("const")?))
            })
            .collect();
        if !documented.is_empty() {
            let list = documented.join("\n");
            let text = match map.get("description").and_then(Value::as_str) {
                Some(existing) if !existing.is_empty() => format!("{existing}\n\n{list}"),
                _ => list,
            };
            map.insert("description".to_owned(), Value::String(text));
        }
        if !map.contains_key("type")
            && let Some(ty) = type_of_values(&values)
        {
            map.insert("type".to_owned(), ty);
        }
        map.insert("enum".to_owned(), Value::Array(values));
        return;
    }
}

/// [`const_union_to_enum`] on every schema node (recursive; bounded like
/// [`drop_non_standard_formats`]).
pub(crate) fn const_unions_to_enums(node: &mut Value) {
    let Value::Object(map) = node else { return };
    const_union_to_enum(map);
    for (_, _, child) in children_mut(map) {
        const_unions_to_enums(child);
    }
}
