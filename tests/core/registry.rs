//! Registry core: registration rules, schemas, argument and output validation, result shapes and
//! error codes.

use crate::common;

use common::{Echo, call, mirror, text};
use dsh_tools::registry::RegisterError;
use dsh_tools::result::ErrorCode;
use dsh_tools::{Registry, ToolDefinition, ToolError, ToolResult};
use serde_json::{Value, json};

fn registry() -> Registry {
    let registry = Registry::new();
    registry.register(ToolDefinition::from_tool(Echo)).unwrap();
    registry
}

#[test]
fn run_code_is_reserved() {
    let registry = Registry::new();
    let err = registry.register(mirror("run_code")).unwrap_err();
    assert_eq!(err, RegisterError::Reserved);
    assert_eq!(
        err.to_string(),
        "tool name \"run_code\" is reserved for the Code Mode presentation transport and cannot be registered or shadowed"
    );
    assert!(registry.agent("a").register(mirror("run_code")).is_err());
}

#[test]
fn duplicates_in_one_layer_are_rejected_but_scopes_may_shadow() {
    let registry = registry();
    let err = registry
        .register(ToolDefinition::from_tool(common::Echo))
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("tool \"echo\" is already registered"),
        "{err}"
    );
    let agent = registry.agent("a");
    agent.register(mirror("echo")).unwrap();
    assert_eq!(
        agent.register(mirror("echo")).unwrap_err().to_string(),
        "tool \"echo\" is already registered in this scope"
    );
}

#[test]
fn zero_timeout_is_rejected() {
    let registry = Registry::new();
    let def = ToolDefinition::builder("t")
        .timeout_ms(0)
        .handler(|_, _| async { Ok(Value::Null) })
        .build()
        .unwrap();
    let err = registry.register(def).unwrap_err();
    assert_eq!(err, RegisterError::InvalidTimeout("t".into()));
    // The message is DSH's, word for word.
    assert_eq!(
        err.to_string(),
        "tool \"t\" timeout_ms must be a positive finite number"
    );
}

/// `register_all` registers all or nothing: a duplicate inside the batch, or with a tool
/// already there, leaves the registry as it was.
#[test]
fn register_all_registers_all_or_nothing() {
    let registry = Registry::new();
    registry.register(mirror("taken")).unwrap();
    let err = registry
        .register_all([mirror("a"), mirror("b"), mirror("a")])
        .unwrap_err();
    assert_eq!(err, RegisterError::DuplicateGlobal("a".into()));
    let err = registry
        .register_all([mirror("c"), mirror("taken")])
        .unwrap_err();
    assert_eq!(err, RegisterError::DuplicateGlobal("taken".into()));
    assert!(registry.get("a", None).is_none() && registry.get("b", None).is_none());
    assert!(registry.get("c", None).is_none());
    let handles = registry.register_all([mirror("a"), mirror("b")]).unwrap();
    assert_eq!(handles.len(), 2);
    assert!(registry.get("b", None).is_some());
}

#[test]
fn unregister_removes_and_drop_keeps() {
    let registry = Registry::new();
    let kept = registry.register(mirror("kept")).unwrap();
    drop(kept);
    let removed = registry.register(mirror("removed")).unwrap();
    assert!(removed.unregister());
    assert!(!removed.unregister(), "second unregister is a no-op");
    let names: Vec<String> = registry.schemas(None).into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["kept"]);
}

#[test]
fn schemas_are_sorted_and_expose_only_name_description_parameters() {
    let registry = Registry::new();
    for name in ["zeta", "Alpha", "beta", "_x"] {
        registry.register(mirror(name)).unwrap();
    }
    let schemas = registry.schemas(None);
    let names: Vec<&str> = schemas.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["Alpha", "_x", "beta", "zeta"], "Rust str order");
    let json = serde_json::to_value(&schemas[0]).unwrap();
    let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["name", "description", "parameters"]);
}

#[test]
fn typed_parameters_schema_has_no_null_type_arrays_and_no_schema_keyword() {
    let schema = ToolDefinition::from_tool(Echo).parameters().clone();
    assert_eq!(schema["type"], "object");
    assert!(schema.get("$schema").is_none());
    assert_eq!(schema["properties"]["times"]["type"], "integer", "{schema}");
    assert_eq!(schema["required"], json!(["text"]));
    assert!(
        schema.get("additionalProperties").is_none(),
        "open root by default"
    );
}

