//! A call's result and progress as MCP carries them: `CallToolResult` (content, `isError`,
//! `structuredContent`) and the progress notifications of a call under way. Shared by plain
//! calls (`handler.rs`) and tasks (`tasks.rs`).

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock as McpContent, ResourceContents};

use super::listing::declares_object_output;
use crate::error::ErrorCode;
use crate::events::ToolEvent;
use crate::registry::Registry;
use crate::result::{self, ContentBlock, ToolResult};
use crate::scope::AgentId;

/// A call's result in MCP's form: content, `isError`, and `structuredContent` when the tool
/// declares an object output.
pub(super) fn mcp_result(
    registry: &Registry,
    scope: Option<&AgentId>,
    name: &str,
    result: &ToolResult,
) -> CallToolResult {
    let mut content: Vec<McpContent> = result.content().iter().map(mcp_content).collect();
    content.extend(
        result
            .additional_contexts()
            .iter()
            .flat_map(|context| context.content.iter().map(mcp_content)),
    );
    match result {
        ToolResult::Failure { .. } => CallToolResult::error(content),
        ToolResult::Success { value, .. } => {
            let mut answer = CallToolResult::success(content);
            let declared = registry
                .get(name, scope)
                .as_ref()
                .is_some_and(declares_object_output);
            if declared && value.is_object() {
                answer.structured_content = Some(value.clone());
            }
            answer
        }
    }
}

/// The protocol error (`-32603`, the failure's message, `data.code` its code) a result stands
/// for when it is a failure of the server rather than the tool's answer: a tool's
/// [`ErrorCode::Internal`], and in a task (`panics`) also a contained panic
/// ([`ErrorCode::ToolPanicked`]), which a plain call keeps reporting as its `isError` result.
pub(super) fn server_failure(result: &ToolResult, panics: bool) -> Option<ErrorData> {
    let failure = result.error()?;
    let code = failure.code()?;
    let failed = match code {
        ErrorCode::Internal => true,
        ErrorCode::ToolPanicked => panics,
        _ => false,
    };
    failed.then(|| {
        ErrorData::internal_error(
            failure.message.clone(),
            Some(serde_json::json!({ "code": code.as_str() })),
        )
    })
}

/// The progress `event` reports for the call `call_id` (progress, total, message), if it is
/// one of its: a code-mode sub-call starting or settling, or progress a tool (an MCP server
/// behind us) reported.
pub(super) fn progress_of(
    event: &ToolEvent,
    call_id: &str,
) -> Option<(Option<f64>, Option<f64>, Option<String>)> {
    let sub_call = |id: &str| {
        id.strip_prefix(call_id)
            .is_some_and(|rest| rest.starts_with(":code:"))
    };
    let (progress, total, message) = match event {
        ToolEvent::CodeDispatchStart { parent, name, .. } if parent == call_id => {
            (None, None, Some(format!("{name} started")))
        }
        ToolEvent::CodeDispatch {
            parent,
            name,
            is_error,
            ..
        } if parent == call_id => {
            let outcome = if *is_error { "error" } else { "ok" };
            (None, None, Some(format!("{name} {outcome}")))
        }
        // The called tool itself reports (an MCP server behind us): its own figures pass through.
        ToolEvent::Progress {
            call_id: id,
            progress,
            total,
            message,
        } if id == call_id => (Some(*progress), *total, message.clone()),
        // A program's sub-call reports: our own count keeps the sequence increasing.
        ToolEvent::Progress {
            call_id: id,
            message,
            ..
        } if sub_call(id) => (None, None, message.clone()),
        _ => return None,
    };
    Some((progress, total, message))
}

/// A content block in MCP's form.
fn mcp_content(block: &ContentBlock) -> McpContent {
    match block {
        ContentBlock::Text { text } => McpContent::text(text.clone()),
        ContentBlock::Image { media_type, data } => {
            McpContent::image(data.clone(), media_type.clone())
        }
        ContentBlock::Audio { media_type, data } => {
            McpContent::audio(data.clone(), media_type.clone())
        }
        ContentBlock::Resource {
            uri,
            media_type,
            contents,
        } => {
            let resource = match contents {
                result::ResourceContents::Text(text) => ResourceContents::text(text, uri),
                result::ResourceContents::Blob(blob) => ResourceContents::blob(blob, uri),
            };
            McpContent::resource(match media_type {
                Some(media_type) => resource.with_mime_type(media_type),
                None => resource,
            })
        }
        // A block kind this version has no MCP form for: its text.
        other => McpContent::text(crate::result::blocks_text(std::slice::from_ref(other))),
    }
}
