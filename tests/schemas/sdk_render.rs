//! SDK generator: snapshots of a hostile fixture set, byte stability, depth bounds, type mapping
//! and `write_if_changed`.

use dsh_tools::sdk::{self, Language, ToolSpec};
use serde_json::{Value, json};

/// Every hostile name, text and schema construct the generator must survive, in one tool set.
fn hostile_fixture() -> Vec<ToolSpec> {
    let nasty = "Ends */ here, \"\"\" triple, 'single' and \"double\", back\\slash \\n literal,\nnew line,\u{2028}line sep,\u{2029}para sep, nul \u{0} bell \u{7} del \u{7f} c1 \u{85} bidi \u{202e}evil\u{202c} bom \u{feff}.";
    let tree = json!({
        "type": "object",
        "$defs": {
            "Node": {
                "description": "A tree node. */ not the end",
                "type": "object",
                "properties": {
                    "value": {"type": "integer", "minimum": 0, "maximum": 10},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                },
                "required": ["value"],
                "additionalProperties": false
            },
            "Loop": {"anyOf": [{"$ref": "#/$defs/Loop"}, {"type": "null"}]},
            "Pair": {"allOf": [{"$ref": "#/$defs/Left"}, {"$ref": "#/$defs/Right"}]},
            "Left": {"type": "object", "properties": {"left": {"type": "string"}}, "required": ["left"]},
            "Right": {"type": "object", "properties": {"right": {"type": "number"}}}
        },
        "properties": {
            "root": {"$ref": "#/$defs/Node", "description": "The root."},
            "loop": {"$ref": "#/$defs/Loop"},
            "pair": {"$ref": "#/$defs/Pair"},
            "self": {"$ref": "#"},
            "dangling": {"$ref": "#/$defs/Missing"},
            "remote": {"$ref": "https://example.com/schema.json"}
        },
        "required": ["root"]
    });
    let kitchen_sink = json!({
        "type": "object",
        "properties": {
            "class": {"type": "string", "description": nasty},
            "from": {"type": "integer", "format": "int64", "minimum": 1, "exclusiveMaximum": 100},
            "my-field": {"type": ["string", "null"], "minLength": 1, "maxLength": 64, "pattern": "^[a-z]+$"},
            "__proto__": {"type": "boolean"},
            "__private": {"type": "string"},
            "Upper": {"type": "string"},
            "str": {"type": "string"},
            "say \"hi\"": {"const": "a \"quoted\" */ literal\nline"},
            "": {"type": "number"},
            "1x": {"enum": ["a", 1, 1.5, 1e21, true, null, [1], {"k": 1}]},
            "nullable_items": {"type": "array", "items": {"type": ["string", "null"]}},
            "either": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}]},
            "both": {"allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"type": "object", "properties": {"b": {"type": "string"}}}
            ]},
            "tuple": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "minItems": 1, "items": false},
            "map": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "integer"}}},
            "closed_empty": {"type": "object", "additionalProperties": false},
            "legacy_nullable": {"type": "string", "nullable": true},
            "bfcl_dict": {"type": "dict"},
            "nothing": false,
            "anything": true
        },
        "required": ["class", "from", "1x"]
    });
    let empty = json!({"type": "object", "properties": {}});
    let mut tools = vec![
        ToolSpec::new("delete", nasty, kitchen_sink, json!({"type": "string"})),
        ToolSpec::new("class", "Python keyword.", empty.clone(), json!(true)),
        ToolSpec::new("from", "", empty.clone(), json!({})),
        ToolSpec::new(
            "async",
            "Both languages' keyword.",
            empty.clone(),
            json!({"type": "null"}),
        ),
        ToolSpec::new(
            "__proto__",
            "Prototype pollution.",
            empty.clone(),
            json!(true),
        ),
        ToolSpec::new("constructor", "", empty.clone(), json!(true)),
        ToolSpec::new(
            "my-tool.v2 name",
            "Dashes, dots and a space.",
            tree,
            json!({"type": "array", "items": {"type": "string"}}),
        ),
        ToolSpec::new("路径", "Unicode name.", empty.clone(), json!(true)),
        ToolSpec::new("1st-tool", "Leading digit.", empty.clone(), json!(true)),
        ToolSpec::new("_hidden", "Leading underscore.", empty.clone(), json!(true)),
        ToolSpec::new("list", "Shadows a builtin.", empty.clone(), json!(true)),
        ToolSpec::new(
            "mcp__github__create_issue",
            "A plain MCP name.",
            empty.clone(),
            json!(true),
        ),
        // Empty name: its `Node` definition would be the DOM's `Node` without a suffix.
        ToolSpec::new(
            "",
            "Empty name.",
            json!({"$defs": {"Node": {"type": "string"}}, "$ref": "#/$defs/Node"}),
            json!(true),
        ),
        // Comments that would read as mypy type comments (`# type: …`), in a tool reached by
        // subscript (its signature is comments) and in a method.
        ToolSpec::new(
            "type-comment",
            "type: not a type comment",
            json!({"type": "object", "properties": {
                "type": {"type": "string", "description": "type: int"}}, "required": ["type"]}),
            json!(true),
        ),
        ToolSpec::new(
            "type_comment",
            "",
            json!({"type": "object", "properties": {
                "type": {"type": "string", "description": "  type: int"}}}),
            json!({"type": "object", "properties": {"type": {"type": "string", "description": "type: ignore"}}}),
        ),
    ];
    // Three names that escape to the same identifier, and one equal to another's generated name.
    for name in ["a-b", "a.b", "a_b", "Foo", "FooArgs"] {
        tools.push(ToolSpec::new(
            name,
            "Collides after escaping.",
            json!({"type": "object", "properties": {"x": {"type": "object", "properties": {"y": {"type": "string"}}}}}),
            json!({"type": "object", "properties": {"z": {"type": "integer"}}, "required": ["z"]}),
        ));
    }
    tools
}

