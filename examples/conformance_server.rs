//! The test tools of the official MCP conformance suite (npm `@modelcontextprotocol/conformance`),
//! each an ordinary `#[tool]` fn or hand-written definition, served over streamable HTTP on
//! loopback without authentication so that the suite's client can connect: the 2025 tools
//! here, the 2026-07-28 ones (multi round-trip requests, capabilities, headers) in `input`, the
//! tasks extension's in `tasks`.
//!
//! ```sh
//! cargo run --features mcp-server --example conformance_server -- 3001
//! ```
//!
//! The argument is the port (default: one the OS picks). The server prints
//! `listening on http://127.0.0.1:PORT/mcp` on stdout once it accepts connections, and serves
//! until it is killed.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dsh_tools::client::{ClientError, Elicitation, ElicitationRequest, LogLevel, SamplingRequest};
use dsh_tools::definition::DefinitionError;
use dsh_tools::mcp::{McpHttpAuth, McpServeOptions, McpTaskLimits, McpTransport};
use dsh_tools::prelude::*;
use dsh_tools::registry::{Handle, RegisterError};
use dsh_tools::result::{ContentBlock, ResourceContents};
use dsh_tools::serde_json::{Value, json};
use dsh_tools::{Registry, ToolDefinition, ToolError, ToolExec, tool};

#[path = "conformance_server/input.rs"]
mod input;
#[path = "conformance_server/tasks.rs"]
mod tasks;

/// A 1×1 red PNG.
const RED_PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// A WAV file of one silent 8 kHz, 8-bit mono sample.
const SILENT_WAV: &str = "UklGRiUAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQEAAACA";

/// Returns a simple text response.
#[tool]
async fn test_simple_text() -> String {
    "This is a simple text response for testing.".to_owned()
}

/// The tool of the suite's `server-sse-polling` scenario (SEP-1699): it ends the stream of
/// the request it answers (`ToolExec::close_stream`), telling the client to reconnect after
/// 100 ms, waits until the client has resumed it with `Last-Event-ID`, and answers on the
/// resumed stream. Where the answer travels no resumable stream (a stateless request, stdio)
/// it answers at once.
#[tool]
async fn test_reconnection(exec: &ToolExec) -> Result<String, ToolError> {
    exec.close_stream(Duration::from_millis(100))
        .await
        .map_err(client_error)?;
    Ok("Reconnection test completed successfully".to_owned())
}

/// Returns a 1x1 red PNG image.
#[tool(render = image_block)]
async fn test_image_content() -> String {
    RED_PIXEL_PNG.to_owned()
}

#[allow(clippy::ptr_arg)] // a render hook receives `&Output`, here `&String`
fn image_block(_: &TestImageContentArgs, data: &String) -> Vec<ContentBlock> {
    vec![ContentBlock::Image {
        media_type: "image/png".to_owned(),
        data: data.clone(),
    }]
}

/// Returns a short WAV audio clip.
#[tool(render = audio_block)]
async fn test_audio_content() -> String {
    SILENT_WAV.to_owned()
}

#[allow(clippy::ptr_arg)] // a render hook receives `&Output`, here `&String`
fn audio_block(_: &TestAudioContentArgs, data: &String) -> Vec<ContentBlock> {
    vec![ContentBlock::Audio {
        media_type: "audio/wav".to_owned(),
        data: data.clone(),
    }]
}

/// Returns an embedded text resource.
#[tool(render = resource_block)]
async fn test_embedded_resource() -> String {
    "This is an embedded resource content.".to_owned()
}

#[allow(clippy::ptr_arg)] // a render hook receives `&Output`, here `&String`
fn resource_block(_: &TestEmbeddedResourceArgs, text: &String) -> Vec<ContentBlock> {
    vec![ContentBlock::text_resource(
        "test://embedded-resource",
        "text/plain",
        text.clone(),
    )]
}

/// Returns text, an image and an embedded resource.
#[tool(render = mixed_blocks)]
async fn test_multiple_content_types() -> Value {
    json!({"test": "data", "value": 123})
}

fn mixed_blocks(_: &TestMultipleContentTypesArgs, data: &Value) -> Vec<ContentBlock> {
    vec![
        ContentBlock::text("Multiple content types test:"),
        ContentBlock::Image {
            media_type: "image/png".to_owned(),
            data: RED_PIXEL_PNG.to_owned(),
        },
        ContentBlock::Resource {
            uri: "test://mixed-content-resource".to_owned(),
            media_type: Some("application/json".to_owned()),
            contents: ResourceContents::Text(data.to_string()),
        },
    ]
}

