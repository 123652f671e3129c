//! `tools/call`: one call sent and settled by whichever comes first — the answer, a closed
//! transport, the caller's cancellation or the per-call timeout — with the rounds of input a
//! 2026-07-28 server may ask for, and the call's `CLIENT` span.

use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, DEFAULT_MRTR_MAX_ROUNDS, ElicitResult,
    ElicitationAction, InputRequest, InputRequests, InputResponses, ServerResult,
};
use rmcp::service::{PeerRequestOptions, RequestHandle};
use rmcp::{RoleClient, ServiceError};
use serde_json::{Map, Value};
use tracing::Instrument;

use super::errors::{disconnected, service_error};
use super::{Conn, span_peer};
use crate::call::ToolExec;
use crate::error::{ErrorCode, ToolError};
use crate::mcp::config::McpServer;
use crate::mcp::progress::Link;
use crate::mcp::results;
use crate::telemetry;

/// How long a call given up (cancelled or timed out) waits for its `notifications/cancelled`
/// to be sent before it returns: the notice is sent before the caller goes on (a command line
/// that exits next would otherwise end before a task sending it ran), and a transport that
/// does not take it within this bound is not waited for longer.
const CANCEL_NOTICE_BOUND: Duration = Duration::from_secs(5);

// rmcp's `server` feature (the MCP server side) makes `ServerResult` large; this value lives
// only for one match.
#[allow(clippy::large_enum_variant)]
enum Outcome {
    Answer(Box<Result<Result<ServerResult, ServiceError>, tokio::sync::oneshot::error::RecvError>>),
    Closed,
    Cancelled,
    TimedOut,
}

/// Sends `tools/call` and settles it: the answer, a closed transport (`MCP_DISCONNECTED`), the
/// caller's cancellation (`ABORTED`, the server is told) or the per-call timeout
/// (`TOOL_TIMEOUT`, the server is told) — whichever comes first.
///
/// The request is a `CLIENT` span (see [`crate::telemetry`]) whose context goes in its `_meta`.
pub(crate) async fn call_tool(
    config: &McpServer,
    link: &Link,
    conn: &Conn,
    raw_name: &str,
    arguments: Map<String, Value>,
    exec: &ToolExec,
) -> Result<Value, ToolError> {
    let version = conn
        .peer
        .peer_info()
        .map(|info| info.protocol_version.to_string());
    let span = telemetry::client_span(
        &span_peer(config),
        telemetry::TOOLS_CALL,
        Some(raw_name),
        version.as_deref(),
    );
    telemetry::record_session(&span, &conn.session);
    let mut params = CallToolRequestParams::new(raw_name.to_owned()).with_arguments(arguments);
    let mut meta = rmcp::model::MetaObject::new();
    telemetry::inject(&span, &mut meta);
    if !meta.0.is_empty() {
        params.meta = Some(meta.into());
    }
    let mut failure = None;
    let answer = call_tool_on_wire(config, link, conn, raw_name, params, exec, &mut failure)
        .instrument(span.clone())
        .await;
    if let Err(error) = &answer {
        let (error_type, rpc_code) = match failure {
            Some(Failure::Rpc(code)) => (None, Some(code)),
            Some(Failure::ToolError) => (Some(telemetry::TOOL_ERROR), None),
            None => (error.code(), None),
        };
        telemetry::failed(&span, error_type, rpc_code, error.message());
    }
    answer
}

/// Tells the server the call `handle` is given up (`notifications/cancelled` with `reason`),
/// waiting until the transport took the notice, at most [`CANCEL_NOTICE_BOUND`]. A transport
/// already closed has nobody to tell.
async fn send_cancel(handle: RequestHandle<RoleClient>, reason: &str) {
    let notice = handle.cancel(Some(reason.to_owned()));
    if tokio::time::timeout(CANCEL_NOTICE_BOUND, notice)
        .await
        .is_err()
    {
        tracing::debug!(target: "dsh_tool_mcp::mcp", "the server did not take the call's cancellation within {CANCEL_NOTICE_BOUND:?}");
    }
}

/// How a `tools/call` failed on the server's side, for its span.
enum Failure {
    /// A JSON-RPC error with this code.
    Rpc(i32),
    /// A result with `isError: true`.
    ToolError,
}