#[test]
fn typescript_snapshot() {
    insta::assert_snapshot!("typescript", sdk::typescript(&hostile_fixture()));
}

#[test]
fn python_snapshot() {
    insta::assert_snapshot!("python", sdk::python(&hostile_fixture()));
}

#[test]
fn prompt_sections_fence_the_same_declarations() {
    let tools = hostile_fixture();
    for (language, fence, comment) in [
        (Language::TypeScript, "```ts\n", "//"),
        (Language::Python, "```python\n", "#"),
    ] {
        let file = sdk::render(language, &tools);
        let section = sdk::prompt_section(language, &tools);
        assert!(
            section.starts_with("Writing code for run_code\n"),
            "{section}"
        );
        assert!(section.ends_with("\n```\n"));
        let code = &section[section.find(fence).expect("fence") + fence.len()..section.len() - 4];
        assert!(
            file.ends_with(code),
            "the section's code is the file's code"
        );
        assert!(!section.contains("@generated"));
        assert!(file.starts_with(&format!(
            "{comment} This file is @generated by dsh-tools. Do not edit.\n"
        )));
    }
}

#[test]
fn output_is_normalized() {
    let tools = hostile_fixture();
    for language in [Language::TypeScript, Language::Python] {
        let text = sdk::render(language, &tools);
        assert!(text.ends_with('\n') && !text.ends_with("\n\n"));
        assert!(!text.contains('\r'));
        assert!(!text.contains("\n\n\n"));
        for line in text.lines() {
            assert_eq!(line, line.trim_end(), "trailing space in {line:?}");
            assert!(
                !line.chars().any(|c| (c.is_control() && c != '\t')
                    || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202e}' | '\u{feff}')),
                "raw control or separator in {line:?}"
            );
        }
    }
}

#[test]
fn byte_stable_across_runs_orders_and_threads() {
    let tools = hostile_fixture();
    let mut reversed = tools.clone();
    reversed.reverse();
    let mut rotated = tools.clone();
    rotated.rotate_left(5);
    for language in [Language::TypeScript, Language::Python] {
        let first = sdk::render(language, &tools);
        for _ in 0..10 {
            assert_eq!(sdk::render(language, &tools), first);
        }
        assert_eq!(sdk::render(language, &reversed), first);
        assert_eq!(sdk::render(language, &rotated), first);
        let outputs: Vec<String> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|n| {
                    let input = if n % 2 == 0 { &tools } else { &reversed };
                    scope.spawn(move || sdk::render(language, input))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("render thread"))
                .collect()
        });
        assert!(outputs.iter().all(|o| *o == first));
    }
}