/// Sends three log messages while it runs.
#[tool]
async fn test_tool_with_logging(exec: &ToolExec) -> Result<String, ToolError> {
    for (step, message) in [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    .into_iter()
    .enumerate()
    {
        if step > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        exec.log(LogLevel::Info, message)
            .await
            .map_err(client_error)?;
    }
    Ok("Tool with logging executed successfully".to_owned())
}

/// Reports progress 0, 50 and 100 out of 100.
#[tool]
async fn test_tool_with_progress(exec: &ToolExec) -> String {
    for progress in [0.0, 50.0, 100.0] {
        if progress > 0.0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        exec.report_progress(progress, Some(100.0), None);
    }
    "Tool with progress executed successfully".to_owned()
}

/// Always fails.
#[tool]
async fn test_error_handling() -> Result<String, ToolError> {
    Err(ToolError::new(
        "This tool intentionally returns an error for testing",
    ))
}

/// Asks the client's model to answer `prompt`.
#[tool]
async fn test_sampling(
    /// The prompt to send to the LLM.
    prompt: String,
    exec: &ToolExec,
) -> Result<String, ToolError> {
    let reply = exec
        .sample(SamplingRequest::user_text(prompt, 100))
        .await
        .map_err(client_error)?;
    let text = match &reply.content {
        ContentBlock::Text { text } => text.clone(),
        other => format!("[{} content]", other.kind()),
    };
    Ok(format!("LLM response: {text}"))
}

/// Asks the user for a username and an email address.
#[tool]
async fn test_elicitation(
    /// The message to show the user.
    message: String,
    exec: &ToolExec,
) -> Result<String, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    });
    let answer = elicit(exec, message, schema).await?;
    Ok(format!("User response: {answer}"))
}

/// Asks for values of every primitive type, each with a default.
#[tool]
async fn test_elicitation_sep1034_defaults(exec: &ToolExec) -> Result<String, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": true},
        },
    });
    let answer = elicit(
        exec,
        "Please review and update the form fields with defaults",
        schema,
    )
    .await?;
    Ok(format!("Elicitation completed: {answer}"))
}

/// Asks with each form of enum: untitled, titled, legacy titled, and both multi-selects.
#[tool]
async fn test_elicitation_sep1330_enums(exec: &ToolExec) -> Result<String, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Select one option",
                "enum": ["option1", "option2", "option3"],
            },
            "titledSingle": {
                "type": "string",
                "description": "Select one option with titles",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "description": "Select one option (legacy)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Select multiple options",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "description": "Select multiple options with titles",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ],
                },
            },
        },
        "required": [],
    });
    let answer = elicit(exec, "Please select options from the enum fields", schema).await?;
    Ok(format!("Elicitation completed: {answer}"))
}

/// A tool whose schema is written by hand with JSON Schema 2020-12 features (`$schema`, `$defs`
/// with an `$anchor`, `$ref`, `allOf`/`anyOf`, `if`/`then`/`else`): served as written.
fn json_schema_2020_12_tool() -> Result<ToolDefinition, DefinitionError> {
    ToolDefinition::builder("json_schema_2020_12_tool")
        .description("Tool with JSON Schema 2020-12 features")
        .parameters(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                },
            },
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
                "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                "phone": {"type": "string"},
                "email": {"type": "string"},
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {
                "properties": {"contactMethod": {"const": "phone"}},
                "required": ["contactMethod"],
            },
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": false,
        }))
        .handler(|arguments: Value, _exec: ToolExec| async move {
            let name = arguments["name"].as_str().unwrap_or("-").to_owned();
            Ok(json!(format!("name: {name}")))
        })
        .build()
}

/// Says it is there; added and removed by `test_trigger_tool_change`.
#[tool]
async fn test_dynamic_tool() -> String {
    "test_dynamic_tool is listed".to_owned()
}

/// The registration of `test_dynamic_tool` while it is listed.
#[derive(Default)]
struct DynamicTool(Mutex<Option<Handle>>);

impl DynamicTool {
    /// Removes `test_dynamic_tool` when listed, adds it otherwise; says which.
    fn toggle(&self, registry: &Registry) -> Result<&'static str, RegisterError> {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.take() {
            Some(handle) => {
                handle.unregister();
                Ok("removed test_dynamic_tool")
            }
            None => {
                *slot = Some(registry.register(TestDynamicToolTool)?);
                Ok("added test_dynamic_tool")
            }
        }
    }
}

