//! One test per rule of the schema dialects (provider rules in PROVIDERS.md).

use dsh_tools::__private::bfcl_to_json_schema;
use dsh_tools::dialect::{
    Dialect, DialectError, DialectErrorKind, MAX_DEPTH, normalize_strict_arguments, transform_tools,
};
use serde_json::{Value, json};

fn ok(dialect: Dialect, schema: &Value) -> Value {
    match dialect.transform(schema) {
        Ok(out) => out,
        Err(error) => panic!("{dialect} failed: {error}"),
    }
}

fn err(dialect: Dialect, schema: &Value) -> DialectError {
    match dialect.transform(schema) {
        Ok(out) => panic!("{dialect} unexpectedly gave {out}"),
        Err(error) => error,
    }
}

/// Every `$ref` string in the output, schema-agnostic (string values under a `$ref` key).
fn refs(value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![value];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                if let Some(Value::String(reference)) = map.get("$ref") {
                    out.push(reference.clone());
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    out
}

fn resolves(root: &Value, reference: &str) -> bool {
    match reference.strip_prefix('#') {
        Some("") => true,
        Some(pointer) => root.pointer(pointer).is_some(),
        None => false,
    }
}

/// Takes a value apart iteratively, so dropping a very deep test value cannot overflow.
fn dismantle(value: Value) {
    let mut stack = vec![value];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, child)| child)),
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
}

#[test]
fn no_rewriting_dialect_emits_schema_keyword_but_a_property_named_so_survives() {
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "$schema": {"type": "string"},
            "inner": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "integer"}
        },
        "required": ["$schema", "inner"]
    });
    for dialect in REWRITING {
        let out = ok(dialect, &schema);
        assert!(out.get("$schema").is_none(), "{dialect}: {out}");
        assert!(
            out["properties"]["inner"].get("$schema").is_none(),
            "{dialect}: {out}"
        );
        assert!(
            out["properties"].get("$schema").is_some(),
            "{dialect}: {out}"
        );
    }
}

#[test]
fn empty_parameter_tools_carry_empty_properties_in_every_dialect() {
    for schema in [json!({}), json!(true), json!({"type": "object"})] {
        for dialect in Dialect::ALL {
            let out = ok(dialect, &schema);
            assert_eq!(out["type"], "object", "{dialect}: {out}");
            assert_eq!(out["properties"], json!({}), "{dialect}: {out}");
        }
    }
}

#[test]
fn non_object_roots_are_errors_at_the_root() {
    for schema in [json!({"type": "string"}), json!(false), json!(3)] {
        for dialect in Dialect::ALL {
            let error = err(dialect, &schema);
            assert_eq!(error.path, "");
            assert!(
                matches!(error.kind, DialectErrorKind::RootNotObject { .. }),
                "{error}"
            );
        }
    }
}

#[test]
fn non_recursive_refs_are_inlined_with_their_siblings() {
    let schema = json!({
        "type": "object",
        "properties": {
            "when": {"$ref": "#/$defs/Date", "description": "Day of the meeting"},
            "old": {"$ref": "#/definitions/Legacy"}
        },
        "required": ["when", "old"],
        "$defs": {"Date": {"type": "string", "format": "date", "description": "ISO date"}},
        "definitions": {"Legacy": {"type": "integer"}}
    });
    for dialect in REWRITING {
        let out = ok(dialect, &schema);
        assert!(refs(&out).is_empty(), "{dialect}: {out}");
        assert!(out.get("$defs").is_none() && out.get("definitions").is_none());
        let when = &out["properties"]["when"];
        assert_eq!(when["type"], "string", "{dialect}: {when}");
        // Gemini takes string formats `enum` and `date-time` only: `date` moves to the text.
        if dialect != Dialect::Gemini {
            assert_eq!(when["format"], "date", "{dialect}: {when}");
        }
        assert!(
            when["description"]
                .as_str()
                .unwrap()
                .starts_with("Day of the meeting"),
            "{dialect}: the sibling description wins: {when}"
        );
        assert_eq!(out["properties"]["old"]["type"], "integer");
    }
}

#[test]
fn a_sibling_that_conflicts_with_the_target_keeps_both_under_all_of() {
    let schema = json!({
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/Small", "maximum": 5}},
        "$defs": {"Small": {"type": "integer", "maximum": 10}}
    });
    let out = ok(Dialect::Portable, &schema);
    assert_eq!(
        out["properties"]["n"],
        json!({"maximum": 5, "allOf": [{"type": "integer", "maximum": 10}]})
    );
}

