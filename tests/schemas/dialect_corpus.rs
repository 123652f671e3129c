//! Every tool schema of the corpus (real MCP `tools/list` captures and a BFCL sample) through
//! every dialect. Each result must either satisfy that dialect's rules — checked here by a
//! validator written independently of the transforms — or be a per-tool `DialectError` with a
//! path. Without the corpus the test prints that it skipped.

use crate::corpus;

use std::collections::BTreeMap;

use dsh_tools::dialect::Dialect;
use serde_json::{Map, Value};

/// `(source, tool name, parameters schema)` for every tool in the corpus; `None` without it.
fn corpus_tools() -> Option<Vec<(String, String, Value)>> {
    Some(
        corpus::tools()?
            .into_iter()
            .map(|tool| (tool.source, tool.name, tool.parameters))
            .collect(),
    )
}

/// A node's subschemas: `(pointer segment(s), schema)`.
fn subschemas(map: &Map<String, Value>) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    for (keyword, value) in map {
        match (keyword.as_str(), value) {
            ("properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas", Value::Object(entries)) => {
                for (name, child) in entries {
                    out.push((format!("{keyword}/{name}"), child));
                }
            }
            ("allOf" | "anyOf" | "oneOf" | "prefixItems", Value::Array(entries)) => {
                for (index, child) in entries.iter().enumerate() {
                    out.push((format!("{keyword}/{index}"), child));
                }
            }
            ("items" | "additionalProperties" | "not" | "if" | "then" | "else" | "contains" | "propertyNames" | "unevaluatedItems" | "unevaluatedProperties", child)
                // `additionalProperties: false` is a closing flag here, not a subschema to check.
                if child.is_object() || (child.is_boolean() && keyword != "additionalProperties") =>
            {
                out.push((keyword.clone(), child));
            }
            _ => {}
        }
    }
    out
}

/// Every schema node with its pointer, iteratively.
fn nodes(root: &Value) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    let mut stack = vec![(String::new(), root)];
    while let Some((path, node)) = stack.pop() {
        if let Value::Object(map) = node {
            for (segment, child) in subschemas(map) {
                stack.push((format!("{path}/{segment}"), child));
            }
        }
        out.push((path, node));
    }
    out
}

fn types(map: &Map<String, Value>) -> Vec<&str> {
    match map.get("type") {
        Some(Value::String(ty)) => vec![ty.as_str()],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Rules every dialect shares: object root with `properties`, no `$schema`, no `definitions`,
/// every `$ref` resolves inside the output.
fn check_common(out: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if out["type"] != "object" {
        problems.push("root type is not \"object\"".to_owned());
    }
    if !out["properties"].is_object() {
        problems.push("root has no properties".to_owned());
    }
    for (path, node) in nodes(out) {
        let Some(map) = node.as_object() else {
            continue;
        };
        for keyword in ["$schema", "definitions"] {
            if map.contains_key(keyword) {
                problems.push(format!("{path}: has {keyword}"));
            }
        }
        if let Some(reference) = map.get("$ref") {
            let target = reference.as_str().and_then(|r| r.strip_prefix('#'));
            let resolves = match target {
                Some("") => true,
                Some(pointer) => pointer.starts_with("/$defs/") && out.pointer(pointer).is_some(),
                None => false,
            };
            if !resolves {
                problems.push(format!("{path}: $ref {reference} does not resolve"));
            }
        }
        if path.contains("/$defs/") && map.contains_key("$defs") {
            problems.push(format!("{path}: nested $defs"));
        }
        // No JSON Schema draft defines these number-width formats.
        if let Some(format) = map.get("format").and_then(Value::as_str)
            && [
                "int32", "int64", "uint32", "uint64", "uint8", "float", "double",
            ]
            .contains(&format)
        {
            problems.push(format!("{path}: non-standard format {format}"));
        }
    }
    problems
}

fn check_portable(out: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, node) in nodes(out) {
        let Some(map) = node.as_object() else {
            continue;
        };
        if map.get("type").is_some_and(Value::is_array) {
            problems.push(format!("{path}: type list"));
        }
        if map.contains_key("nullable") {
            problems.push(format!("{path}: OpenAPI nullable"));
        }
        if types(map) == ["object"] && !map.contains_key("properties") {
            problems.push(format!("{path}: object without properties"));
        }
    }
    problems
}

/// MCP serves a schema as written: only its root must be an object schema with `properties`
/// (the rest is compared with the input where the corpus is transformed).
fn check_as_written(out: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if out["type"] != "object" {
        problems.push("root type is not \"object\"".to_owned());
    }
    if !out["properties"].is_object() {
        problems.push("root has no properties".to_owned());
    }
    problems
}

fn check_standard(out: &Value) -> Vec<String> {
    nodes(out)
        .into_iter()
        .filter(|(_, node)| node.get("nullable").is_some())
        .map(|(path, _)| format!("{path}: OpenAPI nullable"))
        .collect()
}

const OPENAI_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "title",
    "description",
    "pattern",
    "format",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "minItems",
    "maxItems",
];
const OPENAI_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

