//! The suite's tasks-extension test tools (SEP-2663): a tool marked `#[tool(task)]` runs as a
//! task for a client that declares `io.modelcontextprotocol/tasks`, and as an ordinary call for
//! any other.

use std::time::Duration;

use dsh_tools::client::{Elicitation, ElicitationRequest};
use dsh_tools::definition::DefinitionError;
use dsh_tools::result::ErrorCode;
use dsh_tools::serde_json::{Value, json};
use dsh_tools::{ToolDefinition, ToolError, ToolExec, tool};

use super::client_error;

/// Greets `name` at once (never a task).
#[tool]
pub(crate) async fn greet(
    /// Who to greet.
    name: String,
) -> String {
    format!("Hello, {name}!")
}

/// Works for `seconds` seconds, then answers; `tasks/cancel` ends it cancelled.
#[tool(task)]
pub(crate) async fn slow_compute(
    /// How long to work, in seconds (0 answers at once).
    seconds: Option<f64>,
    exec: &ToolExec,
) -> Result<String, ToolError> {
    let seconds = seconds.unwrap_or(0.0).clamp(0.0, 600.0);
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {
            Ok(format!("computed for {seconds} seconds"))
        }
        () = exec.signal().cancelled() => Err(ToolError::new("cancelled")),
    }
}

/// Fails after a second's work, as a tool error (the task completes with `isError`). It runs
/// only as a task: a client that does not declare the tasks extension gets the protocol's
/// missing-capability error (-32021) and the job does not run.
pub(crate) fn failing_job() -> Result<ToolDefinition, DefinitionError> {
    ToolDefinition::builder("failing_job")
        .description("Fails after a second's work.")
        .task_required()
        .handler(|_: Value, exec: ToolExec| async move {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                () = exec.signal().cancelled() => {}
            }
            Err(ToolError::new("the job failed"))
        })
        .build()
}

/// Fails as a failure of the server rather than with an answer of its own: a tool error coded
/// [`ErrorCode::Internal`] ends its task `failed` with a protocol-level error (`-32603`, data
/// `{"code": "INTERNAL_ERROR"}`), and answers a plain call with that JSON-RPC error.
#[tool(task)]
pub(crate) async fn protocol_error_job() -> Result<String, ToolError> {
    Err(ToolError::coded(
        ErrorCode::Internal,
        "protocol_error_job always fails as the server",
    ))
}

fn confirmation(message: &str, key: &str) -> ElicitationRequest {
    ElicitationRequest::new(
        message,
        json!({
            "type": "object",
            "properties": {"confirm": {"type": "boolean"}},
            "required": ["confirm"],
        }),
    )
    .input_key(key)
}

fn answer(elicitation: Elicitation) -> String {
    match elicitation {
        Elicitation::Accept(content) => Value::Object(content).to_string(),
        other => format!("{other:?}"),
    }
}

/// Asks the person to confirm a deletion, then reports what they said.
#[tool(task)]
pub(crate) async fn confirm_delete(
    /// The file to delete.
    filename: Option<String>,
    exec: &ToolExec,
) -> Result<String, ToolError> {
    let filename = filename.unwrap_or_else(|| "file.txt".to_owned());
    let reply = exec
        .elicit(confirmation(&format!("Delete {filename}?"), "confirm"))
        .await
        .map_err(client_error)?;
    Ok(format!("delete {filename}: {}", answer(reply)))
}

/// Asks two questions at once, so that two requests are open together.
#[tool(task)]
pub(crate) async fn multi_input(exec: &ToolExec) -> Result<String, ToolError> {
    let (first, second) = tokio::join!(
        exec.elicit(confirmation("First question?", "first")),
        exec.elicit(confirmation("Second question?", "second")),
    );
    Ok(format!(
        "first: {}, second: {}",
        answer(first.map_err(client_error)?),
        answer(second.map_err(client_error)?)
    ))
}

/// Asks the person's name in `input_required` rounds of its `tools/call`, then works on as a
/// task (the retry that answers gets the task); the result names them. It runs only as a task.
pub(crate) fn test_tool_with_task() -> Result<ToolDefinition, DefinitionError> {
    ToolDefinition::builder("test_tool_with_task")
        .description("Asks your name, then works on it as a task.")
        .task_required()
        .input_before_task()
        .handler(|_: Value, exec: ToolExec| async move {
            let request = ElicitationRequest::new(
                "What is your name?",
                json!({
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                }),
            )
            .input_key("user_name");
            let name = match exec.elicit(request).await.map_err(client_error)? {
                Elicitation::Accept(content) => content
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                other => format!("{other:?}"),
            };
            Ok(json!(format!("Task done for {name}")))
        })
        .build()
}