fn tree_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"root": {"$ref": "#/definitions/Node"}},
        "required": ["root"],
        "definitions": {
            "Node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/definitions/Node"}},
                    "label": {"$ref": "#/definitions/Label"}
                },
                "required": ["value", "children"]
            },
            "Label": {"type": "string"},
            "Unused": {"$ref": "#/definitions/Missing"}
        }
    })
}

#[test]
fn recursive_refs_are_kept_under_defs_and_nothing_dangles() {
    for dialect in [Dialect::Portable, Dialect::OpenAiStrict, Dialect::Anthropic] {
        let out = ok(dialect, &tree_schema());
        let defs = out["$defs"].as_object().expect("kept definitions");
        assert_eq!(
            defs.keys().collect::<Vec<_>>(),
            ["Node"],
            "{dialect}: {out}"
        );
        assert!(out.get("definitions").is_none());
        let all = refs(&out);
        assert!(all.contains(&"#/$defs/Node".to_owned()), "{dialect}: {out}");
        for reference in all {
            assert!(
                resolves(&out, &reference),
                "{dialect}: {reference} dangles in {out}"
            );
        }
        // The non-recursive `Label` was inlined inside the kept definition.
        let label = &defs["Node"]["properties"]["label"];
        assert!(label.get("$ref").is_none(), "{dialect}: {label}");
    }
}

#[test]
fn a_reference_to_the_root_stays_the_root() {
    let schema = json!({
        "type": "object",
        "properties": {"next": {"$ref": "#"}, "name": {"type": "string"}}
    });
    let out = ok(Dialect::Portable, &schema);
    assert_eq!(out["properties"]["next"], json!({"$ref": "#"}));
    assert!(out.get("$defs").is_none());
}

#[test]
fn a_recursive_root_ref_is_inlined_one_level() {
    let schema = json!({
        "$ref": "#/$defs/List",
        "$defs": {"List": {
            "type": "object",
            "properties": {"head": {"type": "integer"}, "tail": {"$ref": "#/$defs/List"}}
        }}
    });
    let out = ok(Dialect::Anthropic, &schema);
    assert_eq!(out["type"], "object");
    assert_eq!(out["properties"]["tail"], json!({"$ref": "#/$defs/List"}));
    assert_eq!(
        out["$defs"]["List"]["properties"]["head"],
        json!({"type": "integer"})
    );
}

#[test]
fn dangling_and_external_refs_are_errors_with_their_path() {
    for reference in [
        "#/$defs/Missing",
        "https://example.com/schema.json",
        "#anchor",
    ] {
        let schema = json!({"type": "object", "properties": {"x": {"items": {"$ref": reference}}}});
        for dialect in Dialect::ALL {
            let error = err(dialect, &schema);
            assert_eq!(error.path, "/properties/x/items", "{dialect}");
            assert_eq!(
                error.kind,
                DialectErrorKind::UnresolvedRef {
                    reference: reference.to_owned()
                }
            );
        }
    }
}

#[test]
fn portable_writes_optional_fields_without_type_lists() {
    let schema = json!({
        "type": "object",
        "properties": {
            "limit": {"type": ["integer", "null"], "default": null},
            "branch": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
            "mode": {"type": "string", "enum": ["a", "b", null], "nullable": true},
            "must": {"type": ["string", "null"], "minLength": 1}
        },
        "required": ["must"]
    });
    let out = ok(Dialect::Portable, &schema);
    let properties = &out["properties"];
    assert_eq!(properties["limit"], json!({"type": "integer"}));
    assert_eq!(properties["branch"], json!({"type": "string"}));
    assert_eq!(
        properties["mode"],
        json!({"type": "string", "enum": ["a", "b"]})
    );
    // Required but nullable keeps `null`, as a union instead of a type list.
    assert_eq!(
        properties["must"],
        json!({"anyOf": [{"type": "string", "minLength": 1}, {"type": "null"}]})
    );
}

#[test]
fn portable_gives_every_object_node_properties() {
    let schema = json!({
        "type": "object",
        "properties": {"meta": {"type": "object", "additionalProperties": {"type": "string"}}}
    });
    let out = ok(Dialect::Portable, &schema);
    assert_eq!(out["properties"]["meta"]["properties"], json!({}));
}

