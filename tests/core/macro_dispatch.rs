//! Runtime behaviour of the tools `#[tool]` and `#[toolbox]` generate, observed through
//! `ToolDefinition::from_tool(..).dispatch(..)`.

use std::fmt;
use std::sync::Arc;

use dsh_tools::definition::Dispatched;
use dsh_tools::presentation::CallView;
use dsh_tools::result::{ContentBlock, ToolFailure};
use dsh_tools::{ToolDefinition, ToolError, ToolExec, ToolResult, tool, toolbox};
use serde_json::{Value, json};

/// Read a UTF-8 text file and return a window of its lines.
///
/// Lines are 1-based.
#[tool(concurrency_safe, timeout_ms = 5_000)]
async fn read_file(
    /// Absolute path of the file.
    #[arg(length(min = 1), pattern = "^/")]
    path: String,
    /// First line to return, 1-based.
    #[arg(default = 1, range(min = 1))]
    offset: u64,
    /// Maximum number of lines.
    #[arg(range(min = 1, max = 100))]
    limit: Option<u32>,
    exec: ToolExec,
) -> Result<String, ToolError> {
    Ok(format!("{}:{path}:{offset}:{limit:?}", exec.tool_name()))
}

async fn dispatch(definition: &ToolDefinition, args: Value) -> Result<Dispatched, ToolFailure> {
    definition
        .dispatch(args, ToolExec::detached(definition.name()))
        .await
}

async fn value(definition: &ToolDefinition, args: Value) -> Value {
    match dispatch(definition, args).await {
        Ok(dispatched) => dispatched.value,
        Err(failure) => panic!("unexpected failure: {}", failure.message),
    }
}

async fn failure(definition: &ToolDefinition, args: Value) -> ToolFailure {
    match dispatch(definition, args).await {
        Ok(dispatched) => panic!("unexpected success: {}", dispatched.value),
        Err(failure) => failure,
    }
}

#[tokio::test]
async fn defaults_fill_absent_arguments_and_exec_reaches_the_body() {
    let definition = ToolDefinition::from_tool(ReadFileTool);
    assert_eq!(definition.name(), "read_file");
    assert_eq!(
        definition.description(),
        "Read a UTF-8 text file and return a window of its lines.\n\nLines are 1-based."
    );
    assert_eq!(definition.timeout_ms(), Some(5_000));
    assert_eq!(
        value(&definition, json!({"path": "/a"})).await,
        json!("read_file:/a:1:None")
    );
    assert_eq!(
        value(&definition, json!({"path": "/a", "offset": 7, "limit": 3})).await,
        json!("read_file:/a:7:Some(3)")
    );
}

#[tokio::test]
async fn an_explicit_null_for_an_optional_argument_counts_as_absent() {
    let definition = ToolDefinition::from_tool(ReadFileTool);
    assert_eq!(
        value(&definition, json!({"path": "/a", "limit": null})).await,
        json!("read_file:/a:1:None")
    );
}

/// A nested `null` of an optional field reads as absent whether or not a constraint elsewhere
/// makes the arguments go through the schema check as well.
#[tokio::test]
async fn a_nested_null_counts_as_absent_beside_a_constraint() {
    let args = json!({"assignee": "ana", "filter": {"limit": 2, "path": null}});
    for definition in [
        ToolDefinition::from_tool(AssignTool),
        ToolDefinition::from_tool(AssignNamedTool),
    ] {
        assert_eq!(value(&definition, args.clone()).await, json!("ana:2:None"));
    }
    // The schema check still runs for what it is there for.
    let failure = failure(
        &ToolDefinition::from_tool(AssignNamedTool),
        json!({"assignee": "", "filter": {"limit": 2, "path": null}}),
    )
    .await;
    assert!(
        failure.message.contains("\"assignee\""),
        "{}",
        failure.message
    );
}

#[tokio::test]
async fn constraints_are_checked_before_the_body_and_every_violation_is_reported() {
    let definition = ToolDefinition::from_tool(ReadFileTool);
    let failure = failure(&definition, json!({"path": "", "offset": 0, "limit": 101})).await;
    assert_eq!(
        failure.message,
        "invalid arguments: \"path\" must be at least 1 characters long; \
         \"path\" must match the pattern \"^/\"; \"offset\" must be >= 1; \"limit\" must be <= 100"
    );
    let info = failure.info.expect("coded failure");
    assert_eq!(
        (info.name.as_str(), info.code.as_str()),
        ("ToolArgsError", "INVALID_ARGS")
    );
}