fn check_openai(out: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if out.get("anyOf").is_some() {
        problems.push("root is a union".to_owned());
    }
    let mut property_count = 0;
    for (path, node) in nodes(out) {
        let Some(map) = node.as_object() else {
            problems.push(format!("{path}: boolean schema"));
            continue;
        };
        for keyword in map.keys() {
            if !OPENAI_KEYWORDS.contains(&keyword.as_str()) {
                problems.push(format!("{path}: unsupported keyword {keyword}"));
            }
        }
        if let Some(format) = map.get("format").and_then(Value::as_str)
            && !OPENAI_FORMATS.contains(&format)
        {
            problems.push(format!("{path}: format {format}"));
        }
        if map.contains_key("$ref") && map.len() > 1 {
            problems.push(format!("{path}: $ref with siblings"));
        }
        let ty = types(map);
        if ty.is_empty() && !map.contains_key("anyOf") && !map.contains_key("$ref") {
            problems.push(format!("{path}: no type"));
        }
        if ty.contains(&"object") {
            if map.get("additionalProperties") != Some(&Value::Bool(false)) {
                problems.push(format!("{path}: object not closed"));
            }
            match map.get("properties").and_then(Value::as_object) {
                Some(properties) => {
                    property_count += properties.len();
                    let keys: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
                    if map.get("required") != Some(&Value::Array(keys)) {
                        problems.push(format!("{path}: required is not every key"));
                    }
                }
                None => problems.push(format!("{path}: object without properties")),
            }
        }
        if ty.contains(&"array") && !map.get("items").is_some_and(Value::is_object) {
            problems.push(format!("{path}: array without items"));
        }
        let object_levels = path.matches("/properties/").count() + 1;
        if ty.contains(&"object") && object_levels > 10 && !path.contains("$defs") {
            problems.push(format!("{path}: nested deeper than 10 objects"));
        }
    }
    if property_count > 5_000 {
        problems.push(format!("{property_count} properties"));
    }
    problems
}

const GEMINI_FIELDS: &[&str] = &[
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

fn check_gemini(out: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, node) in nodes(out) {
        let Some(map) = node.as_object() else {
            problems.push(format!("{path}: boolean schema"));
            continue;
        };
        for keyword in map.keys() {
            if !GEMINI_FIELDS.contains(&keyword.as_str()) {
                problems.push(format!("{path}: field {keyword} is not in Gemini's Schema"));
            }
        }
        if !matches!(map.get("type"), None | Some(Value::String(_))) {
            problems.push(format!("{path}: type is not one string"));
        }
        if let Some(values) = map.get("enum")
            && !values
                .as_array()
                .is_some_and(|values| values.iter().all(Value::is_string))
        {
            problems.push(format!("{path}: enum of non-strings"));
        }
        if map.contains_key("anyOf") && map.len() > 1 {
            problems.push(format!("{path}: anyOf has siblings"));
        }
        let ty = types(map);
        if let Some(format) = map.get("format") {
            let string_format =
                ty == ["string"] && matches!(format.as_str(), Some("enum" | "date-time"));
            if !string_format {
                problems.push(format!("{path}: format {format} on {ty:?}"));
            }
        }
        if let Some(values) = map.get("enum").and_then(Value::as_array) {
            if values.iter().any(|value| value == "") {
                problems.push(format!("{path}: empty-string enum value"));
            }
            if ty.is_empty() {
                problems.push(format!("{path}: enum without type"));
            }
        }
        if ty.contains(&"array") && !map.contains_key("items") {
            problems.push(format!("{path}: array without items"));
        }
    }
    problems
}

fn check(dialect: Dialect, out: &Value) -> Vec<String> {
    if dialect == Dialect::Mcp {
        return check_as_written(out);
    }
    let mut problems = check_common(out);
    problems.extend(match dialect {
        Dialect::Portable => check_portable(out),
        Dialect::OpenAiStrict => check_openai(out),
        Dialect::Gemini => check_gemini(out),
        Dialect::Anthropic => check_standard(out),
        other => vec![format!("no rules checked for {other:?}")],
    });
    problems
}

