//! Validation and schema correctness (issue: "what a tool author hits first"): constraints of an
//! `#[args]` struct, serialize-mode output schemas, recursive types, enum-of-const errors and the
//! order violations are reported in.

use dsh_tools::definition::Dispatched;
use dsh_tools::result::ToolFailure;
use dsh_tools::{ToolDefinition, ToolExec, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

async fn dispatch(definition: &ToolDefinition, args: Value) -> Result<Dispatched, ToolFailure> {
    definition
        .dispatch(args, ToolExec::detached(definition.name()))
        .await
}

async fn failure(definition: &ToolDefinition, args: Value) -> ToolFailure {
    match dispatch(definition, args).await {
        Ok(dispatched) => panic!("unexpected success: {}", dispatched.value),
        Err(failure) => failure,
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
struct WindowArgs {
    #[schemars(range(min = 1, max = 10))]
    count: u32,
    #[schemars(length(min = 2))]
    name: String,
    #[schemars(regex(pattern = r"^[a-z]+$"))]
    slug: String,
}

/// Window.
#[tool]
async fn window(#[args] args: WindowArgs) -> String {
    format!("{}{}{}", args.count, args.name, args.slug)
}

/// Every constraint the schema shows is checked before the body runs, also when it was declared
/// with `#[schemars]` on an `#[args]` struct.
#[tokio::test]
async fn args_struct_constraints_are_enforced_ref_1_6() {
    let definition = ToolDefinition::from_tool(WindowTool);
    let failed = failure(&definition, json!({"count": 0, "name": "ab", "slug": "ok"})).await;
    assert_eq!(failed.message, "invalid arguments: \"count\" must be >= 1");
    let failed = failure(&definition, json!({"count": 11, "name": "a", "slug": "A"})).await;
    assert_eq!(
        failed.message,
        "invalid arguments: \"count\" must be <= 10; \"name\" must be at least 2 characters long; \"slug\" must match the pattern \"^[a-z]+$\""
    );
    let ok = dispatch(
        &definition,
        json!({"count": 10, "name": "ab", "slug": "ok"}),
    )
    .await;
    assert_eq!(ok.unwrap().value, json!("10abok"));
}

#[derive(Serialize, JsonSchema)]
struct Listing {
    name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tags: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
}

/// List.
#[tool]
async fn listing(name: String) -> Listing {
    Listing {
        name,
        tags: Vec::new(),
        size: None,
    }
}

/// The output schema describes what serde writes. A field skipped when empty is not required, so an
/// ordinary output is not refused as `INVALID_TOOL_OUTPUT`.
#[tokio::test]
async fn output_schema_uses_the_serialize_view_ref_1_10() {
    let definition = ToolDefinition::from_tool(ListingTool);
    let output = definition.output_schema().unwrap();
    assert_eq!(output["required"], json!(["name"]));
    let dispatched = dispatch(&definition, json!({"name": "a"})).await.unwrap();
    assert_eq!(dispatched.value, json!({"name": "a"}));
    // A substituted value checked against the same schema is accepted too.
    let presented = definition
        .normalize_value(&json!({"name": "a"}), json!({"name": "b"}), true)
        .unwrap();
    assert_eq!(presented.value, json!({"name": "b"}));
}

/// Runs `body` on a thread with the default 2 MiB stack, as a host's worker thread would have.
fn on_default_stack<T: Send + 'static>(body: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(body)
        .unwrap()
        .join()
        .expect("the thread must not die")
}

/// Hostile input: a 5,000-deep raw parameters schema, as a hostile MCP server could send, gives a
/// `DefinitionError` instead of a stack overflow on a default 2 MiB stack.
#[test]
fn deep_raw_schema_is_a_definition_error_ref_1_10() {
    let message = on_default_stack(|| {
        let mut schema = json!({"type": "string"});
        for _ in 0..5_000 {
            // Built by hand: `json!` would copy `schema` with a recursive `to_value`.
            let mut properties = serde_json::Map::new();
            properties.insert("p".into(), schema);
            let mut object = serde_json::Map::new();
            object.insert("type".into(), json!("object"));
            object.insert("properties".into(), Value::Object(properties));
            schema = Value::Object(object);
        }
        let result = ToolDefinition::builder("deep")
            .parameters(schema)
            .handler(|args, _exec| async move { Ok(args) })
            .build();
        let message = match &result {
            Ok(_) => "built".to_owned(),
            Err(err) => err.to_string(),
        };
        // The schema is dropped on this thread too.
        drop(result);
        message
    });
    assert!(
        message.starts_with(
            "unsupported JSON schema: tool \"deep\" parameters schema: nested deeper than"
        ),
        "{message}"
    );
}

/// How a search matches.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Syntax {
    /// Shell globs.
    Glob,
    /// Regular expressions.
    Regex,
}

/// Find.
#[tool]
async fn find(syntax: Syntax) -> String {
    let _ = syntax;
    String::new()
}

fn raw(schema: Value) -> ToolDefinition {
    ToolDefinition::builder("raw")
        .parameters(schema)
        .handler(|args, _exec| async move { Ok(args) })
        .build()
        .unwrap()
}

/// An enum miss: variants with doc comments make schemars write a `oneOf` of `const`s; the model
/// still reads the allowed values.
#[tokio::test]
async fn enum_of_documented_variants_lists_the_values_ref_1_6() {
    let definition = ToolDefinition::from_tool(FindTool);
    let failed = failure(&definition, json!({"syntax": "fuzzy"})).await;
    assert_eq!(
        failed.message,
        "invalid arguments: \"syntax\" must be one of [\"glob\",\"regex\"]"
    );
}

/// A shape to draw.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Shape {
    /// A circle.
    Circle { radius: f64 },
    /// A rectangle.
    Rect { width: f64, height: f64 },
}