#[tokio::test]
async fn type_errors_use_the_schema_messages() {
    let definition = ToolDefinition::from_tool(ReadFileTool);
    assert_eq!(
        failure(&definition, json!({"offset": "x"})).await.message,
        "invalid arguments: missing required property \"path\"; \"offset\" must be an integer"
    );
    assert_eq!(
        failure(&definition, json!([1])).await.message,
        "invalid arguments: \"arguments\" must be an object"
    );
}

/// A tool that declares nothing refuses a key it does not know, at the top level and inside a
/// `#[tool_type]` struct, naming the declared key it most likely meant; `allow_unknown` (on the
/// tool and on the type) accepts the same keys.
#[tokio::test]
async fn unknown_keys_are_refused_unless_allow_unknown() {
    let closed = ToolDefinition::from_tool(ReadFileTool);
    assert_eq!(closed.parameters()["additionalProperties"], json!(false));
    assert_eq!(
        failure(&closed, json!({"path": "/a", "extra": true}))
            .await
            .message,
        "invalid arguments: unknown property \"extra\""
    );
    let failed = failure(&closed, json!({"path": "/a", "ofset": 2})).await;
    assert_eq!(
        failed.message,
        "invalid arguments: unknown property \"ofset\"; did you mean \"offset\"?"
    );
    assert_eq!(failed.info.expect("coded failure").code, "INVALID_ARGS");
    // `deny_unknown` says the default explicitly.
    let strict = ToolDefinition::from_tool(StrictEchoTool);
    assert_eq!(strict.parameters()["additionalProperties"], json!(false));
    assert_eq!(
        failure(&strict, json!({"txt": "hi"})).await.message,
        "invalid arguments: missing required property \"text\"; unknown property \"txt\"; did you mean \"text\"?"
    );

    let nested = ToolDefinition::from_tool(AssignTool);
    let failed = failure(
        &nested,
        json!({"assignee": "ada", "filter": {"limit": 3, "paht": "src", "colour": "red"}}),
    )
    .await;
    assert_eq!(
        failed.message,
        "invalid arguments: unknown property \"filter.paht\"; did you mean \"path\"?; \
         unknown property \"filter.colour\""
    );
    assert_eq!(failed.info.expect("coded failure").code, "INVALID_ARGS");
    assert_eq!(
        value(&nested, json!({"assignee": "ada", "filter": {"limit": 3}})).await,
        json!("ada:3:None")
    );

    let open = ToolDefinition::from_tool(LooseAssignTool);
    assert!(open.parameters().get("additionalProperties").is_none());
    assert_eq!(
        value(
            &open,
            json!({"assignee": "ada", "asignee": "bob", "filter": {"limit": 3, "paht": "src"}})
        )
        .await,
        json!("ada:3:None")
    );
}

/// Echo the text, saying explicitly that other keys are refused.
#[tool(deny_unknown)]
async fn strict_echo(text: String) -> String {
    text
}

/// Echo the text.
#[tool]
async fn echo(text: String) -> String {
    text
}

/// Which tickets to touch.
#[dsh_tools::tool_type]
struct Filter {
    /// At most this many.
    limit: u32,
    /// Under this path.
    path: Option<String>,
}

/// Which tickets to touch, extra keys allowed.
#[dsh_tools::tool_type(allow_unknown)]
struct LooseFilter {
    /// At most this many.
    limit: u32,
    /// Under this path.
    path: Option<String>,
}

/// Assign tickets.
#[tool]
async fn assign(assignee: String, filter: Filter) -> String {
    format!("{assignee}:{}:{:?}", filter.limit, filter.path)
}

/// Assign tickets to a named owner.
#[tool]
async fn assign_named(#[arg(length(min = 1))] assignee: String, filter: Filter) -> String {
    format!("{assignee}:{}:{:?}", filter.limit, filter.path)
}

/// Assign tickets, whatever else the model sends.
#[tool(allow_unknown)]
async fn loose_assign(assignee: String, filter: LooseFilter) -> String {
    format!("{assignee}:{}:{:?}", filter.limit, filter.path)
}

/// List a directory.
#[tool(
    name = "ls",
    concurrency_safe = is_shallow,
    render = render_listing,
    present_call = present_ls,
    presentation_meta = listing_meta,
    finalize_content = finalize_ls,
    args = LsArguments,
)]
async fn list_dir(
    #[arg(description = "Directory to list.", rename = "dirPath")] dir: String,
    #[arg(default = false)] recursive: bool,
) -> Vec<String> {
    vec![
        format!("{dir}/a"),
        format!("{dir}/b{}", if recursive { "/" } else { "" }),
    ]
}

fn is_shallow(args: &LsArguments) -> bool {
    !args.recursive
}