/// A misspelt tool name is answered with the visible tool it most likely meant.
#[tokio::test]
async fn an_unknown_tool_names_the_nearest_visible_one() {
    let result = registry().execute(call("1", "ecoh", json!({}))).await;
    assert_eq!(result.error_code(), Some(ErrorCode::UnknownTool));
    assert_eq!(
        text(&result),
        "Error: unknown tool \"ecoh\"; did you mean \"echo\"?"
    );
}

/// What the model sent is echoed bounded: a long or control-laden tool name, a flood of stray
/// keys, a huge key. The message stays small and one line.
#[tokio::test]
async fn error_messages_echo_the_model_bounded() {
    let registry = registry();
    let name = format!("a\nb\u{0}{}", "x".repeat(100_000));
    let result = registry.execute(call("1", &name, json!({}))).await;
    let message = text(&result);
    assert_eq!(result.error_code(), Some(ErrorCode::UnknownTool));
    assert!(
        message.starts_with("Error: unknown tool \"a\\nb\\u{0}xxx"),
        "{message:.80}"
    );
    assert!(message.len() < 400, "{} bytes", message.len());
    assert!(!message.contains('\n'));

    let mut stray: serde_json::Map<String, Value> =
        (0..100_000).map(|i| (format!("k{i}"), json!(i))).collect();
    stray.insert("y".repeat(100_000), json!(1));
    stray.insert("text".to_owned(), json!("hi"));
    /// Says it louder.
    #[dsh_tools::tool]
    async fn shout(text: String) -> String {
        text.to_uppercase()
    }
    registry.register(ShoutTool).unwrap();
    let result = registry
        .execute(call("2", "shout", Value::Object(stray)))
        .await;
    let message = text(&result);
    assert_eq!(result.error_code(), Some(ErrorCode::InvalidArgs));
    assert!(
        message.ends_with(&format!("; and {} more", 100_001 - 20)),
        "{message:.200}"
    );
    assert!(message.len() < 20 * 600, "{} bytes", message.len());
}

#[tokio::test]
async fn unknown_tool() {
    let result = registry().execute(call("1", "nope", json!({}))).await;
    assert_eq!(result.error_code(), Some(ErrorCode::UnknownTool));
    assert_eq!(text(&result), "Error: unknown tool \"nope\"");
    assert_eq!(
        result.error().unwrap().info.as_ref().unwrap().name,
        "ToolNotFoundError"
    );
}

#[tokio::test]
async fn success_renders_string_as_text() {
    let result = registry()
        .execute(call("1", "echo", json!({"text": "ab", "times": 2})))
        .await;
    assert_eq!(result.value(), Some(&json!("abab")));
    assert_eq!(text(&result), "abab");
}

#[tokio::test]
async fn null_for_an_optional_property_is_absent() {
    let result = registry()
        .execute(call("1", "echo", json!({"text": "a", "times": null})))
        .await;
    assert_eq!(result.value(), Some(&json!("a")), "{result:?}");
}

#[tokio::test]
async fn invalid_arguments_list_every_violation() {
    let result = registry()
        .execute(call(
            "1",
            "echo",
            json!({"times": "x", "labels": [1, "ok", true]}),
        ))
        .await;
    let error = result.error().unwrap();
    assert_eq!(error.info.as_ref().unwrap().code, "INVALID_ARGS");
    assert_eq!(error.info.as_ref().unwrap().name, "ToolArgsError");
    let message = &error.message;
    assert!(message.starts_with("invalid arguments: "), "{message}");
    for expected in [
        "missing required property \"text\"",
        "\"times\" must be an integer",
        "\"labels[0]\" must be a string",
        "\"labels[2]\" must be a string",
    ] {
        assert!(
            message.contains(expected),
            "{expected} missing from {message}"
        );
    }
    assert_eq!(message.matches("; ").count(), 3, "{message}");
    assert_eq!(text(&result), format!("Error: {message}"));
}

#[tokio::test]
async fn non_object_arguments_give_exactly_one_violation() {
    for args in [json!(null), json!("nope"), json!([]), json!(3)] {
        let result = registry().execute(call("1", "echo", args)).await;
        assert_eq!(
            result.error().unwrap().message,
            "invalid arguments: \"arguments\" must be an object"
        );
    }
}

