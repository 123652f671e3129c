//! The suite's MCP 2026-07-28 test tools: multi round-trip requests (SEP-2322), where every
//! request for the client becomes an `input_required` result under the key the tool names,
//! the undeclared-capability error (SEP-2575) and a tool whose argument travels as a header
//! (SEP-2243).

use dsh_tools::client::{Elicitation, ElicitationRequest, RootsRequest, SamplingRequest};
use dsh_tools::definition::DefinitionError;
use dsh_tools::result::ContentBlock;
use dsh_tools::serde_json::{Value, json};
use dsh_tools::{ToolDefinition, ToolError, ToolExec, tool};

use super::client_error;

/// A form asking for one string property `name`, required.
fn one_string(message: &str, name: &str, key: &str) -> ElicitationRequest {
    ElicitationRequest::new(
        message,
        json!({
            "type": "object",
            "properties": {name: {"type": "string"}},
            "required": [name],
        }),
    )
    .input_key(key)
}

/// The value of `field` in an accepted form, or what the person did instead.
async fn ask(
    exec: &ToolExec,
    request: ElicitationRequest,
    field: &str,
) -> Result<String, ToolError> {
    Ok(match exec.elicit(request).await.map_err(client_error)? {
        Elicitation::Accept(content) => match content.get(field) {
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        },
        other => format!("{other:?}"),
    })
}

/// The text the client's model answered `prompt` with, asked under `key`.
async fn sample(
    exec: &ToolExec,
    prompt: &str,
    max_tokens: u32,
    key: &str,
) -> Result<String, ToolError> {
    let reply = exec
        .sample(SamplingRequest::user_text(prompt, max_tokens).input_key(key))
        .await
        .map_err(client_error)?;
    Ok(match reply.content {
        ContentBlock::Text { text } => text,
        other => format!("[{} content]", other.kind()),
    })
}

/// The client's roots as a comma-separated list of URIs, asked under `key`.
async fn roots(exec: &ToolExec, key: &str) -> Result<String, ToolError> {
    let roots = exec
        .list_roots(RootsRequest::new().input_key(key))
        .await
        .map_err(client_error)?;
    Ok(roots
        .iter()
        .map(|root| root.uri.as_str())
        .collect::<Vec<_>>()
        .join(", "))
}

/// Asks the person's name and greets them.
#[tool]
pub(crate) async fn test_input_required_result_elicitation(
    exec: &ToolExec,
) -> Result<String, ToolError> {
    let name = ask(
        exec,
        one_string("What is your name?", "name", "user_name"),
        "name",
    )
    .await?;
    Ok(format!("Hello, {name}!"))
}

/// Asks the client's model for the capital of France.
#[tool]
pub(crate) async fn test_input_required_result_sampling(
    exec: &ToolExec,
) -> Result<String, ToolError> {
    let answer = sample(
        exec,
        "What is the capital of France?",
        100,
        "capital_question",
    )
    .await?;
    Ok(format!("LLM response: {answer}"))
}

/// Lists the client's roots.
#[tool]
pub(crate) async fn test_input_required_result_list_roots(
    exec: &ToolExec,
) -> Result<String, ToolError> {
    Ok(format!("Roots: {}", roots(exec, "client_roots").await?))
}

/// Asks for a confirmation; the server keeps the call, so the `requestState` the client echoes
/// is only a handle to it.
#[tool]
pub(crate) async fn test_input_required_result_request_state(
    exec: &ToolExec,
) -> Result<String, ToolError> {
    let ok = confirm(exec).await?;
    Ok(format!("state-ok: confirmed={ok}"))
}

/// Asks for a name, a greeting from the model and the roots at once: one round, three keys.
#[tool]
pub(crate) async fn test_input_required_result_multiple_inputs(
    exec: &ToolExec,
) -> Result<String, ToolError> {
    let (name, greeting, roots) = tokio::join!(
        ask(
            exec,
            one_string("What is your name?", "name", "user_name"),
            "name"
        ),
        sample(exec, "Generate a greeting", 50, "greeting"),
        roots(exec, "client_roots"),
    );
    Ok(format!(
        "name: {}, greeting: {}, roots: {}",
        name?, greeting?, roots?
    ))
}