#[test]
fn duplicate_names_resolve_the_same_whatever_the_order() {
    let a = ToolSpec::new("dup", "First.", json!({"type": "object"}), json!(true));
    let b = ToolSpec::new(
        "dup",
        "Second.",
        json!({"type": "object"}),
        json!({"type": "string"}),
    );
    for language in [Language::TypeScript, Language::Python] {
        let forward = sdk::render(language, &[a.clone(), b.clone()]);
        let backward = sdk::render(language, &[b.clone(), a.clone()]);
        assert_eq!(forward, backward);
        assert_eq!(
            forward.matches("First.").count() + forward.matches("Second.").count(),
            1
        );
    }
}

/// Drops a deep value without deep recursion: serde_json's own drop recurses per level.
fn dismantle(mut value: Value) {
    let mut stack = vec![];
    loop {
        match &mut value {
            Value::Object(map) => stack.extend(std::mem::take(map).into_iter().map(|(_, v)| v)),
            Value::Array(items) => stack.append(items),
            _ => {}
        }
        match stack.pop() {
            Some(next) => value = next,
            None => return,
        }
    }
}

#[test]
fn five_thousand_deep_schemas_render_with_deep_nodes_degraded() {
    // Built by moving values into maps: `json!` would re-serialise the inner value recursively.
    let wrap = |entries: Vec<(&str, Value)>| -> Value {
        Value::Object(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        )
    };
    let mut properties = json!({"type": "string"});
    let mut items = json!({"type": "string"});
    let mut unions = json!({"type": "string"});
    for _ in 0..5_000 {
        properties = wrap(vec![
            ("type", json!("object")),
            ("properties", wrap(vec![("a", properties)])),
            ("required", json!(["a"])),
        ]);
        items = wrap(vec![("type", json!("array")), ("items", items)]);
        unions = wrap(vec![(
            "anyOf",
            Value::Array(vec![unions, json!({"type": "null"})]),
        )]);
    }
    // A chain of 5,000 references, each definition pointing at the next.
    let mut defs = serde_json::Map::new();
    for n in 0..5_000 {
        defs.insert(
            format!("D{n}"),
            json!({"allOf": [{"$ref": format!("#/$defs/D{}", n + 1)}]}),
        );
    }
    defs.insert(
        "D5000".into(),
        json!({"type": "object", "properties": {"end": {"type": "string"}}}),
    );
    let chain = json!({"$defs": defs, "$ref": "#/$defs/D0"});
    let big_enum = json!({"enum": (0..5_000).map(|n| format!("v{n}")).collect::<Vec<_>>()});
    let tools = vec![
        ToolSpec::new("properties", "", properties, json!(true)),
        ToolSpec::new("items", "", items, json!(true)),
        ToolSpec::new("unions", "", unions, json!(true)),
        ToolSpec::new("chain", "", chain, big_enum),
    ];
    let typescript = sdk::typescript(&tools);
    let python = sdk::python(&tools);
    assert!(
        typescript.contains("unknown"),
        "deep nodes degrade to unknown"
    );
    assert!(python.contains("Any"), "deep nodes degrade to Any");
    assert!(typescript.contains("\"v4999\""));
    assert!(python.contains("end: str"));
    // Bounded nesting: no line opens more than 100 brackets (CPython's parser allows 200).
    for line in python.lines() {
        assert!(line.matches('[').count() < 100, "too deep: {line}");
    }
    for tool in tools {
        dismantle(tool.parameters);
        dismantle(tool.output);
    }
}