#[test]
fn every_corpus_tool_is_transformed_or_refused_per_tool() {
    let Some(tools) = corpus_tools() else { return };
    assert!(
        tools.len() > 250,
        "expected the full corpus, found {} tools",
        tools.len()
    );
    let mut failures = Vec::new();
    for dialect in Dialect::ALL {
        let mut transformed = 0;
        let mut refused: BTreeMap<String, usize> = BTreeMap::new();
        for (source, name, schema) in &tools {
            match dialect.transform(schema) {
                Ok(out) => {
                    transformed += 1;
                    for problem in check(dialect, &out) {
                        failures.push(format!("{dialect} {source}/{name}: {problem}"));
                    }
                    if dialect == Dialect::Mcp
                        && let (Some(written), Some(served)) = (schema.as_object(), out.as_object())
                        && written
                            .iter()
                            .any(|(key, value)| served.get(key) != Some(value))
                    {
                        failures.push(format!("mcp {source}/{name}: not served as written"));
                    }
                    let again = dialect.transform(schema).expect("second run succeeds too");
                    if serde_json::to_string(&again).unwrap()
                        != serde_json::to_string(&out).unwrap()
                    {
                        failures.push(format!("{dialect} {source}/{name}: not deterministic"));
                    }
                }
                Err(error) => {
                    let pointer = error.path.is_empty() || error.path.starts_with('/');
                    if error.dialect != dialect || !pointer {
                        failures.push(format!(
                            "{dialect} {source}/{name}: malformed error {error:?}"
                        ));
                    }
                    *refused.entry(kind_name(&error.kind)).or_default() += 1;
                }
            }
        }
        let total_refused: usize = refused.values().sum();
        println!("{dialect:>15}: {transformed} transformed, {total_refused} refused {refused:?}");
    }
    assert!(
        failures.is_empty(),
        "{} rule violations:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The variant name of an error kind, for the summary.
fn kind_name(kind: &dsh_tools::dialect::DialectErrorKind) -> String {
    let debug = format!("{kind:?}");
    debug
        .split([' ', '{', '('])
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The validators above are the test's teeth: each must reject a schema that breaks its rules.
#[test]
fn validators_catch_untransformed_schemas() {
    let raw = serde_json::json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"], "format": "uri"},
            "b": {"oneOf": [{"type": "object"}, {"const": 1}], "nullable": true},
            "c": {"$ref": "#/definitions/C", "description": "see C"},
            "d": {"type": "array"},
            "e": {"enum": ["", "x"]},
            "f": {"type": "integer", "format": "int32"}
        },
        "definitions": {"C": {"type": "integer"}}
    });
    for dialect in Dialect::ALL
        .into_iter()
        .filter(|dialect| *dialect != Dialect::Mcp)
    {
        let problems = check(dialect, &raw);
        assert!(
            problems.iter().any(|p| p.contains("$schema")),
            "{dialect}: {problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains("does not resolve")),
            "{dialect}: {problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("non-standard format int32")),
            "{dialect}: {problems:?}"
        );
    }
    let expect = |dialect: Dialect, needles: &[&str]| {
        let problems = check(dialect, &raw);
        for needle in needles {
            assert!(
                problems.iter().any(|p| p.contains(needle)),
                "{dialect} missed {needle}: {problems:?}"
            );
        }
    };
    expect(
        Dialect::Portable,
        &[
            "/properties/a: type list",
            "/properties/b: OpenAPI nullable",
            "/properties/b/oneOf/0: object without properties",
        ],
    );
    expect(Dialect::Anthropic, &["/properties/b: OpenAPI nullable"]);
    expect(
        Dialect::OpenAiStrict,
        &[
            ": object not closed",
            "required is not every key",
            "/properties/a: format uri",
            "/properties/b: unsupported keyword oneOf",
            "/properties/c: $ref with siblings",
            "/properties/d: array without items",
            "/properties/b/oneOf/1: no type",
        ],
    );
    expect(
        Dialect::Gemini,
        &[
            "/properties/a: type is not one string",
            "/properties/b: field oneOf",
            "/properties/c: field $ref",
            "field definitions",
            "/properties/a: format \"uri\"",
            "/properties/d: array without items",
            "/properties/e: empty-string enum value",
            "/properties/e: enum without type",
            "/properties/f: format \"int32\"",
        ],
    );
}
