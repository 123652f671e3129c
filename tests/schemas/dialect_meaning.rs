//! The meaning-keeping dialects (Portable, Anthropic, MCP) proved against the official
//! JSON-Schema-Test-Suite (draft 2020-12): for every case, an independent validator (the
//! `jsonschema` crate, not the transforms) gives the transformed schema the verdict it gives the
//! original, or the transform refuses that schema with a JSON Pointer. Without the corpus the test
//! prints that it skipped.

use crate::corpus;

use dsh_tools::dialect::Dialect;
use serde_json::{Map, Value, json};

/// `(file, case description, schema, [(test description, data, valid)])`.
type Case = (String, String, Value, Vec<(String, Value, bool)>);

fn cases() -> Option<Vec<Case>> {
    let dir = corpus::dir().join("json-schema-test-suite/tests/draft2020-12");
    if !dir.is_dir() {
        println!("skipped: no JSON-Schema-Test-Suite at {}", dir.display());
        return None;
    }
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        let groups: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        for group in groups.as_array().unwrap() {
            let tests = group["tests"]
                .as_array()
                .unwrap()
                .iter()
                .map(|test| {
                    (
                        test["description"].as_str().unwrap().to_owned(),
                        test["data"].clone(),
                        test["valid"].as_bool().unwrap(),
                    )
                })
                .collect();
            out.push((
                name.clone(),
                group["description"].as_str().unwrap().to_owned(),
                group["schema"].clone(),
                tests,
            ));
        }
    }
    Some(out)
}

/// The verdict of the independent validator; `None` when it cannot build the schema (remote
/// references it has no copy of).
fn verdict(schema: &Value, data: &Value) -> Option<bool> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(schema)
        .ok()
        .map(|validator| validator.is_valid(data))
}

/// Rewrites every local JSON-Pointer `$ref` (`#`, `#/…`) to point under `prefix`.
fn rebase(schema: &mut Value, prefix: &str) {
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                if let Some(Value::String(reference)) = map.get_mut("$ref")
                    && (reference == "#" || reference.starts_with("#/"))
                {
                    *reference = format!("#{prefix}{}", &reference[1..]);
                }
                stack.extend(map.values_mut());
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            _ => {}
        }
    }
}

/// The case's schema as one property of an object root, so that every instance (not only
/// objects) is checked by the same transform: `{"v": <data>}` against
/// `{properties: {v: {$ref: "#/$defs/case"}}, $defs: {case: <schema>}}`. `None` for schemas with
/// their own `$id` (a new resource: rebasing would change what their references mean).
fn wrapped(schema: &Value) -> Option<Value> {
    if schema.get("$id").is_some() {
        return None;
    }
    let mut inner = schema.clone();
    rebase(&mut inner, "/$defs/case");
    let mut defs = Map::new();
    defs.insert("case".to_owned(), inner);
    Some(json!({
        "type": "object",
        "properties": {"v": {"$ref": "#/$defs/case"}},
        "required": ["v"],
        "$defs": defs,
    }))
}

#[test]
fn meaning_keeping_dialects_keep_every_test_suite_verdict() {
    let Some(cases) = cases() else { return };
    assert!(
        cases.len() > 200,
        "expected the full suite, found {} cases",
        cases.len()
    );
    let mut problems = Vec::new();
    for dialect in [Dialect::Portable, Dialect::Anthropic, Dialect::Mcp] {
        let (mut checked, mut refused) = (0, 0);
        for (file, description, schema, tests) in &cases {
            // As a root: tool arguments are objects, so object instances must keep their verdict.
            // As a property: every instance must.
            let forms: Vec<(Value, bool)> = [
                Some((schema.clone(), true)),
                wrapped(schema).map(|w| (w, false)),
            ]
            .into_iter()
            .flatten()
            .collect();
            for (form, root) in forms {
                let out = match dialect.transform(&form) {
                    Ok(out) => out,
                    Err(error) => {
                        if !(error.path.is_empty() || error.path.starts_with('/')) {
                            problems.push(format!(
                                "{dialect} {file}/{description}: error without a pointer: {error:?}"
                            ));
                        }
                        refused += 1;
                        continue;
                    }
                };
                for (test, data, _) in tests {
                    let instance = if root {
                        if !data.is_object() {
                            continue;
                        }
                        data.clone()
                    } else {
                        json!({"v": data})
                    };
                    let Some(before) = verdict(&form, &instance) else {
                        continue;
                    };
                    let Some(after) = verdict(&out, &instance) else {
                        problems.push(format!(
                            "{dialect} {file}/{description}: output is not a schema: {out}"
                        ));
                        continue;
                    };
                    checked += 1;
                    if before != after {
                        problems.push(format!(
                            "{dialect} {file}/{description}/{test} ({}): original {before}, transformed {after}\n    schema {form}\n    output {out}",
                            if root { "root" } else { "property" }
                        ));
                    }
                }
            }
        }
        println!("{dialect}: {checked} verdicts compared, {refused} schemas refused");
    }
    assert!(
        problems.is_empty(),
        "{} verdicts changed:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// `$anchor` references (JSON Schema 2020-12 §8.2.2) resolve like JSON Pointers instead of being
/// refused, and keep their verdicts.
#[test]
fn anchor_references_resolve() {
    let schema = json!({
        "type": "object",
        "properties": {"n": {"$ref": "#positive"}, "m": {"$ref": "#positive", "maximum": 5}},
        "$defs": {"p": {"$anchor": "positive", "type": "integer", "minimum": 1}}
    });
    for dialect in [Dialect::Portable, Dialect::Anthropic] {
        let out = dialect
            .transform(&schema)
            .unwrap_or_else(|err| panic!("{dialect}: {err}"));
        assert!(!out.to_string().contains("#positive"), "{dialect}: {out}");
        for data in [
            json!({"n": 1}),
            json!({"n": 0}),
            json!({"m": 6}),
            json!({"m": 3}),
            json!({"n": "x"}),
        ] {
            assert_eq!(
                verdict(&schema, &data),
                verdict(&out, &data),
                "{dialect} {data}: {out}"
            );
        }
    }
}