#[test]
fn write_if_changed_writes_only_new_bytes() {
    let dir = std::env::temp_dir().join(format!("dsh-sdk-write-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("tools.ts");
    let _ = std::fs::remove_file(&path);
    assert!(sdk::write_if_changed(&path, "one\n").expect("first write"));
    let stamp = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .expect("mtime");
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(!sdk::write_if_changed(&path, "one\n").expect("same bytes"));
    assert_eq!(
        std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .expect("mtime"),
        stamp
    );
    assert!(sdk::write_if_changed(&path, "two\n").expect("new bytes"));
    assert_eq!(std::fs::read_to_string(&path).expect("read"), "two\n");
    let missing_dir = dir.join("no-such-dir").join("tools.ts");
    assert!(sdk::write_if_changed(&missing_dir, "x").is_err());
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

// ---- type mapping -------------------------------------------------------------------------

/// The TypeScript argument type of a single tool `t` with parameters `schema`.
fn ts(schema: Value) -> String {
    let text = sdk::typescript(&[ToolSpec::new("t", "", schema, json!(true))]);
    let start = text.find("\nt: ").expect("args member") + "\nt: ".len();
    let end = text
        .find(";\n}\n\ninterface ToolOutputMap")
        .expect("end of args");
    text[start..end].to_owned()
}

/// The TypeScript named types (`type X = …;`) of a single tool `t`.
fn ts_defs(schema: Value) -> String {
    let text = sdk::typescript(&[ToolSpec::new("t", "", schema, json!(true))]);
    text.lines()
        .filter(|l| {
            l.starts_with("type ")
                && !l.starts_with("type JsonObject")
                && !l.starts_with("type JsonValue")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The Python declarations of a single tool `t` taking `schema`: the blocks between
/// `ToolCallError` and `Tools`, then the method's first line.
fn py(schema: Value) -> String {
    py_of(ToolSpec::new("t", "", schema, json!(true)))
}

/// The Python declarations of a single tool `t` returning `schema` (the classes of an output
/// type: argument objects are keyword parameters instead).
fn py_out(schema: Value) -> String {
    py_of(ToolSpec::new("t", "", json!({"type": "object"}), schema))
}

fn py_of(spec: ToolSpec) -> String {
    let text = sdk::python(&[spec]);
    let start =
        text.find(" code: str | None\n").expect("error class") + " code: str | None\n".len();
    let end = text.find("class Tools(Protocol):").expect("protocol");
    // The method without the class body's one-space indent.
    let method: Vec<&str> = text[end..]
        .lines()
        .skip(1)
        .take_while(|line| !line.is_empty())
        .map(|line| line.strip_prefix(' ').unwrap_or(line))
        .collect();
    format!("{}\n{}", text[start..end].trim(), method.join("\n"))
}

#[test]
fn scalars_and_literals() {
    let schema = json!({"type": "object", "properties": {
        "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
        "b": {"type": "boolean"}, "z": {"type": "null"}, "c": {"const": "x"},
        "e": {"enum": ["a", 2, 2.5, false, null]}
    }, "additionalProperties": false});
    assert_eq!(
        ts(schema.clone()),
        "{\n s?: string;\n i?: number;\n n?: number;\n b?: boolean;\n z?: null;\n c?: \"x\";\n e?: \"a\" | 2 | 2.5 | false | null;\n}"
    );
    let py = py_out(schema.clone());
    assert!(py.contains("class TOutput(TypedDict, total=False):\n s: str\n i: int\n n: float\n b: bool\n z: None\n c: Literal[\"x\"]\n e: Literal[\"a\", 2, False, None] | float"), "{py}");
    // Arguments are keyword parameters, optional ones defaulted to `...`.
    let args = self::py(schema);
    assert!(args.ends_with("async def t(self, *,\ns: str = ...,\ni: int = ...,\nn: float = ...,\nb: bool = ...,\nz: None = ...,\nc: Literal[\"x\"] = ...,\ne: Literal[\"a\", 2, False, None] | float = ...,\n) -> Any: ..."), "{args}");
}

#[test]
fn arrays_parenthesise_unions() {
    let items = json!({"type": "array", "items": {"type": ["string", "null"]}});
    assert_eq!(ts(items.clone()), "Array<string | null>");
    assert!(py(items).ends_with("async def t(self, args: list[str | None]) -> Any: ..."));
    assert_eq!(ts(json!({"type": "array"})), "JsonValue[]");
    assert_eq!(
        ts(json!({"type": "array", "items": {"type": "array", "items": {"type": "integer"}}})),
        "number[][]"
    );
    assert_eq!(
        ts(
            json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "minItems": 1, "items": false})
        ),
        "[string, number?]"
    );
    assert_eq!(
        ts(
            json!({"type": "array", "items": [{"type": "string"}], "additionalItems": {"type": "boolean"}})
        ),
        "[string?, ...boolean[]]"
    );
}

#[test]
fn objects_open_closed_and_indexed() {
    assert_eq!(ts(json!({"type": "object"})), "JsonObject");
    assert_eq!(
        ts(json!({"type": "object", "additionalProperties": false})),
        "Record<string, never>"
    );
    assert_eq!(
        ts(json!({"type": "object", "additionalProperties": {"type": "integer"}})),
        "Record<string, number>"
    );
    assert_eq!(
        ts(json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})),
        "{ a: string }",
        "open input objects render closed for the model"
    );
    assert_eq!(
        ts(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}})
        ),
        "{ a?: string } & Record<string, number>",
        "typed extra keys stay"
    );
    assert!(
        py(json!({"type": "object", "additionalProperties": {"type": "integer"}}))
            .ends_with("(self, args: dict[str, int]) -> Any: ...")
    );
    let mixed = py_out(
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a"]}),
    );
    assert!(
        mixed.contains("class TOutput(TypedDict):\n a: str\n b: NotRequired[int]\n"),
        "{mixed}"
    );
    assert!(!mixed.contains('#'), "no open-object comment: {mixed}");
    // The fewer of required and optional keys are marked.
    let mostly_optional = py_out(
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "integer"}}, "required": ["a"]}),
    );
    assert!(
        mostly_optional.contains(
            "class TOutput(TypedDict, total=False):\n a: Required[str]\n b: int\n c: int\n"
        ),
        "{mostly_optional}"
    );
    assert!(
        py_out(json!({"type": "object", "additionalProperties": false}))
            .contains("class TOutput(TypedDict):\n pass")
    );
    assert!(
        py(json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a"]}))
            .ends_with("async def t(self, *, a: str, b: int = ...) -> Any: ..."),
    );
}