/// A tool that adds or removes the tool `test_dynamic_tool` each time it is called, so that
/// clients listening for list changes hear of one.
fn test_trigger_tool_change(registry: &Registry) -> Result<ToolDefinition, DefinitionError> {
    let registry = registry.clone();
    let dynamic: Arc<DynamicTool> = Arc::default();
    ToolDefinition::builder("test_trigger_tool_change")
        .description("Adds or removes the tool test_dynamic_tool, changing the tool list.")
        .handler(move |_arguments: Value, _exec: ToolExec| {
            let registry = registry.clone();
            let dynamic = dynamic.clone();
            async move {
                let changed = dynamic.toggle(&registry).map_err(|error| {
                    ToolError::new(format!("the tool list could not change: {error}"))
                })?;
                Ok(json!(changed))
            }
        })
        .build()
}

/// `action=<accept|decline|cancel>, content=<JSON>` of one elicitation.
async fn elicit(
    exec: &ToolExec,
    message: impl Into<String>,
    schema: Value,
) -> Result<String, ToolError> {
    let answer = exec
        .elicit(ElicitationRequest::new(message, schema))
        .await
        .map_err(client_error)?;
    Ok(match answer {
        Elicitation::Accept(content) => {
            format!("action=accept, content={}", Value::Object(content))
        }
        Elicitation::Decline => "action=decline, content={}".to_owned(),
        Elicitation::Cancel => "action=cancel, content={}".to_owned(),
        other => format!("action={other:?}"),
    })
}

/// A failed request to the client as the tool's error.
fn client_error(error: ClientError) -> ToolError {
    ToolError::new(error.to_string())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = match std::env::args().nth(1) {
        Some(port) => port.parse().map_err(|error| {
            format!("the port \"{port}\" is not a number from 0 to 65535: {error}")
        })?,
        None => 0,
    };
    let registry = Registry::new();
    registry.register(TestSimpleTextTool)?;
    registry.register(TestReconnectionTool)?;
    registry.register(TestImageContentTool)?;
    registry.register(TestAudioContentTool)?;
    registry.register(TestEmbeddedResourceTool)?;
    registry.register(TestMultipleContentTypesTool)?;
    registry.register(TestToolWithLoggingTool)?;
    registry.register(TestToolWithProgressTool)?;
    registry.register(TestErrorHandlingTool)?;
    registry.register(TestSamplingTool)?;
    registry.register(TestElicitationTool)?;
    registry.register(TestElicitationSep1034DefaultsTool)?;
    registry.register(TestElicitationSep1330EnumsTool)?;
    registry.register(json_schema_2020_12_tool()?)?;
    registry.register(test_trigger_tool_change(&registry)?)?;
    registry.register_all([
        input::TestInputRequiredResultElicitationTool.into(),
        input::TestInputRequiredResultSamplingTool.into(),
        input::TestInputRequiredResultListRootsTool.into(),
        input::TestInputRequiredResultRequestStateTool.into(),
        input::TestInputRequiredResultMultipleInputsTool.into(),
        input::TestInputRequiredResultMultiRoundTool.into(),
        input::TestInputRequiredResultTamperedStateTool.into(),
        input::TestInputRequiredResultCapabilitiesTool.into(),
        input::TestMissingCapabilityTool.into(),
        input::TestStreamingElicitationTool.into(),
        input::TestLoggingToolTool.into(),
        input::test_headers()?,
        tasks::GreetTool.into(),
        tasks::SlowComputeTool.into(),
        tasks::failing_job()?,
        tasks::ProtocolErrorJobTool.into(),
        tasks::ConfirmDeleteTool.into(),
        tasks::MultiInputTool.into(),
        tasks::test_tool_with_task()?,
    ])?;

    // Without authentication on loopback the server accepts its own loopback origins (the
    // suite's DNS-rebinding check sends them); any other origin is refused.
    let transport = McpTransport::http(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .await?
        .with_auth(McpHttpAuth::None);
    let addr = transport
        .local_addr()
        .ok_or("the HTTP transport has no address")?;
    // Every stateless request without OAuth is one principal, with one share of task slots
    // (16 by default). The suite's scenarios all run statelessly against this one server, and a
    // finished task keeps its slot until its TTL: the suite gets the server's whole pool.
    let options = McpServeOptions::default()
        .server_name("dsh-tools-conformance")
        .task_limits(McpTaskLimits::default().max_per_session(64));
    println!("listening on http://{addr}/mcp");
    registry.serve_mcp_with(None, transport, options).await?;
    Ok(())
}