fn render_listing(args: &LsArguments, entries: &[String]) -> Vec<ContentBlock> {
    vec![ContentBlock::text(format!(
        "{}: {}",
        args.dir,
        entries.join(", ")
    ))]
}

fn present_ls(args: &LsArguments) -> CallView {
    CallView::Generic {
        title: format!("ls {}", args.dir),
        kind: Default::default(),
        raw_input: None,
        content: Vec::new(),
        locations: Vec::new(),
    }
}

fn listing_meta(_: &LsArguments, entries: &[String]) -> Value {
    json!({"count": entries.len()})
}

fn finalize_ls(_: &ToolExec, result: &ToolResult) -> Option<Vec<ContentBlock>> {
    result
        .is_error()
        .then(|| vec![ContentBlock::text("listing failed")])
}

#[tokio::test]
async fn renamed_arguments_use_the_wire_name() {
    let definition = ToolDefinition::from_tool(ListDirTool);
    assert_eq!(definition.name(), "ls");
    assert_eq!(
        definition.parameters()["properties"]["dirPath"]["description"],
        json!("Directory to list.")
    );
    assert_eq!(
        value(&definition, json!({"dirPath": "/x"})).await,
        json!(["/x/a", "/x/b"])
    );
    assert_eq!(
        failure(&definition, json!({"dir": "/x"})).await.message,
        "invalid arguments: missing required property \"dirPath\"; unknown property \"dir\""
    );
}

#[tokio::test]
async fn the_classifier_sees_typed_arguments() {
    let ls = ToolDefinition::from_tool(ListDirTool);
    assert!(ls.is_concurrency_safe(&json!({"dirPath": "/x"})));
    assert!(!ls.is_concurrency_safe(&json!({"dirPath": "/x", "recursive": true})));
    assert!(!ls.is_concurrency_safe(&json!({"recursive": false})));

    let always = ToolDefinition::from_tool(ReadFileTool);
    assert!(always.is_concurrency_safe(&json!({"path": "/a"})));
    let exclusive = ToolDefinition::from_tool(EchoTool);
    assert!(!exclusive.is_concurrency_safe(&json!({"text": "a"})));
}

#[tokio::test]
async fn render_presentation_and_finalize_hooks_are_wired() {
    let definition = ToolDefinition::from_tool(ListDirTool);
    let dispatched = dispatch(&definition, json!({"dirPath": "/x"}))
        .await
        .expect("success");
    assert_eq!(dispatched.content, [ContentBlock::text("/x: /x/a, /x/b")]);
    assert_eq!(dispatched.meta, Some(json!({"count": 2})));
    assert!(matches!(
        definition.present_call(&json!({"dirPath": "/x"})),
        Some(CallView::Generic { title, .. }) if title == "ls /x"
    ));
    assert!(definition.has_finalize_content());
    let exec = ToolExec::detached("ls");
    let failed = ToolResult::failure(ToolFailure::plain("boom"));
    assert_eq!(
        definition.finalize_content(&exec, &failed),
        Some(vec![ContentBlock::text("listing failed")])
    );

    // Without hooks: a string is one text block, other values pretty JSON.
    let echo = ToolDefinition::from_tool(EchoTool);
    let plain = dispatch(&echo, json!({"text": "hi"}))
        .await
        .expect("success");
    assert_eq!(plain.content, [ContentBlock::text("hi")]);
    assert_eq!(plain.meta, None);
    assert!(!echo.has_finalize_content());
    assert!(echo.present_call(&json!({"text": "hi"})).is_none());
}

#[derive(Debug)]
struct DiskFull;

impl fmt::Display for DiskFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("disk full")
    }
}

/// Write text, failing with a `Display` error when it is empty.
#[tool]
async fn write(text: String) -> Result<usize, DiskFull> {
    if text.is_empty() {
        Err(DiskFull)
    } else {
        Ok(text.len())
    }
}

/// Fail with a coded error.
#[tool]
async fn fail_coded() -> Result<(), ToolError> {
    Err(ToolError::new("no space left").with_code("ENOSPC"))
}

/// A body's own error type: it displays, and its `From` gives it a code.
#[derive(Debug)]
enum BankError {
    Overdrawn { short_by: u64 },
}

impl fmt::Display for BankError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BankError::Overdrawn { short_by } => write!(f, "short by {short_by}"),
        }
    }
}

impl From<BankError> for ToolError {
    fn from(err: BankError) -> Self {
        ToolError::new(format!("insufficient funds: {err}"))
            .with_code("E_FUNDS")
            .with_name("BankError")
    }
}