#[test]
fn optional_and_nullable_unions() {
    let option = json!({"anyOf": [{"type": "string", "format": "uri"}, {"type": "null"}]});
    assert_eq!(ts(option.clone()), "string | null");
    assert!(py(option).ends_with("args: str | None) -> Any: ..."));
    assert_eq!(
        ts(json!({"type": "integer", "nullable": true})),
        "number | null"
    );
    assert_eq!(ts(json!({"oneOf": [{"const": 1}, {"const": 2}]})), "1 | 2");
}

#[test]
fn all_of_is_an_intersection_or_a_merged_typed_dict() {
    let schema = json!({"allOf": [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false},
        {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}
    ]});
    assert_eq!(ts(schema.clone()), "{ a: string } & { b: number }");
    assert!(py_out(schema.clone()).contains("class TOutput(TypedDict):\n a: str\n b: int\n"));
    assert!(py(schema).ends_with("async def t(self, *, a: str, b: int) -> Any: ..."));
    // A non-object member with nothing else to merge is kept; several are beyond Python.
    assert!(py(json!({"allOf": [{"type": "string"}, {}]})).ends_with("args: str) -> Any: ..."));
    assert!(
        py(json!({"allOf": [{"type": "string"}, {"type": "integer"}]}))
            .ends_with("args: Any) -> Any: ...")
    );
}

#[test]
fn refs_become_named_types_recursion_included() {
    let schema = json!({
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "$ref": "#/$defs/Node"
    });
    // Named after the definition; `Node` is the DOM's, so TypeScript takes `Node2`.
    assert_eq!(ts(schema.clone()), "Node2");
    assert_eq!(ts_defs(schema.clone()), "type Node2 = { next?: Node2 };");
    let py = py(schema);
    assert!(
        py.contains("class Node(TypedDict, total=False):\n next: Node"),
        "{py}"
    );
    // draft-07 `definitions`, percent-encoded and `~1`-escaped pointers.
    let legacy =
        json!({"definitions": {"a/b c": {"type": "string"}}, "$ref": "#/definitions/a~1b%20c"});
    assert_eq!(ts(legacy.clone()), "ABC");
    assert_eq!(ts_defs(legacy), "type ABC = string;");
}

#[test]
fn unrenderable_nodes_degrade_locally() {
    let schema = json!({"type": "object", "properties": {
        "odd": {"type": "dict"}, "gone": {"$ref": "#/$defs/Missing"},
        "remote": {"$ref": "https://example.com/s.json"}, "ok": {"type": "string"}
    }, "required": ["ok"], "additionalProperties": false});
    assert_eq!(
        ts(schema.clone()),
        "{ odd?: unknown; gone?: unknown; remote?: unknown; ok: string }"
    );
    let py = py_out(schema);
    assert!(py.contains(" odd: Any\n gone: Any\n remote: Any\n"), "{py}");
    assert!(py.contains(" ok: Required[str]\n"), "{py}");
    // A foreign type name next to object keywords still lowers to an object (BFCL's `dict`).
    assert_eq!(
        ts(
            json!({"type": "dict", "properties": {"k": {"type": "string"}}, "additionalProperties": false})
        ),
        "{ k?: string }"
    );
    // An alias that is only itself has no meaning in either language.
    let cycle = json!({"$defs": {"L": {"anyOf": [{"$ref": "#/$defs/L"}, {"type": "null"}]}}, "$ref": "#/$defs/L"});
    assert_eq!(ts_defs(cycle.clone()), "type L = unknown;");
    assert!(self::py(cycle).contains("L: TypeAlias = \"Any\""));
}