/// Draw.
#[tool]
async fn draw(shape: Shape) -> String {
    let _ = shape;
    String::new()
}

/// The `oneOf` miss text, then what a model needs to fix a tagged enum: the tags when the tag is
/// missing or unknown, the chosen branch's own violations when it is known.
#[tokio::test]
async fn a_tagged_enum_miss_says_which_tag_or_field_ref_1_6() {
    let definition = ToolDefinition::from_tool(DrawTool);
    let failed = failure(&definition, json!({"shape": {"kind": "oval"}})).await;
    assert_eq!(
        failed.message,
        "invalid arguments: \"shape\" must match exactly one oneOf branch (matched 0); \
         \"shape.kind\" must be one of [\"circle\",\"rect\"]"
    );
    let failed = failure(&definition, json!({"shape": 5})).await;
    assert_eq!(
        failed.message,
        "invalid arguments: \"shape\" must match exactly one oneOf branch (matched 0); \
         \"shape\" must be an object with \"kind\" one of [\"circle\",\"rect\"]"
    );
    let failed = failure(&definition, json!({"shape": {"radius": 1}})).await;
    assert_eq!(
        failed.message,
        "invalid arguments: \"shape\" must match exactly one oneOf branch (matched 0); \
         missing required property \"shape.kind\""
    );
    let failed = failure(
        &definition,
        json!({"shape": {"kind": "rect", "width": "2"}}),
    )
    .await;
    assert_eq!(
        failed.message,
        "invalid arguments: \"shape\" must match exactly one oneOf branch (matched 0); \
         missing required property \"shape.height\"; \"shape.width\" must be a number"
    );
}

/// Violation order, as in DSH: missing-required first (in `required` order), then children in the
/// schema's `properties` order, then undeclared keys in the value's order.
#[tokio::test]
async fn violations_follow_the_reference_order_ref_1_6() {
    let definition = raw(json!({
        "type": "object",
        "properties": {
            "b": {"type": "string"},
            "a": {"type": "integer"},
            "c": {"type": "integer"},
            "d": {"type": "boolean"}
        },
        "required": ["d", "c"],
        "additionalProperties": false
    }));
    let failed = failure(&definition, json!({"z": 1, "a": "x", "y": 2, "b": 3})).await;
    assert_eq!(
        failed.message,
        "invalid arguments: missing required property \"d\"; missing required property \"c\"; \
         \"b\" must be a string; \"a\" must be an integer; \
         unknown property \"z\"; \
         unknown property \"y\""
    );
}

/// An undeclared key of a closed object, at the top level or nested, is named with the declared
/// property it most likely meant, or alone when none is near; one message per key.
#[tokio::test]
async fn unknown_keys_are_named_with_the_nearest_declared_one() {
    let definition = raw(json!({
        "type": "object",
        "properties": {
            "assignee": {"type": "string"},
            "filter": {
                "type": "object",
                "properties": {"limit": {"type": "integer"}, "path": {"type": "string"}},
                "additionalProperties": false
            }
        },
        "additionalProperties": false
    }));
    let failed = failure(
        &definition,
        json!({"asignee": "ada", "filter": {"limt": 3, "paht": "src", "colour": "red"}}),
    )
    .await;
    assert_eq!(
        failed.message,
        "invalid arguments: unknown property \"filter.limt\"; did you mean \"limit\"?; \
         unknown property \"filter.paht\"; did you mean \"path\"?; \
         unknown property \"filter.colour\"; \
         unknown property \"asignee\"; did you mean \"assignee\"?"
    );
}