#[test]
fn gemini_writes_null_as_nullable() {
    let schema = json!({
        "type": "object",
        "properties": {
            "limit": {"type": ["integer", "null"]},
            "branch": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "Branch"},
            "either": {"type": ["string", "integer", "null"], "minLength": 2}
        }
    });
    let out = ok(Dialect::Gemini, &schema);
    let properties = &out["properties"];
    assert_eq!(
        properties["limit"],
        json!({"type": "integer", "nullable": true})
    );
    assert_eq!(
        properties["branch"],
        json!({"description": "Branch", "nullable": true, "type": "string"})
    );
    assert_eq!(
        properties["either"],
        json!({"anyOf": [
            {"type": "string", "minLength": 2, "nullable": true},
            {"type": "integer", "nullable": true}
        ]})
    );
}

#[test]
fn openai_strict_closes_every_object_and_requires_every_key() {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "limit": {"type": "integer"},
            "filter": {"type": "object", "properties": {"tag": {"type": "string"}}},
            "items": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
            "choice": {"anyOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"$ref": "#/$defs/Leaf"}
            ]},
            "node": {"$ref": "#/$defs/Node"}
        },
        "required": ["name", "items", "choice", "node"],
        "$defs": {
            "Leaf": {"type": "object", "properties": {"b": {"type": "boolean"}}, "required": ["b"], "additionalProperties": true},
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}
        }
    });
    let out = ok(Dialect::OpenAiStrict, &schema);
    assert_eq!(out["additionalProperties"], false);
    assert_eq!(
        out["required"],
        json!(["name", "limit", "filter", "items", "choice", "node"])
    );
    assert_eq!(
        out["properties"]["limit"]["type"],
        json!(["integer", "null"])
    );
    let filter = &out["properties"]["filter"];
    assert_eq!(filter["type"], json!(["object", "null"]));
    assert_eq!(filter["additionalProperties"], false, "{out}");
    assert_eq!(filter["required"], json!(["tag"]));
    assert_eq!(
        out["properties"]["items"]["items"]["additionalProperties"],
        false
    );
    for branch in out["properties"]["choice"]["anyOf"].as_array().unwrap() {
        assert_eq!(branch["additionalProperties"], false, "{branch}");
    }
    let node = &out["$defs"]["Node"];
    assert_eq!(node["additionalProperties"], false, "{out}");
    assert_eq!(node["required"], json!(["next"]));
    assert_eq!(
        node["properties"]["next"],
        json!({"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]})
    );
}

#[test]
fn openai_strict_rewrites_one_of_and_unwraps_single_all_of() {
    let schema = json!({
        "type": "object",
        "properties": {
            "shape": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "size": {"allOf": [{"type": "integer", "minimum": 0}], "description": "Size"}
        },
        "required": ["shape", "size"]
    });
    let out = ok(Dialect::OpenAiStrict, &schema);
    assert_eq!(
        out["properties"]["shape"],
        json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})
    );
    assert_eq!(
        out["properties"]["size"],
        json!({"description": "Size", "type": "integer", "minimum": 0})
    );
}

#[test]
fn openai_strict_wraps_a_ref_that_has_siblings() {
    let mut schema = tree_schema();
    schema["properties"]["root"]["description"] = json!("The tree");
    schema["definitions"]["Node"]["properties"]["children"]["items"]["description"] =
        json!("A child");
    let out = ok(Dialect::OpenAiStrict, &schema);
    let child = &out["$defs"]["Node"]["properties"]["children"]["items"];
    assert_eq!(
        child,
        &json!({"description": "A child", "anyOf": [{"$ref": "#/$defs/Node"}]})
    );
}

#[test]
fn openai_strict_moves_rejected_keywords_into_the_description() {
    let schema = json!({
        "type": "object",
        "properties": {
            "url": {"type": "string", "format": "uri", "minLength": 1, "description": "Page to fetch"},
            "when": {"type": "string", "format": "date-time"},
            "count": {"type": "integer", "default": 5, "not": {"const": 3}},
            "since": {"type": ["string", "null"], "default": null}
        },
        "required": ["url", "when", "count", "since"]
    });
    let out = ok(Dialect::OpenAiStrict, &schema);
    assert_eq!(
        out["properties"]["url"],
        json!({"type": "string", "description": "Page to fetch\n\n{format: \"uri\", minLength: 1}"})
    );
    assert_eq!(out["properties"]["when"]["format"], "date-time");
    assert_eq!(
        out["properties"]["count"],
        json!({"type": "integer", "description": "{default: 5, not: {\"const\":3}}"})
    );
    // `default: null` says nothing a nullable type does not; it is dropped, not noted.
    assert_eq!(
        out["properties"]["since"],
        json!({"type": ["string", "null"]})
    );
}