#[tokio::test]
async fn deep_arguments_are_refused_without_overflow() {
    // Built by hand: `json!` would serialize the nested value recursively.
    let mut deep = json!(1);
    for _ in 0..5_000 {
        let mut map = serde_json::Map::new();
        map.insert("x".into(), deep);
        deep = Value::Object(map);
    }
    let mut args = serde_json::Map::new();
    args.insert("text".into(), json!("a"));
    args.insert("labels".into(), deep);
    let result = registry()
        .execute(call("1", "echo", Value::Object(args)))
        .await;
    assert_eq!(result.error_code(), Some(ErrorCode::InvalidArgs));
    assert_eq!(
        result.error().unwrap().message,
        "invalid arguments: \"arguments\" is nested deeper than 256 levels"
    );
    // The same for a dynamic tool.
    let registry = Registry::new();
    registry.register(mirror("m")).unwrap();
    let mut deep = json!(1);
    for _ in 0..5_000 {
        deep = Value::Array(vec![deep]);
    }
    let mut args = serde_json::Map::new();
    args.insert("n".into(), deep);
    let result = registry.execute(call("1", "m", Value::Object(args))).await;
    assert_eq!(result.error_code(), Some(ErrorCode::InvalidArgs));
}

#[tokio::test]
async fn huge_string_and_unicode_names_are_fine() {
    let big = "x".repeat(16 * 1024 * 1024);
    let result = registry()
        .execute(call("1", "echo", json!({"text": big})))
        .await;
    assert_eq!(
        result.value().and_then(Value::as_str).map(str::len),
        Some(16 * 1024 * 1024)
    );
    let registry = Registry::new();
    let def = ToolDefinition::builder("uni")
        .parameters(json!({"type": "object", "properties": {"名前": {"type": "string"}}, "required": ["名前"]}))
        .handler(|args, _| async move { Ok(args["名前"].clone()) })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    let ok = registry
        .execute(call("1", "uni", json!({"名前": "ü"})))
        .await;
    assert_eq!(ok.value(), Some(&json!("ü")));
    let bad = registry.execute(call("2", "uni", json!({"名前": 1}))).await;
    assert_eq!(
        bad.error().unwrap().message,
        "invalid arguments: \"名前\" must be a string"
    );
}

#[tokio::test]
async fn user_error_codes_and_display_errors() {
    let result = registry()
        .execute(call("1", "echo", json!({"text": "fail"})))
        .await;
    let error = result.error().unwrap();
    assert_eq!(error.message, "disk full");
    assert_eq!(error.info.as_ref().unwrap().code, "ENOSPC");
    assert_eq!(error.info.as_ref().unwrap().name, "ToolError");
    assert_eq!(text(&result), "Error: disk full");

    let registry = Registry::new();
    let def = ToolDefinition::builder("plain")
        .handler(|_, _| async { Err(ToolError::new("just a message")) })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    let result = registry.execute(call("1", "plain", json!({}))).await;
    assert_eq!(
        result.error().unwrap().info,
        None,
        "uncoded errors carry no info"
    );
}

#[tokio::test]
async fn a_panicking_body_is_an_error_result_and_the_registry_survives() {
    let registry = registry();
    let result = registry
        .execute(call("1", "echo", json!({"text": "panic"})))
        .await;
    assert_eq!(
        result.error().unwrap().message,
        "tool \"echo\" panicked: echo exploded"
    );
    // Coded, so that a panic is told apart from the tool's own errors.
    let info = result.error().unwrap().info.clone().unwrap();
    assert_eq!(
        (info.code.as_str(), info.name.as_str()),
        ("TOOL_PANICKED", "ToolPanicError")
    );
    assert_eq!(
        result.error().unwrap().code(),
        Some(ErrorCode::ToolPanicked)
    );
    let again = registry
        .execute(call("2", "echo", json!({"text": "ok"})))
        .await;
    assert_eq!(again.value(), Some(&json!("ok")));
}