/// `enum` is checked before `const`, and an overlapping `oneOf` reports how many branches matched.
#[tokio::test]
async fn enum_before_const_and_one_of_match_count_ref_1_6() {
    let definition = raw(json!({
        "type": "object",
        "properties": {
            "e": {"const": "a", "enum": ["a", "b"]},
            "o": {"oneOf": [{"type": "integer"}, {"type": "number"}, {"minimum": 0}]}
        }
    }));
    let failed = failure(&definition, json!({"e": "b"})).await;
    assert_eq!(failed.message, "invalid arguments: \"e\" must be \"a\"");
    let failed = failure(&definition, json!({"e": "c"})).await;
    assert_eq!(
        failed.message,
        "invalid arguments: \"e\" must be one of [\"a\",\"b\"]"
    );
    let failed = failure(&definition, json!({"o": 3})).await;
    assert_eq!(
        failed.message,
        "invalid arguments: \"o\" must match exactly one oneOf branch (matched 3)"
    );
    let failed = failure(&definition, json!({"o": 1.5})).await;
    assert_eq!(
        failed.message,
        "invalid arguments: \"o\" must match exactly one oneOf branch (matched 2)"
    );
}

/// Shout.
#[tool(render = render_shout, presentation_meta = shout_meta)]
async fn shout(text: String) -> String {
    text
}

fn render_shout(args: &ShoutArgs, _output: &String) -> Vec<dsh_tools::result::ContentBlock> {
    assert!(args.text != "render", "render exploded");
    vec![dsh_tools::result::ContentBlock::text(
        args.text.to_uppercase(),
    )]
}

fn shout_meta(args: &ShoutArgs, _output: &String) -> Option<Value> {
    assert!(args.text != "meta", "meta exploded");
    Some(json!({"len": args.text.len()}))
}

/// A `render` or `presentation_meta` that panics is the tool's invalid output,
/// `output.render failed: …` / `output.presentationMeta failed: …`, not a plain panic failure.
#[tokio::test]
async fn a_panicking_presenter_is_invalid_tool_output_ref_1_10() {
    let definition = ToolDefinition::from_tool(ShoutTool);
    let ok = dispatch(&definition, json!({"text": "hi"})).await.unwrap();
    assert_eq!(ok.meta, Some(json!({"len": 2})));
    for (text, which) in [("render", "render"), ("meta", "presentationMeta")] {
        let failed = failure(&definition, json!({ "text": text })).await;
        assert_eq!(
            failed.code(),
            Some(dsh_tools::result::ErrorCode::InvalidToolOutput)
        );
        assert!(
            failed.message.starts_with(&format!(
                "tool \"shout\" returned invalid output: output.{which} failed: {text} exploded"
            )),
            "{}",
            failed.message
        );
    }
}