#[test]
fn openai_strict_refuses_what_cannot_be_strict_with_a_path() {
    let cases = [
        (
            json!({"properties": {"meta": {"type": "object", "additionalProperties": {"type": "string"}}}}),
            "/properties/meta",
            DialectErrorKind::FreeFormObject,
        ),
        (
            json!({"properties": {"meta": {"type": "object"}}}),
            "/properties/meta",
            DialectErrorKind::FreeFormObject,
        ),
        (
            json!({"properties": {"m": {"type": "object", "patternProperties": {"^x": {}}, "properties": {}}}}),
            "/properties/m",
            DialectErrorKind::FreeFormObject,
        ),
        (
            json!({"properties": {"tags": {"type": "array"}}}),
            "/properties/tags",
            DialectErrorKind::UntypedArray,
        ),
        (
            json!({"properties": {"tags": {"type": "array", "items": {}}}}),
            "/properties/tags/items",
            DialectErrorKind::UntypedValue,
        ),
        (
            json!({"properties": {"pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}}}),
            "/properties/pair",
            DialectErrorKind::TupleArray,
        ),
        (
            json!({"properties": {"any": {"description": "anything"}}}),
            "/properties/any",
            DialectErrorKind::UntypedValue,
        ),
        (
            json!({"anyOf": [{"properties": {}}, {"properties": {"a": {"type": "string"}}}]}),
            "",
            DialectErrorKind::RootUnion,
        ),
    ];
    for (schema, path, kind) in cases {
        let error = err(Dialect::OpenAiStrict, &schema);
        assert_eq!(
            (error.path.as_str(), &error.kind),
            (path, &kind),
            "{schema}"
        );
    }
}

fn nested_objects(levels: usize) -> Value {
    let mut node = json!({"type": "string"});
    for _ in 0..levels {
        node = json!({"type": "object", "properties": {"x": node}, "required": ["x"]});
    }
    node
}

#[test]
fn openai_strict_enforces_the_documented_size_limits() {
    // 10 object levels pass, 11 do not.
    ok(Dialect::OpenAiStrict, &nested_objects(10));
    let error = err(Dialect::OpenAiStrict, &nested_objects(11));
    assert_eq!(error.path, "/properties/x".repeat(10));
    assert!(matches!(
        error.kind,
        DialectErrorKind::LimitExceeded {
            limit: 10,
            found: 11,
            ..
        }
    ));

    let many: serde_json::Map<String, Value> = (0..5_001)
        .map(|i| (format!("p{i}"), json!({"type": "integer"})))
        .collect();
    let error = err(
        Dialect::OpenAiStrict,
        &json!({"type": "object", "properties": many}),
    );
    assert!(matches!(
        error.kind,
        DialectErrorKind::LimitExceeded {
            limit: 5_000,
            found: 5_001,
            ..
        }
    ));

    let values: Vec<Value> = (0..1_001).map(Value::from).collect();
    let schema = json!({"properties": {"n": {"type": "integer", "enum": values}}});
    let error = err(Dialect::OpenAiStrict, &schema);
    assert_eq!(error.path, "/properties/n");
    assert!(matches!(
        error.kind,
        DialectErrorKind::LimitExceeded { limit: 1_000, .. }
    ));

    let long: Vec<Value> = (0..251)
        .map(|i| Value::String(format!("{i:0>60}")))
        .collect();
    let schema = json!({"properties": {"s": {"type": "string", "enum": long}}});
    let error = err(Dialect::OpenAiStrict, &schema);
    assert!(
        matches!(
            error.kind,
            DialectErrorKind::LimitExceeded { limit: 15_000, .. }
        ),
        "{error}"
    );

    let names: serde_json::Map<String, Value> = (0..1_300)
        .map(|i| (format!("{i:0>100}"), json!({"type": "integer"})))
        .collect();
    let error = err(Dialect::OpenAiStrict, &json!({"properties": names}));
    assert!(
        matches!(
            error.kind,
            DialectErrorKind::LimitExceeded { limit: 120_000, .. }
        ),
        "{error}"
    );
}

#[test]
fn gemini_inlines_refs_and_rejects_recursion_with_the_path() {
    let error = err(Dialect::Gemini, &tree_schema());
    // The first `$ref` into the cycle is the one named.
    assert_eq!(error.path, "/properties/root");
    assert_eq!(
        error.kind,
        DialectErrorKind::RecursiveRef {
            reference: "#/definitions/Node".to_owned()
        }
    );
}

#[test]
fn gemini_keeps_only_its_schema_fields() {
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "kind": {"const": "page"},
            "level": {"type": "integer", "enum": [1, 2, 3]},
            "choice": {"oneOf": [{"type": "string"}, {"type": "integer"}], "description": "Either"},
            "limit": {"type": "integer", "exclusiveMinimum": 0},
            "nested": {"anyOf": [{"anyOf": [{"type": "string"}, {"type": "integer"}]}, {"type": "boolean"}]},
            "labels": {"type": "object", "additionalProperties": {"type": "integer"}}
        }
    });
    let out = ok(Dialect::Gemini, &schema);
    assert!(out.get("additionalProperties").is_none());
    let properties = &out["properties"];
    assert_eq!(
        properties["kind"],
        json!({"type": "string", "enum": ["page"]})
    );
    assert_eq!(
        properties["level"],
        json!({"type": "integer", "description": "{enum: [1,2,3]}"})
    );
    assert_eq!(
        properties["choice"],
        json!({"anyOf": [
            {"type": "string", "description": "Either"},
            {"type": "integer", "description": "Either"}
        ]})
    );
    assert_eq!(
        properties["limit"],
        json!({"type": "integer", "description": "{exclusiveMinimum: 0}"})
    );
    assert_eq!(
        properties["nested"],
        json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}]})
    );
    assert_eq!(
        properties["labels"],
        json!({"type": "object", "description": "{additionalProperties: {\"type\":\"integer\"}}"})
    );
}