#[test]
fn constraints_become_doc_comments() {
    let schema = json!({"type": "object", "properties": {
        "url": {"type": "string", "description": "Where.", "format": "uri", "minLength": 1, "maxLength": 2048},
        "n": {"type": "integer", "minimum": 0, "exclusiveMaximum": 10, "default": 3},
        "count": {"type": "integer", "description": "How many.", "format": "uint64", "minimum": 0},
        "small": {"type": "integer", "format": "uint8", "minimum": 1, "maximum": 255}
    }});
    let ts = ts(schema.clone());
    assert!(
        ts.contains(" url?: string // Where. (format uri; minLength 1; maxLength 2048)\n"),
        "{ts}"
    );
    assert!(
        ts.contains(" n?: number // (minimum 0; exclusiveMaximum 10; default 3)\n"),
        "{ts}"
    );
    // What the type already says is not repeated: numeric formats, an unsigned type's zero floor.
    assert!(ts.contains(" count?: number // How many.\n"), "{ts}");
    assert!(
        ts.contains(" small?: number // (minimum 1; maximum 255)\n"),
        "{ts}"
    );
    let py = py(schema);
    assert!(
        py.contains("\nurl: str = ..., # Where. (format uri; minLength 1; maxLength 2048)\n"),
        "{py}"
    );
    assert!(py.contains("\ncount: int = ..., # How many.\n"), "{py}");
    // A default the type admits is the parameter's default; the note goes.
    assert!(
        py.contains("\nn: int = 3, # (minimum 0; exclusiveMaximum 10)\n"),
        "{py}"
    );
}

#[test]
fn hostile_keys_are_quoted_or_moved_to_a_functional_base() {
    let schema = json!({"type": "object", "properties": {
        "my-key": {"type": "string"}, "class": {"type": "string"}, "__proto__": {"type": "string"}, "ok": {"type": "string"}
    }, "required": ["my-key", "class", "__proto__", "ok"], "additionalProperties": false});
    assert_eq!(
        ts(schema.clone()),
        "{ \"my-key\": string; class: string; \"__proto__\": string; ok: string }"
    );
    // Keys that are no Python parameter names: one dict argument, a class whose other keys sit
    // in a functional TypedDict it extends.
    let py = py(schema);
    assert!(py.contains("_TArgs = TypedDict(\"_TArgs\", {\n \"my-key\": \"str\",\n \"class\": \"str\",\n \"__proto__\": \"str\",\n})\nclass TArgs(_TArgs):\n ok: str"), "{py}");
    assert!(
        py.ends_with("async def t(self, args: TArgs) -> Any: ..."),
        "{py}"
    );
}

#[test]
fn escaped_names_never_collide() {
    // Argument dicts (keys that are no parameter names) and outputs are classes named after
    // the tool; the three argument dicts have one shape, so they share one class, while the
    // outputs differ and keep a class each.
    let tools: Vec<ToolSpec> = ["a-b", "a.b", "a_b"]
        .iter()
        .enumerate()
        .map(|(n, name)| {
            ToolSpec::new(
                *name,
                "",
                json!({"type": "object", "properties": {"x-y": {"type": "string"}}}),
                json!({"type": "object", "properties": {format!("k{n}"): {"type": "string"}}}),
            )
        })
        .collect();
    let python = sdk::python(&tools);
    assert!(!python.contains("ABArgs2"), "{python}");
    for class in [
        "ABArgs = ",
        "class ABOutput(",
        "class ABOutput2(",
        "class ABOutput3(",
    ] {
        assert_eq!(python.matches(class).count(), 1, "{class} in {python}");
    }
    let typescript = sdk::typescript(&tools);
    for key in ["\"a-b\":", "\"a.b\":", "a_b:"] {
        assert_eq!(
            typescript.matches(&format!("\n{key}")).count(),
            2,
            "{key} in args and in outputs"
        );
    }
}