#[tokio::test]
async fn dynamic_tools_validate_arguments_and_output() {
    let registry = Registry::new();
    let def = ToolDefinition::builder("dyn")
        .parameters(json!({
            "type": "object",
            "properties": {"color": {"enum": ["red", "green"]}, "n": {"type": "integer", "minimum": 1}},
            "required": ["color"],
            "additionalProperties": false
        }))
        .output_schema(json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}))
        .handler(|args, _| async move {
            if args["color"] == "green" { Ok(json!({"ok": "yes"})) } else { Ok(json!({"ok": true})) }
        })
        .build()
        .unwrap();
    registry.register(def).unwrap();
    let bad = registry
        .execute(call(
            "1",
            "dyn",
            json!({"color": "blue", "n": 0, "extra": 1}),
        ))
        .await;
    assert_eq!(
        bad.error().unwrap().message,
        "invalid arguments: \"color\" must be one of [\"red\",\"green\"]; \"n\" must be >= 1; unknown property \"extra\""
    );
    let out = registry
        .execute(call("2", "dyn", json!({"color": "green"})))
        .await;
    assert_eq!(out.error_code(), Some(ErrorCode::InvalidToolOutput));
    assert_eq!(
        out.error().unwrap().message,
        "tool \"dyn\" returned invalid output: \"value.ok\" must be a boolean"
    );
    let ok = registry
        .execute(call("3", "dyn", json!({"color": "red"})))
        .await;
    assert!(matches!(ok, ToolResult::Success { .. }));
}

#[test]
fn dynamic_builder_rejects_bad_schemas() {
    let err = ToolDefinition::builder("x")
        .parameters(json!({"type": "string"}))
        .handler(|_, _| async { Ok(Value::Null) })
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("must have \"type\": \"object\""),
        "{err}"
    );
    let err = ToolDefinition::builder("x")
        .parameters(json!({"type": "object", "properties": {"a": {"type": 12}}}))
        .handler(|_, _| async { Ok(Value::Null) })
        .build()
        .unwrap_err();
    assert!(
        err.to_string().starts_with("unsupported JSON schema"),
        "{err}"
    );
    assert!(ToolDefinition::builder("x").build().is_err(), "no handler");
}

#[test]
fn error_codes_display_their_wire_strings() {
    assert_eq!(
        ErrorCode::AbortedBeforeDispatch.to_string(),
        "ABORTED_BEFORE_DISPATCH"
    );
    assert_eq!(ErrorCode::from_wire("TOOL_TIMEOUT"), ErrorCode::ToolTimeout);
    assert_eq!(
        ErrorCode::from_wire("ENOSPC"),
        ErrorCode::Other("ENOSPC".into())
    );
}

#[tokio::test]
async fn integral_floats_are_integers_and_serde_only_errors_name_their_property() {
    let registry = registry();
    let ok = registry
        .execute(call("1", "echo", json!({"text": "a", "times": 2.0})))
        .await;
    assert_eq!(
        ok.value(),
        Some(&json!("aa")),
        "JSON Schema counts 2.0 as an integer"
    );
    let fractional = registry
        .execute(call("2", "echo", json!({"text": "a", "times": 2.5})))
        .await;
    assert_eq!(
        fractional.error().unwrap().message,
        "invalid arguments: \"times\" must be an integer"
    );
    // The schema says a non-negative integer; only serde knows u32 stops at 2^32 - 1.
    let huge = registry
        .execute(call(
            "3",
            "echo",
            json!({"text": "a", "times": 5_000_000_000u64}),
        ))
        .await;
    assert_eq!(
        huge.error().unwrap().message,
        "invalid arguments: \"times\": invalid value: integer `5000000000`, expected u32"
    );
}

mod lossy {
    use dsh_tools::{ToolError, ToolExec};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    #[derive(Deserialize, Serialize, JsonSchema)]
    pub(super) struct Pick {
        pub which: String,
    }

    #[derive(Serialize, JsonSchema)]
    pub(super) struct Reading {
        pub value: f64,
        pub note: Option<String>,
    }

    /// A typed tool whose output may be NaN (which serde_json writes as `null`).
    pub(super) struct Sensor;

    impl dsh_tools::Tool for Sensor {
        type Args = Pick;
        type Output = Reading;
        const NAME: &'static str = "sensor";
        const DESCRIPTION: &'static str = "Read a sensor.";

        async fn call(&self, args: Pick, _exec: ToolExec) -> Result<Reading, ToolError> {
            Ok(match args.which.as_str() {
                "nan" => Reading {
                    value: f64::NAN,
                    note: None,
                },
                _ => Reading {
                    value: 1.5,
                    note: None,
                },
            })
        }
    }
}