#[test]
fn anthropic_writes_standard_json_schema_with_an_object_root() {
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {
            "note": {"type": "string", "nullable": true},
            "pair": {"type": "array", "items": [{"type": "string"}], "additionalItems": false}
        }
    });
    let out = ok(Dialect::Anthropic, &schema);
    assert_eq!(out["type"], "object");
    assert_eq!(
        out["properties"]["note"],
        json!({"type": ["string", "null"]})
    );
    assert_eq!(
        out["properties"]["pair"],
        json!({"type": "array", "prefixItems": [{"type": "string"}], "items": false})
    );
}

#[test]
fn one_bad_tool_never_fails_the_others() {
    let good = json!({"type": "object", "properties": {"q": {"type": "string"}}});
    let bad = json!({"type": "object", "properties": {"q": {"$ref": "#/nowhere"}}});
    let map = json!({"type": "object", "properties": {"m": {"type": "object"}}});
    let tools = [("search", &good), ("broken", &bad), ("maps", &map)];
    for dialect in Dialect::ALL {
        let results = transform_tools(dialect, &tools);
        let names: Vec<&str> = results.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, ["search", "broken", "maps"]);
        assert!(results[0].1.is_ok(), "{dialect}");
        assert!(results[1].1.is_err(), "{dialect}");
    }
    let strict = transform_tools(Dialect::OpenAiStrict, &tools);
    assert_eq!(strict[2].1.as_ref().unwrap_err().path, "/properties/m");
}

fn deep_schema(levels: usize) -> Value {
    let mut node = json!({"type": "string"});
    for _ in 0..levels {
        let mut wrapper = serde_json::Map::new();
        wrapper.insert("type".to_owned(), json!("array"));
        wrapper.insert("items".to_owned(), node);
        node = Value::Object(wrapper);
    }
    node
}

#[test]
fn a_5000_deep_schema_is_an_error_not_a_stack_overflow() {
    let inner = deep_schema(5_000);
    let mut root = serde_json::Map::new();
    root.insert("type".to_owned(), json!("object"));
    root.insert("properties".to_owned(), json!({}));
    let schema = Value::Object(root);
    let mut schema = schema;
    schema["properties"]["deep"] = inner;
    for dialect in Dialect::ALL {
        let error = err(dialect, &schema);
        assert_eq!(
            error.kind,
            DialectErrorKind::TooDeep { limit: MAX_DEPTH },
            "{dialect}"
        );
        assert!(error.path.starts_with("/properties/deep/items/items"));
    }
    dismantle(schema);
}