/// A tool name that is a valid non-ASCII Python identifier (`搜索`) renders as a method of `Tools`;
/// one whose NFKC form differs (fullwidth `ｆｕｌｌ`) stays a comment, called through `getattr` (the
/// form every runtime accepts, where DSH writes `tools["…"]`).
#[test]
fn non_ascii_identifiers_are_python_methods() {
    let empty = json!({"type": "object", "properties": {}});
    let text = sdk::python(&[
        ToolSpec::new("搜索", "Search.", empty.clone(), json!(true)),
        ToolSpec::new("ｆｕｌｌ", "Fullwidth.", empty, json!(true)),
    ]);
    assert!(text.contains(" async def 搜索(self) -> Any:"), "{text}");
    assert!(
        text.contains(" # getattr(tools, \"ｆｕｌｌ\")() -> Any"),
        "{text}"
    );
}

/// A `oneOf` of documented `const`s (schemars' form of an enum whose variants have doc
/// comments) renders as the enum it is.
#[test]
fn a_union_of_consts_renders_as_an_enum() {
    let schema = json!({"type": "object", "properties": {"k": {"oneOf": [
        {"const": "glob", "type": "string", "description": "Shell globs."},
        {"const": "regex", "type": "string", "description": "Regular expressions."}]}}, "required": ["k"]});
    assert!(
        py(schema.clone()).contains("async def t(self, *, k: Literal[\"glob\", \"regex\"]) -> Any"),
        "{}",
        py(schema.clone())
    );
    let ts = sdk::typescript(&[ToolSpec::new("t", "", schema, json!(true))]);
    assert!(ts.contains("k: \"glob\" | \"regex\""), "{ts}");
}

/// Python parameters take a schema's default as their own only when mypy accepts the literal for
/// the rendered type; any other default stays a note and the parameter `= ...`.
#[test]
fn python_defaults_only_where_the_type_admits_them() {
    let schema = json!({"type": "object", "properties": {
        "s": {"type": "string", "default": "a \"b\""},
        "i": {"type": "integer", "default": 2.5},
        "o": {"type": ["string", "null"], "default": null},
        "n": {"type": "string", "default": null},
        "e": {"enum": ["x", "y"], "default": "y"},
        "f": {"enum": ["x", "y"], "default": "z"},
        "b": {"type": "boolean", "description": "Flag.", "default": true},
        "l": {"type": "array", "items": {"type": "string"}, "default": []}
    }, "additionalProperties": false});
    let py = py(schema);
    for line in [
        "\ns: str = \"a \\\"b\\\"\",\n",
        "\ni: int = ..., # (default 2.5)\n",
        "\no: str | None = None,\n",
        "\nn: str = ..., # (default null)\n",
        "\ne: Literal[\"x\", \"y\"] = \"y\",\n",
        "\nf: Literal[\"x\", \"y\"] = ..., # (default z)\n",
        "\nb: bool = True, # Flag.\n",
        "\nl: list[str] = ..., # (default [])\n",
    ] {
        assert!(py.contains(line), "{line:?} in {py}");
    }
}

/// An undocumented union says what its documented members say (a native tool list carries those
/// descriptions, so the SDK must too), once, with the union's own notes after them.
#[test]
fn an_undocumented_union_carries_its_members_docs() {
    let schema = json!({"type": "object", "properties": {
        "edit": {"anyOf": [
            {"type": "object", "description": "Provide when type is `replace`.",
             "properties": {"text": {"type": "string"}}, "required": ["text"]},
            {"type": "string", "description": "Provide when type is `replace`."},
            {"type": "null"}
        ], "default": null},
        "own": {"description": "Its own words.", "anyOf": [
            {"type": "integer", "description": "Member words."},
            {"type": "string"}
        ]}
    }, "required": ["own"], "additionalProperties": false});
    let ts = ts(schema.clone());
    assert!(
        ts.contains("} | string | null // Provide when type is `replace`. (default null)\n"),
        "{ts}"
    );
    assert_eq!(ts.matches("Provide when").count(), 1, "{ts}");
    assert!(
        ts.contains("own: number | string // Its own words.\n"),
        "{ts}"
    );
    assert!(!ts.contains("Member words"), "{ts}");
    let py = py(schema);
    assert_eq!(
        py.matches("Provide when type is `replace`.").count(),
        1,
        "{py}"
    );
    assert!(py.contains("# Its own words."), "{py}");
}

