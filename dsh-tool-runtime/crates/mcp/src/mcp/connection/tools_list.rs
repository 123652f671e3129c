//! `tools/list`: every page, as raw JSON, within the server's caps on pages, tools and bytes.

use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::{ClientRequest, ListToolsRequest, PaginatedRequestParams, ServerResult};
use rmcp::service::PeerRequestOptions;
use serde_json::Value;

use super::Conn;
use super::errors::service_error;
use crate::mcp::config::{McpError, McpServer};

/// Every tool of every page of `tools/list`, as raw JSON (no cache: each sync asks the server).
/// Every tool entry of `tools/list`, page after page, as JSON, within the server's caps on
/// pages, tools and bytes ([`McpServer::max_list_pages`], [`McpServer::max_tools`],
/// [`McpServer::max_list_bytes`]): a cap cuts the list where it is reached, with a warning, and
/// the entries before the cut are kept. A repeated cursor ends the list the same way.
pub(crate) async fn list_tools(config: &McpServer, conn: &Conn) -> Result<Vec<Value>, McpError> {
    let server = &config.name;
    let list_error = |message: String| McpError::List {
        server: server.clone(),
        message,
    };
    let cut = |why: String| {
        tracing::warn!(target: "dsh_tool_mcp::mcp", server = %server, "tool list cut: {why}");
    };
    let mut tools = Vec::new();
    let mut bytes = 0usize;
    let mut cursor: Option<String> = None;
    let mut seen = std::collections::HashSet::new();
    for page in 0..config.max_list_pages {
        let request = ClientRequest::ListToolsRequest(ListToolsRequest {
            method: Default::default(),
            params: Some(PaginatedRequestParams::default().with_cursor(cursor.clone())),
            extensions: Default::default(),
        });
        // rmcp's own per-request timeout: on expiry it also tells the server the request is
        // cancelled.
        let options =
            PeerRequestOptions::with_timeout(Duration::from_millis(config.list_timeout_ms));
        let answer = conn
            .peer
            .send_request_with_option(request, options)
            .await
            .map_err(|err| list_error(service_error(&err)))?
            .await_response()
            .await
            .map_err(|err| match err {
                ServiceError::Timeout { .. } => McpError::Timeout {
                    server: server.clone(),
                    stage: "tools/list",
                    timeout_ms: config.list_timeout_ms,
                },
                err => list_error(service_error(&err)),
            })?;
        // A list rmcp's typed model refuses (one malformed tool) arrives as a custom result; both
        // are read per tool from the JSON so one bad entry cannot hide its siblings. A typed list
        // is turned into JSON one tool at a time, so a long page is never held twice.
        let (items, next): (Box<dyn Iterator<Item = Value>>, Option<String>) = match answer {
            ServerResult::ListToolsResult(list) => (
                Box::new(
                    list.tools
                        .into_iter()
                        .map(|tool| serde_json::to_value(tool).unwrap_or(Value::Null)),
                ),
                list.next_cursor,
            ),
            other => {
                let page = match other {
                    ServerResult::CustomResult(raw) => raw.0,
                    other => {
                        serde_json::to_value(other).map_err(|err| list_error(err.to_string()))?
                    }
                };
                let Value::Object(mut page) = page else {
                    return Err(list_error("the answer is not an object".to_owned()));
                };
                let Some(Value::Array(items)) = page.remove("tools") else {
                    return Err(list_error("the answer has no \"tools\" array".to_owned()));
                };
                let next = match page.remove("nextCursor") {
                    Some(Value::String(next)) => Some(next),
                    _ => None,
                };
                (Box::new(items.into_iter()), next)
            }
        };
        for item in items {
            if tools.len() == config.max_tools {
                cut(format!(
                    "more than {} tools; the first {} are kept",
                    config.max_tools, config.max_tools
                ));
                return Ok(tools);
            }
            let size = usize::try_from(crate::json::serialized_len(&item)).unwrap_or(usize::MAX);
            if bytes.saturating_add(size) > config.max_list_bytes {
                cut(format!(
                    "the tools listed pass {} bytes; the first {} ({bytes} bytes) are kept",
                    config.max_list_bytes,
                    tools.len()
                ));
                return Ok(tools);
            }
            bytes += size;
            tools.push(item);
        }
        match next.filter(|next| !next.is_empty()) {
            Some(next) if !seen.insert(next.clone()) => {
                cut(format!("cursor \"{next}\" repeats on page {}", page + 1));
                return Ok(tools);
            }
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    cut(format!(
        "more than {} pages; the tools of the first {} are kept",
        config.max_list_pages, config.max_list_pages
    ));
    Ok(tools)
}