#[test]
fn ref_chains_that_expand_too_deep_or_too_wide_are_errors() {
    // Each definition nests the next one level deeper: shallow as written, deep once inlined.
    let mut defs = serde_json::Map::new();
    for i in 0..200 {
        defs.insert(
            format!("D{i}"),
            json!({"type": "array", "items": {"$ref": format!("#/$defs/D{}", i + 1)}}),
        );
    }
    defs.insert("D200".to_owned(), json!({"type": "string"}));
    let deep = json!({"properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs});
    assert_eq!(
        err(Dialect::Portable, &deep).kind,
        DialectErrorKind::TooDeep { limit: MAX_DEPTH }
    );

    // Each definition uses the next twice: 2^40 nodes once inlined.
    let mut defs = serde_json::Map::new();
    for i in 0..40 {
        let next = format!("#/$defs/W{}", i + 1);
        defs.insert(
            format!("W{i}"),
            json!({"properties": {"a": {"$ref": next}, "b": {"$ref": next}}}),
        );
    }
    defs.insert("W40".to_owned(), json!({"type": "string"}));
    let wide = json!({"properties": {"x": {"$ref": "#/$defs/W0"}}, "$defs": defs});
    assert!(matches!(
        err(Dialect::Gemini, &wide).kind,
        DialectErrorKind::TooLarge { .. }
    ));
}

#[test]
fn transforms_are_deterministic() {
    let schema = tree_schema();
    for dialect in Dialect::ALL {
        let first = dialect
            .transform(&schema)
            .map(|out| serde_json::to_string(&out).unwrap());
        let second = dialect
            .transform(&schema)
            .map(|out| serde_json::to_string(&out).unwrap());
        assert_eq!(first, second, "{dialect}");
    }
}

#[test]
fn dialect_errors_name_dialect_path_and_reason() {
    let error = err(
        Dialect::OpenAiStrict,
        &json!({"properties": {"tags": {"type": "array"}}}),
    );
    assert_eq!(
        error.to_string(),
        "openai-strict dialect: schema at `/properties/tags`: an array without an `items` schema cannot be made strict"
    );
}

#[test]
fn strict_arguments_lose_nulls_of_optional_properties_only() {
    let schema = json!({
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer"},
            "keep": {"type": ["string", "null"]},
            "filter": {"$ref": "#/$defs/Filter"},
            "rows": {"type": "array", "items": {"$ref": "#/$defs/Filter"}}
        },
        "required": ["query", "keep"],
        "$defs": {"Filter": {
            "type": "object",
            "properties": {"tag": {"type": "string"}, "min": {"type": "integer"}},
            "required": ["tag"]
        }}
    });
    let args = json!({
        "query": "x", "limit": null, "keep": null,
        "filter": {"tag": null, "min": null},
        "rows": [{"tag": "a", "min": null}, {"tag": "b", "min": 2}],
        "extra": null
    });
    assert_eq!(
        normalize_strict_arguments(&schema, args),
        json!({
            "query": "x", "keep": null,
            "filter": {"tag": null},
            "rows": [{"tag": "a"}, {"tag": "b", "min": 2}],
            "extra": null
        })
    );
}

#[test]
fn strict_arguments_pick_the_matching_union_branch() {
    let schema = json!({
        "type": "object",
        "properties": {"target": {"anyOf": [
            {"type": "object", "properties": {"page": {"type": "string"}, "title": {"type": "string"}}},
            {"type": "object", "properties": {"db": {"type": "string"}, "view": {"type": "string"}}, "required": ["view"]}
        ]}}
    });
    let args = json!({"target": {"db": "d", "view": null}});
    assert_eq!(
        normalize_strict_arguments(&schema, args),
        json!({"target": {"db": "d", "view": null}})
    );
}

#[test]
fn strict_arguments_normalize_5000_deep_values_iteratively() {
    // Built with `Map::insert`: `json!` would serialize (recursively) every interpolated value.
    let mut schema = json!({"type": "object", "properties": {"v": {"type": "integer"}}});
    let mut args = json!({"v": null});
    for _ in 0..5_000 {
        let mut properties = serde_json::Map::new();
        properties.insert("c".to_owned(), schema);
        properties.insert("v".to_owned(), json!({"type": "integer"}));
        let mut object = serde_json::Map::new();
        object.insert("type".to_owned(), json!("object"));
        object.insert("properties".to_owned(), Value::Object(properties));
        schema = Value::Object(object);
        let mut wrapper = serde_json::Map::new();
        wrapper.insert("c".to_owned(), args);
        wrapper.insert("v".to_owned(), Value::Null);
        args = Value::Object(wrapper);
    }
    let mut out = normalize_strict_arguments(&schema, args);
    let mut depth = 0;
    let mut node = &mut out;
    loop {
        assert!(node.get("v").is_none(), "null kept at depth {depth}");
        match node.get_mut("c") {
            Some(child) => node = child,
            None => break,
        }
        depth += 1;
    }
    assert_eq!(depth, 5_000);
    dismantle(out);
    dismantle(schema);
}

#[test]
fn bfcl_types_map_to_json_schema() {
    let parameters = json!({
        "type": "dict",
        "properties": {
            "rate": {"type": "float", "optional": true, "default": 0.5},
            "ids": {"type": "tuple", "items": {"type": "long"}},
            "headers": {"type": "dict", "properties": {"Content-Type": {"type": "String"}}, "required": ["Content-Type"]},
            "anything": {"type": "any"},
            "odd": {"type": ""},
            "flag": {"type": "Boolean"}
        },
        "required": ["ids"]
    });
    assert_eq!(
        bfcl_to_json_schema(&parameters),
        json!({
            "type": "object",
            "properties": {
                "rate": {"type": "number", "default": 0.5},
                "ids": {"type": "array", "items": {"type": "integer"}},
                "headers": {"type": "object", "properties": {"Content-Type": {"type": "string"}}, "required": ["Content-Type"]},
                "anything": {"type": "string"},
                "odd": {"type": "string"},
                "flag": {"type": "boolean"}
            },
            "required": ["ids"]
        })
    );
    assert_eq!(
        bfcl_to_json_schema(&json!({"type": "dict"})),
        json!({"type": "object", "properties": {}})
    );
}

#[test]
fn reference_cycles_without_structure_neither_hang_nor_dangle() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}
    });
    let out = ok(Dialect::Portable, &schema);
    for reference in refs(&out) {
        assert!(resolves(&out, &reference), "{reference} dangles in {out}");
    }
    assert!(matches!(
        err(Dialect::Gemini, &schema).kind,
        DialectErrorKind::RecursiveRef { .. }
    ));
    let args = json!({"a": {"x": null}});
    assert_eq!(normalize_strict_arguments(&schema, args.clone()), args);
}