async fn call_tool_on_wire(
    config: &McpServer,
    link: &Link,
    conn: &Conn,
    raw_name: &str,
    mut params: CallToolRequestParams,
    exec: &ToolExec,
    failure: &mut Option<Failure>,
) -> Result<Value, ToolError> {
    let server = &config.name;
    let mut rounds = 0;
    let answer = loop {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
        let mut handle = match conn
            .peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(_) => {
                conn.closed.cancel();
                return Err(disconnected(server, raw_name));
            }
        };
        tracing::Span::current().record("jsonrpc.request.id", handle.id.to_string());
        let token = handle.progress_token.clone();
        link.progress
            .claim(&link.registry, token.clone(), exec.call_id());
        let deadline = conn.deadlines.start();
        let outcome = tokio::select! {
            biased;
            answer = &mut handle.rx => Outcome::Answer(Box::new(answer)),
            _ = conn.closed.cancelled() => Outcome::Closed,
            _ = exec.signal().cancelled() => Outcome::Cancelled,
            _ = deadline.expired() => Outcome::TimedOut,
        };
        drop(deadline);
        link.progress.release(&token);
        let answer = match outcome {
            Outcome::Answer(answer) => *answer,
            Outcome::Closed => return Err(disconnected(server, raw_name)),
            Outcome::Cancelled => {
                send_cancel(handle, "cancelled by the caller").await;
                return Err(ToolError::coded(
                    ErrorCode::Aborted,
                    "tool call was cancelled",
                ));
            }
            Outcome::TimedOut => {
                send_cancel(handle, "timed out").await;
                return Err(ToolError::coded(
                    ErrorCode::ToolTimeout,
                    format!("tool call timed out after {}ms", config.call_timeout_ms),
                ));
            }
        };
        // A 2026-07-28 server that needs the person: answer its requests and retry, carrying
        // its state back.
        let Ok(Ok(ServerResult::InputRequiredResult(input))) = answer else {
            break answer;
        };
        rounds += 1;
        if rounds > DEFAULT_MRTR_MAX_ROUNDS {
            return Err(ToolError::new(format!(
                "mcp server \"{server}\" asked for input more than {DEFAULT_MRTR_MAX_ROUNDS} times in one call of tool \"{raw_name}\""
            )));
        }
        let responses =
            input_responses(config, input.input_requests.unwrap_or_default(), exec).await?;
        params.input_responses = Some(responses);
        params.request_state = input.request_state;
    };
    // The tool value and whether the server flagged it as a tool error.
    let (value, is_error) = match answer {
        Ok(Ok(ServerResult::CallToolResult(result))) => {
            let is_error = result.is_error == Some(true);
            let value =
                results::typed_value(result).map_err(|err| ToolError::new(err.to_string()))?;
            (value, is_error)
        }
        Ok(Ok(ServerResult::CustomResult(raw))) => {
            let Value::Object(result) = raw.0 else {
                return Err(ToolError::new(format!(
                    "mcp server \"{server}\" answered tools/call with a non-object result"
                )));
            };
            let is_error = results::is_error(&result);
            (results::canonical_value(result), is_error)
        }
        Ok(Ok(other)) => {
            return Err(ToolError::new(format!(
                "mcp server \"{server}\" answered tools/call with an unexpected result: {}",
                serde_json::to_string(&other).unwrap_or_default()
            )));
        }
        Ok(Err(ServiceError::McpError(error))) => {
            *failure = Some(Failure::Rpc(error.code.0));
            return Err(ToolError::new(format!(
                "mcp server \"{server}\" refused tool \"{raw_name}\": {} (code {})",
                error.message, error.code.0
            )));
        }
        Ok(Err(ServiceError::TransportSend(_) | ServiceError::TransportClosed)) | Err(_) => {
            conn.closed.cancel();
            return Err(disconnected(server, raw_name));
        }
        Ok(Err(other)) => return Err(ToolError::new(service_error(&other))),
    };
    if is_error {
        *failure = Some(Failure::ToolError);
        return Err(ToolError::new(results::error_text(raw_name, &value)));
    }
    Ok(value)
}

/// Our answers to a server's `inputRequests`: elicitation through the host's handler (declined
/// without one), until the call's signal fires. Sampling and roots are not offered by this
/// client, so a request for them fails the call.
async fn input_responses(
    config: &McpServer,
    requests: InputRequests,
    exec: &ToolExec,
) -> Result<InputResponses, ToolError> {
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let InputRequest::Elicitation(request) = request else {
            return Err(ToolError::new(format!(
                "mcp server \"{}\" asked this client for sampling or roots, which it does not offer",
                config.name
            )));
        };
        let answer = match &config.elicitation {
            Some(handler) => tokio::select! {
                answer = handler.answer(request.params) => answer,
                () = exec.signal().cancelled() => {
                    return Err(ToolError::coded(ErrorCode::Aborted, "tool call was cancelled"));
                }
            },
            None => ElicitResult::new(ElicitationAction::Decline),
        };
        responses.insert(key, serde_json::to_value(answer).unwrap_or(Value::Null));
    }
    Ok(responses)
}