/// Asks two questions, one round each.
#[tool]
pub(crate) async fn test_input_required_result_multi_round(
    exec: &ToolExec,
) -> Result<String, ToolError> {
    let name = ask(
        exec,
        one_string("Step 1: What is your name?", "name", "step1"),
        "name",
    )
    .await?;
    let color = ask(
        exec,
        one_string("Step 2: What is your favorite color?", "color", "step2"),
        "color",
    )
    .await?;
    Ok(format!("{name} likes {color}"))
}

/// Asks for a confirmation; a `requestState` the server did not hand out is refused.
#[tool]
pub(crate) async fn test_input_required_result_tampered_state(
    exec: &ToolExec,
) -> Result<String, ToolError> {
    let ok = confirm(exec).await?;
    Ok(format!("confirmed={ok}"))
}

/// Asks only what the client declared it can answer: a form, the model, or both.
#[tool]
pub(crate) async fn test_input_required_result_capabilities(
    exec: &ToolExec,
) -> Result<String, ToolError> {
    let client = exec.client();
    let mut answers = Vec::new();
    if client.can_elicit() {
        let name = ask(
            exec,
            one_string("What is your name?", "name", "user_name"),
            "name",
        );
        answers.push(format!("name: {}", name.await?));
    }
    if client.can_sample() {
        let answer = sample(
            exec,
            "What is the capital of France?",
            100,
            "capital_question",
        );
        answers.push(format!("capital: {}", answer.await?));
    }
    Ok(answers.join(", "))
}

/// Needs the client's model: a client that did not declare `sampling` gets the protocol's
/// missing-capability error (-32021) instead of a result.
#[tool]
pub(crate) async fn test_missing_capability(exec: &ToolExec) -> Result<String, ToolError> {
    sample(exec, "Say hello", 10, "hello").await
}

/// Asks a form question: at 2026-07-28 the request travels in the `input_required` result, never
/// as a request on the response stream.
#[tool]
pub(crate) async fn test_streaming_elicitation(exec: &ToolExec) -> Result<String, ToolError> {
    let name = ask(
        exec,
        one_string("What is your name?", "name", "user_name"),
        "name",
    )
    .await?;
    Ok(format!("Hello, {name}!"))
}

/// Logs one message: a client that did not ask for logs hears none.
#[tool]
pub(crate) async fn test_logging_tool(exec: &ToolExec) -> Result<String, ToolError> {
    exec.log(dsh_tools::client::LogLevel::Info, "logging tool ran")
        .await
        .map_err(client_error)?;
    Ok("logged".to_owned())
}

/// A tool whose `region` argument a client also sends as the header `Mcp-Param-Region`
/// (SEP-2243 `x-mcp-header`), so that intermediaries can route on it; rmcp checks that both
/// agree. Its schema is written by hand, and served as written.
pub(crate) fn test_headers() -> Result<ToolDefinition, DefinitionError> {
    ToolDefinition::builder("test_headers")
        .description("Echoes the region it was routed to (sent as the Mcp-Param-Region header).")
        .parameters(json!({
            "type": "object",
            "properties": {
                "region": {
                    "type": "string",
                    "description": "The region to route to.",
                    "x-mcp-header": "Region",
                },
            },
            "required": ["region"],
        }))
        .handler(|arguments: Value, _exec: ToolExec| async move {
            let region = arguments["region"].as_str().unwrap_or_default().to_owned();
            Ok(json!(format!("region: {region}")))
        })
        .build()
}

/// Asks the client to confirm (input key `confirm`): the `ok` it answers.
async fn confirm(exec: &ToolExec) -> Result<String, ToolError> {
    let request = ElicitationRequest::new(
        "Please confirm",
        json!({
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
        }),
    )
    .input_key("confirm");
    ask(exec, request, "ok").await
}