/// The same for a definition made with the builder: its `render` panicking is
/// `INVALID_TOOL_OUTPUT`, through `dispatch` and through a registry call.
#[tokio::test]
async fn a_panicking_builder_render_is_invalid_tool_output() {
    use dsh_tools::{Registry, ToolCall};
    let definition = ToolDefinition::builder("echo")
        .parameters(json!({"type": "object"}))
        .handler(|args, _exec| async move { Ok(args) })
        .render(|_args, _value| panic!("render exploded"))
        .build()
        .unwrap();
    let failed = failure(&definition, json!({})).await;
    assert_eq!(
        failed.code(),
        Some(dsh_tools::result::ErrorCode::InvalidToolOutput)
    );
    assert_eq!(
        failed.message,
        "tool \"echo\" returned invalid output: output.render failed: render exploded"
    );
    let registry = Registry::new();
    registry.register(definition).unwrap();
    let result = registry
        .execute(ToolCall::new("c1", "echo", json!({})))
        .await;
    assert_eq!(
        result.error_code(),
        Some(dsh_tools::result::ErrorCode::InvalidToolOutput),
        "{result:?}"
    );
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Total {
    sum: u32,
}

/// Sum.
#[tool(render = render_total, presentation_meta = total_meta)]
async fn total(a: u32) -> Total {
    Total { sum: a }
}

fn render_total(_args: &TotalArgs, output: &Total) -> Vec<dsh_tools::result::ContentBlock> {
    vec![dsh_tools::result::ContentBlock::text(format!(
        "sum = {}",
        output.sum
    ))]
}

fn total_meta(args: &TotalArgs, output: &Total) -> Option<Value> {
    Some(json!({"a": args.a, "sum": output.sum}))
}

#[derive(Serialize, JsonSchema)]
struct Opaque {
    sum: u32,
}

/// Sum without a way back from JSON.
#[tool(render = render_opaque)]
async fn opaque(a: u32) -> Opaque {
    Opaque { sum: a }
}

fn render_opaque(_args: &OpaqueArgs, output: &Opaque) -> Vec<dsh_tools::result::ContentBlock> {
    vec![dsh_tools::result::ContentBlock::text(format!(
        "sum = {}",
        output.sum
    ))]
}

/// A post-execute `Accept { value }` on a typed tool is rendered with the tool's own `render` and
/// its `meta` recomputed (not the default renderer, not the body's `meta`). An output type without
/// `Deserialize` cannot be read back and keeps the default rendering.
#[tokio::test]
async fn post_execute_value_replacement_rerenders_with_the_tool_ref_2_2() {
    use dsh_tools::hooks::PostDecision;
    use dsh_tools::{Registry, ToolCall};
    let registry = Registry::new();
    registry
        .register(ToolDefinition::from_tool(TotalTool))
        .unwrap();
    registry
        .register(ToolDefinition::from_tool(OpaqueTool))
        .unwrap();
    registry.on_post_execute(|_view, _result, _next| async {
        PostDecision::Accept {
            content: None,
            value: Some(json!({"sum": 42})),
            contexts: vec![],
        }
    });
    let result = registry
        .execute(ToolCall::new("1", "total", json!({"a": 1})))
        .await;
    assert_eq!(result.value(), Some(&json!({"sum": 42})));
    assert_eq!(
        dsh_tools::__private::blocks_text(result.content()),
        "sum = 42"
    );
    let dsh_tools::ToolResult::Success { meta, .. } = &result else {
        panic!("a success: {result:?}");
    };
    assert_eq!(meta.as_ref(), Some(&json!({"a": 1, "sum": 42})));

    let result = registry
        .execute(ToolCall::new("2", "opaque", json!({"a": 1})))
        .await;
    assert_eq!(result.value(), Some(&json!({"sum": 42})));
    assert_eq!(
        dsh_tools::__private::blocks_text(result.content()),
        "{\n  \"sum\": 42\n}"
    );
}

/// Options of a lookup.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LookupOptions {
    /// A nickname.
    #[serde(default)]
    nick: Option<String>,
    /// How many.
    #[serde(default)]
    #[schemars(range(min = 1))]
    count: Option<u32>,
}

/// Look up.
#[tool]
async fn lookup(#[args] options: LookupOptions) -> String {
    format!("{:?}/{:?}", options.nick, options.count)
}

/// An `#[args]` struct's schema says what the struct does: an optional `Option` has no
/// `"default": null` (its `null` is dropped with it), and `deny_unknown_fields` shows as
/// `additionalProperties: false` and reads as an `unknown property` violation.
#[tokio::test]
async fn an_args_struct_schema_follows_its_serde_attributes_ref_1_6() {
    let definition = ToolDefinition::from_tool(LookupTool);
    let parameters = definition.parameters();
    assert_eq!(
        parameters["additionalProperties"],
        json!(false),
        "{parameters}"
    );
    for name in ["nick", "count"] {
        assert!(
            parameters["properties"][name].get("default").is_none(),
            "{parameters}"
        );
    }
    let failed = failure(&definition, json!({"nick": "a", "bogus": 1})).await;
    assert_eq!(
        failed.message,
        "invalid arguments: unknown property \"bogus\""
    );
}

/// `null` for a required enum field is one message for that field, not one per keyword it
/// breaks.
#[tokio::test]
async fn null_for_a_required_enum_is_one_message() {
    #[dsh_tools::tool_type]
    enum Priority {
        Low,
        High,
    }
    /// File a ticket.
    #[tool]
    async fn ticket(priority: Priority, note: Option<String>) -> String {
        let _ = (priority, note);
        String::new()
    }
    let definition = ToolDefinition::from_tool(TicketTool);
    let failed = failure(&definition, json!({"priority": null})).await;
    assert_eq!(
        failed.message,
        "invalid arguments: \"priority\" must be one of [\"Low\",\"High\"]"
    );
}