/// Withdraw from a balance of 100.
#[tool]
async fn withdraw(amount: u64) -> Result<u64, BankError> {
    100_u64
        .checked_sub(amount)
        .ok_or_else(|| BankError::Overdrawn {
            short_by: amount - 100,
        })
}

/// Do nothing.
#[tool]
async fn nothing() {}

#[tokio::test]
async fn errors_keep_their_message_and_code() {
    let write = ToolDefinition::from_tool(WriteTool);
    assert_eq!(value(&write, json!({"text": "abc"})).await, json!(3));
    let plain = failure(&write, json!({"text": ""})).await;
    assert_eq!((plain.message.as_str(), plain.info), ("disk full", None));

    let coded = failure(&ToolDefinition::from_tool(FailCodedTool), json!({})).await;
    assert_eq!(coded.message, "no space left");
    let info = coded.info.expect("coded");
    assert_eq!(
        (info.name.as_str(), info.code.as_str()),
        ("ToolError", "ENOSPC")
    );

    // Returned directly, an error with `From<E> for ToolError` converts through it, not `Display`.
    let withdraw = ToolDefinition::from_tool(WithdrawTool);
    assert_eq!(value(&withdraw, json!({"amount": 30})).await, json!(70));
    let overdrawn = failure(&withdraw, json!({"amount": 130})).await;
    assert_eq!(overdrawn.message, "insufficient funds: short by 30");
    let info = overdrawn.info.expect("coded");
    assert_eq!(
        (info.name.as_str(), info.code.as_str()),
        ("BankError", "E_FUNDS")
    );

    let nothing = ToolDefinition::from_tool(NothingTool);
    assert_eq!(value(&nothing, json!({})).await, Value::Null);
    assert_eq!(
        nothing.parameters(),
        &json!({"type": "object", "properties": {}, "additionalProperties": false})
    );
    assert_eq!(nothing.output_schema(), Some(&json!({"type": "null"})));
}

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Query {
    /// Text to find.
    text: String,
    /// How many copies.
    #[serde(default)]
    copies: Option<usize>,
}

/// Repeat a query.
#[tool]
async fn repeat(#[args] query: Query, exec: &ToolExec) -> Vec<String> {
    let _ = exec.call_id();
    vec![query.text; query.copies.unwrap_or(1)]
}

#[tokio::test]
async fn an_args_struct_is_the_whole_parameters_schema() {
    let definition = ToolDefinition::from_tool(RepeatTool);
    assert_eq!(
        definition.parameters()["properties"]["text"]["description"],
        json!("Text to find.")
    );
    assert_eq!(
        value(&definition, json!({"text": "a", "copies": 2})).await,
        json!(["a", "a"])
    );
}

struct Notes {
    prefix: String,
}

#[toolbox]
impl Notes {
    /// Prefix a note.
    #[tool(concurrency_safe)]
    async fn note(&self, text: String) -> String {
        format!("{}{text}", self.prefix)
    }

    /// The prefix length.
    #[tool(name = "prefix-len")]
    pub(crate) async fn prefix_len(&self) -> usize {
        self.prefix.len()
    }
}

struct Store<K> {
    keys: Vec<K>,
}

#[toolbox]
impl<K> Store<K>
where
    K: fmt::Display + Send + Sync + 'static,
{
    /// List keys.
    #[tool(timeout_ms = 50)]
    async fn keys(&self, exec: ToolExec) -> Vec<String> {
        let _ = exec;
        self.keys.iter().map(ToString::to_string).collect()
    }
}

#[tokio::test]
async fn toolboxes_share_their_value_across_tools() {
    let tools = Arc::new(Notes {
        prefix: "- ".into(),
    })
    .tools();
    let names: Vec<&str> = tools.iter().map(ToolDefinition::name).collect();
    assert_eq!(names, ["note", "prefix-len"]);
    assert_eq!(value(&tools[0], json!({"text": "x"})).await, json!("- x"));
    assert!(tools[0].is_concurrency_safe(&json!({"text": "x"})));
    assert_eq!(value(&tools[1], json!({})).await, json!(2));

    let store = Arc::new(Store { keys: vec![1, 2] }).tools();
    assert_eq!(store[0].timeout_ms(), Some(50));
    assert_eq!(value(&store[0], json!({})).await, json!(["1", "2"]));
}

#[tokio::test]
async fn the_fn_stays_callable_directly() {
    let text = read_file("/a".into(), 2, None, ToolExec::detached("direct"))
        .await
        .expect("ok");
    assert_eq!(text, "direct:/a:2:None");
    let notes = Notes { prefix: ">".into() };
    assert_eq!(notes.note("x".into()).await, ">x");
}
