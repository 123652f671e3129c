//! The messages the guarded client treats apart: `notifications/initialized` (the standalone
//! stream opens after it), a `tools/list` (its body is read again through the depth guard when
//! rmcp refused it), a request that only reads (sent once more when it got no answer).

use rmcp::model::{ClientJsonRpcMessage, ClientNotification, ClientRequest, JsonRpcMessage};

pub(super) fn is_initialized(message: &ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        JsonRpcMessage::Notification(notification)
            if matches!(notification.notification, ClientNotification::InitializedNotification(_))
    )
}

/// A request that only reads: asking twice has no more effect than asking once.
pub(super) fn only_reads(message: &ClientJsonRpcMessage) -> bool {
    let JsonRpcMessage::Request(request) = message else {
        return false;
    };
    matches!(
        request.request,
        ClientRequest::DiscoverRequest(_)
            | ClientRequest::PingRequest(_)
            | ClientRequest::ListToolsRequest(_)
            | ClientRequest::ListPromptsRequest(_)
            | ClientRequest::GetPromptRequest(_)
            | ClientRequest::ListResourcesRequest(_)
            | ClientRequest::ListResourceTemplatesRequest(_)
            | ClientRequest::ReadResourceRequest(_)
            | ClientRequest::GetTaskRequest(_)
    )
}

pub(super) fn is_tools_list(message: &ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        JsonRpcMessage::Request(request) if matches!(request.request, ClientRequest::ListToolsRequest(_))
    )
}

/// `true` when the request got no answer at all: the connection reset, closed before the
/// answer, or could not be opened. Not a timeout (a second one would double the bound), not an
/// answer the server sent.
pub(super) fn unanswered(error: &reqwest::Error) -> bool {
    error.is_request() && !error.is_timeout()
}