#[test]
fn too_many_distinct_ref_targets_is_an_error() {
    let properties: serde_json::Map<String, Value> = (0..1_001)
        .map(|i| (format!("p{i}"), json!({"$ref": format!("#/$defs/D{i}")})))
        .collect();
    let defs: serde_json::Map<String, Value> = (0..1_001)
        .map(|i| (format!("D{i}"), json!({"type": "integer"})))
        .collect();
    let schema = json!({"type": "object", "properties": properties, "$defs": defs});
    assert_eq!(
        err(Dialect::Portable, &schema).kind,
        DialectErrorKind::TooManyRefTargets {
            limit: dsh_tools::dialect::MAX_REF_TARGETS
        }
    );
}

#[test]
fn a_non_schema_in_a_schema_position_is_an_error_with_its_path() {
    let schema = json!({"type": "object", "properties": {"a": {"items": 5}}});
    for dialect in Dialect::ALL {
        let error = err(dialect, &schema);
        assert_eq!(error.path, "/properties/a/items", "{dialect}");
        assert_eq!(
            error.kind,
            DialectErrorKind::NotASchema { found: "integer" }
        );
    }
}

#[test]
fn malformed_keywords_are_errors_at_their_own_path_in_every_dialect() {
    let cases = [
        (
            json!({"type": "object", "properties": [1, 2]}),
            "/properties",
            "`properties` must be an object mapping names to schemas",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": 5}}}),
            "/properties/a/type",
            "`type` must be a type name",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "text"}}}),
            "/properties/a/type",
            "`type` must be a type name",
        ),
        (
            json!({"type": "object", "required": "a"}),
            "/required",
            "`required` must be a list of property names",
        ),
        (
            json!({"type": "object", "properties": {"a": {"enum": []}}}),
            "/properties/a/enum",
            "`enum` must be a non-empty list of values",
        ),
        (
            json!({"type": "object", "properties": {"a": {"anyOf": []}}}),
            "/properties/a/anyOf",
            "`anyOf` must be a non-empty list of schemas",
        ),
        (
            json!({"type": "object", "properties": {"a": {"not": "x"}}}),
            "/properties/a/not",
            "expected a schema (object or boolean), found string",
        ),
        (
            json!({"type": "object", "properties": {"a": {"$ref": 1}}}),
            "/properties/a/$ref",
            "`$ref` must be a string",
        ),
    ];
    for dialect in Dialect::ALL {
        for (schema, path, message) in &cases {
            let err = dialect
                .transform(schema)
                .expect_err(&format!("{dialect}: {schema} passed"));
            assert_eq!(err.path, *path, "{dialect}: {schema}");
            assert!(err.to_string().contains(message), "{dialect}: {err}");
        }
    }
    // Draft-07 list-form `items` and name-list `dependencies` are still accepted.
    let draft07 = json!({"type": "object", "properties": {"t": {"type": "array", "items": [{"type": "string"}]}}, "dependencies": {"a": ["b"]}});
    assert!(Dialect::Portable.transform(&draft07).is_ok());
}