#[tokio::test]
async fn a_non_finite_typed_output_is_invalid_output_but_none_fields_are_fine() {
    let registry = Registry::new();
    registry
        .register(ToolDefinition::from_tool(lossy::Sensor))
        .unwrap();
    let fine = registry
        .execute(call("1", "sensor", json!({"which": "ok"})))
        .await;
    assert_eq!(fine.value(), Some(&json!({"value": 1.5, "note": null})));
    let nan = registry
        .execute(call("2", "sensor", json!({"which": "nan"})))
        .await;
    assert_eq!(nan.error_code(), Some(ErrorCode::InvalidToolOutput));
    assert_eq!(
        nan.error().unwrap().message,
        "tool \"sensor\" returned invalid output: \"value.value\" must be a number"
    );
}

/// A hand-written `impl Tool` sets its rendering and finalizing hooks as values: nothing else
/// has to agree with them for the pipeline to call them.
mod hand_written_hooks {
    use dsh_tools::result::ContentBlock;
    use dsh_tools::{ToolError, ToolExec, ToolResult};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    #[derive(Deserialize, Serialize, JsonSchema)]
    pub(super) struct Words {
        pub text: String,
    }

    pub(super) struct Shout;

    // The hook's signature is fixed by `Tool::Output = String`.
    #[allow(clippy::ptr_arg)]
    fn loud(args: &Words, output: &String) -> Option<Vec<ContentBlock>> {
        Some(vec![ContentBlock::text(format!(
            "{} -> {}",
            args.text,
            output.to_uppercase()
        ))])
    }

    fn signed(_exec: &ToolExec, result: &ToolResult) -> Option<Vec<ContentBlock>> {
        Some(vec![ContentBlock::text(format!(
            "{} (signed)",
            result.text()
        ))])
    }

    impl dsh_tools::Tool for Shout {
        type Args = Words;
        type Output = String;
        const NAME: &'static str = "shout";
        const DESCRIPTION: &'static str = "Shout.";
        const RENDER: Option<dsh_tools::hooks::RenderHook<Self>> = Some(loud);
        const FINALIZE_CONTENT: Option<dsh_tools::hooks::FinalizeContentHook> = Some(signed);

        async fn call(&self, args: Words, _exec: ToolExec) -> Result<String, ToolError> {
            Ok(args.text)
        }
    }
}

#[tokio::test]
async fn a_hand_written_tool_s_render_and_finalize_hooks_are_called() {
    let registry = Registry::new();
    registry
        .register(ToolDefinition::from_tool(hand_written_hooks::Shout))
        .unwrap();
    let result = registry
        .execute(call("1", "shout", json!({"text": "hey"})))
        .await;
    assert_eq!(result.text(), "hey -> HEY (signed)");
}

#[test]
fn dialect_schemas_serialize_with_their_parameters_or_their_error() {
    use dsh_tools::dialect::{Dialect, DialectSchema};
    let registry = Registry::new();
    let map = ToolDefinition::builder("labels")
        .description("Free-form labels.")
        .parameters(json!({"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}
        }}))
        .handler(|args: Value, _exec| async move { Ok(args) })
        .build()
        .unwrap();
    registry.register(map).unwrap();
    registry.register(ToolDefinition::from_tool(Echo)).unwrap();
    let schemas: Vec<DialectSchema> = registry.schemas_for(None, Dialect::OpenAiStrict);
    let json = serde_json::to_value(&schemas).unwrap();
    let echo = json
        .as_array()
        .unwrap()
        .iter()
        .find(|schema| schema["name"] == "echo")
        .unwrap();
    assert!(echo["parameters"].is_object(), "{echo}");
    assert!(echo.get("error").is_none(), "{echo}");
    let labels = json
        .as_array()
        .unwrap()
        .iter()
        .find(|schema| schema["name"] == "labels")
        .unwrap();
    assert!(labels.get("parameters").is_none(), "{labels}");
    assert_eq!(labels["error"]["path"], "/properties/labels", "{labels}");
    assert!(
        labels["error"]["message"]
            .as_str()
            .unwrap()
            .contains("openai"),
        "{labels}"
    );
    assert_eq!(labels["original"]["properties"]["labels"]["type"], "object");
}