/// A Python object shape met again reuses its class: a functional-form `TypedDict` (a key that
/// is no identifier) as well as a class, and an undocumented output reuses the documented input
/// class. Shapes whose docs differ keep a class each, so no field reads a doc it does not have.
/// Tools that answer alike share one output class named after its keys, not after one of the
/// tools (a class named after another tool, or another server's, would misread).
#[test]
fn python_object_shapes_are_rendered_once() {
    let relation = |doc: bool| {
        let field = |text: &str| {
            if doc {
                json!({"type": "string", "description": text})
            } else {
                json!({"type": "string"})
            }
        };
        json!({"type": "object", "properties": {"from": field("start"), "to": field("end")},
            "required": ["from", "to"]})
    };
    let list = |item: Value| json!({"type": "object", "properties": {"relations": {"type": "array", "items": item}}, "required": ["relations"]});
    let done =
        json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
    let tools = vec![
        ToolSpec::new("create", "", list(relation(true)), list(relation(false))),
        ToolSpec::new("remove", "", list(relation(false)), done.clone()),
        ToolSpec::new("undo", "", json!({"type": "object"}), done),
        ToolSpec::new(
            "rename",
            "",
            list(json!({"type": "object", "properties": {
                "from": {"type": "string", "description": "old name"},
                "to": {"type": "string", "description": "new name"}},
                "required": ["from", "to"]})),
            json!({}),
        ),
    ];
    let python = sdk::python(&tools);
    assert_eq!(
        python.matches(" = TypedDict(\"_Relations").count(),
        2,
        "{python}"
    );
    assert!(python.contains("\"from\": \"str\", # start"), "{python}");
    assert!(python.contains("\"from\": \"str\", # old name"), "{python}");
    assert!(
        python.contains("class CreateOutput(TypedDict):\n relations: list[Relations]"),
        "{python}"
    );
    assert!(
        python.contains("relations: list[Relations]) -> CreateOutput"),
        "{python}"
    );
    // Tools that answer alike share one output class, named after its keys.
    assert!(python.contains("def undo(self) -> OkOutput"), "{python}");
    assert!(
        python.contains("def remove(self, *, relations: list[Relations]) -> OkOutput"),
        "{python}"
    );
    assert_eq!(python.matches("class OkOutput(TypedDict):").count(), 1);
    assert!(!python.contains("UndoOutput") && !python.contains("RemoveOutput"));
    // Numbering has no gaps: the reused shapes gave their names back.
    assert!(
        python.contains("_Relations2 = TypedDict(")
            && python.contains("class Relations2(_Relations2):"),
        "{python}"
    );
}

/// An output property's doc is left out only when it repeats an input's text: one named like an
/// input but saying something else (what was applied, not what was asked) stays, in both
/// languages.
#[test]
fn an_output_doc_that_says_something_else_stays() {
    let input = json!({"type": "object", "properties": {
        "mode": {"type": "string", "description": "Mode to use."},
        "path": {"type": "string", "description": "Path to read."}}, "required": ["mode", "path"]});
    let output = json!({"type": "object", "properties": {
        "mode": {"type": "string", "description": "Mode actually applied."},
        "path": {"type": "string", "description": "Path to read."}}, "required": ["mode", "path"]});
    let tools = vec![ToolSpec::new("apply", "", input, output)];
    for text in [sdk::typescript(&tools), sdk::python(&tools)] {
        assert_eq!(text.matches("Mode actually applied.").count(), 1, "{text}");
        assert_eq!(text.matches("Path to read.").count(), 1, "{text}");
    }
}

/// A Python object shape like a named type (`$defs`) met earlier reads that name: mcp-server-time's
/// `get_current_time` answers a `TimeResult`, the type `convert_time`'s answer names.
#[test]
fn a_shape_like_a_named_type_reads_its_name() {
    let time = json!({"type": "object", "properties": {"timezone": {"type": "string"},
        "is_dst": {"type": "boolean"}}, "required": ["timezone", "is_dst"]});
    let args = json!({"type": "object", "properties": {}});
    let tools = vec![
        ToolSpec::new(
            "convert_time",
            "",
            args.clone(),
            json!({"type": "object", "$defs": {"TimeResult": time},
                "properties": {"source": {"$ref": "#/$defs/TimeResult"}}, "required": ["source"]}),
        ),
        ToolSpec::new("get_current_time", "", args, time),
    ];
    let python = sdk::python(&tools);
    assert!(
        python.contains("def get_current_time(self) -> TimeResult:"),
        "{python}"
    );
    assert!(!python.contains("GetCurrentTimeOutput"), "{python}");
}