/// Gemini `Schema` rules (PROVIDERS.md "Gemini"; DSH has no dialects): string `format` only
/// `enum`/`date-time`, no empty-string `enum` value, `enum` with a `type`, `items` on every array,
/// and the property's description kept beside an enum of documented variants.
#[test]
fn gemini_formats_enums_arrays_and_descriptions() {
    let schema = json!({
        "type": "object",
        "properties": {
            "url": {"type": "string", "format": "uri", "description": "Where."},
            "at": {"type": "string", "format": "date-time"},
            "n": {"type": "integer", "format": "int32"},
            "pick": {"enum": ["", "a", "b"]},
            "list": {"type": "array"},
            "kind": {"description": "Kind.", "oneOf": [
                {"const": "glob", "description": "Shell globs."},
                {"const": "regex", "description": "Regular expressions."}
            ]}
        }
    });
    let out = ok(Dialect::Gemini, &schema);
    let properties = &out["properties"];
    assert_eq!(
        properties["url"],
        json!({"type": "string", "description": "Where.\n\n{format: \"uri\"}"})
    );
    assert_eq!(
        properties["at"],
        json!({"type": "string", "format": "date-time"})
    );
    assert_eq!(properties["n"], json!({"type": "integer"}));
    assert_eq!(
        properties["pick"],
        json!({"enum": ["a", "b"], "type": "string"})
    );
    assert_eq!(properties["list"], json!({"type": "array", "items": {}}));
    assert_eq!(
        properties["kind"],
        json!({
            "description": "Kind.\n\n- \"glob\": Shell globs.\n- \"regex\": Regular expressions.",
            "type": "string",
            "enum": ["glob", "regex"]
        })
    );
    let only_empty =
        json!({"type": "object", "properties": {"e": {"type": "string", "enum": [""]}}});
    let error = err(Dialect::Gemini, &only_empty);
    assert_eq!(error.path, "/properties/e/enum");
}

/// Non-standard number `format`s (`uint32`, `double`, …, written by schemars for Rust widths)
/// are dropped by every dialect; standard ones stay where the dialect keeps formats.
#[test]
fn non_standard_formats_are_dropped_by_every_rewriting_dialect() {
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"type": "integer", "format": "uint32", "minimum": 0},
            "b": {"type": "number", "format": "double"},
            "c": {"type": "array", "items": {"type": "integer", "format": "int64"}}
        },
        "required": ["a", "b", "c"]
    });
    for dialect in REWRITING {
        let out = ok(dialect, &schema);
        let text = out.to_string();
        for format in ["uint32", "double", "int64"] {
            assert!(!text.contains(format), "{dialect}: {text}");
        }
    }
}

/// Every dialect but [`Dialect::Mcp`], which serves schemas as written.
const REWRITING: [Dialect; 4] = [
    Dialect::Portable,
    Dialect::OpenAiStrict,
    Dialect::Gemini,
    Dialect::Anthropic,
];

#[test]
fn mcp_serves_the_schema_as_written_with_an_object_root() {
    let written = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.com/contact",
        "type": "object",
        "$defs": {"address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"city": {"type": "string", "format": "uint32"}},
        }},
        "definitions": {"Legacy": {"type": "integer"}},
        "properties": {
            "address": {"$ref": "#/$defs/address"},
            "home": {"$ref": "#addressDef"},
            "old": {"$ref": "#/definitions/Legacy", "nullable": true},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"phone": {"const": "x"}}, "required": ["phone"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false,
    });
    assert_eq!(ok(Dialect::Mcp, &written), written);
    // Only the root is made an object schema.
    let untyped = json!({"$ref": "#/$defs/List", "$defs": {"List": {"type": "object"}}});
    let out = ok(Dialect::Mcp, &untyped);
    assert_eq!(out["type"], "object");
    assert_eq!(out["properties"], json!({}));
    assert_eq!(out["$ref"], "#/$defs/List");
    assert_eq!(out["$defs"], untyped["$defs"]);
}
