//! How a connection's failures read: a failed connect or handshake, a request that could not be
//! sent, a call cut off by a closed transport — in words, without rmcp's internal type names.

use rmcp::ServiceError;
use rmcp::service::ClientInitializeError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

use crate::error::ToolError;
use crate::mcp::config::{McpError, McpServer, Transport};

/// The `code` of a call that failed because the server's transport closed.
pub const MCP_DISCONNECTED: &str = "MCP_DISCONNECTED";

pub(super) fn connect_error(server: &str, message: impl std::fmt::Display) -> McpError {
    McpError::Connect {
        server: server.to_owned(),
        message: message.to_string(),
    }
}

/// What went wrong opening an HTTP server, without rmcp's internal transport type names: a
/// transport failure reads `no MCP server answers at URL: <innermost cause>`; one while getting
/// a token names the authorization server, and a `401` says the server wants OAuth.
fn http_connect_failure(url: &str, err: ClientInitializeError) -> String {
    match err {
        ClientInitializeError::TransportError { error, .. } => {
            let mut cause: &(dyn std::error::Error + 'static) = error.error.as_ref();
            let mut stage = Stage::Server;
            loop {
                match cause.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                    #[cfg(feature = "oauth")]
                    Some(StreamableHttpError::Auth(_)) => stage = Stage::AuthorizationServer,
                    Some(StreamableHttpError::AuthRequired(_)) => stage = Stage::Unauthorized,
                    _ => {}
                }
                // rmcp's client error does not name its cause as `source`.
                let next = match cause.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                    Some(StreamableHttpError::Client(inner)) => Some(inner as _),
                    _ => cause.source(),
                };
                match next {
                    Some(next) => cause = next,
                    None => break,
                }
            }
            match stage {
                Stage::Server => format!("no MCP server answers at {url}: {cause}"),
                #[cfg(feature = "oauth")]
                Stage::AuthorizationServer => {
                    format!("OAuth: the authorization server of {url} failed: {cause}")
                }
                Stage::Unauthorized => format!(
                    "the MCP server at {url} requires OAuth authorization (HTTP 401): {cause}"
                ),
            }
        }
        other => other.to_string(),
    }
}

/// A request's failure in words: rmcp's transport error names the transport by its Rust type
/// (`Transport [rmcp::transport::worker::WorkerTransport<…>] error: …`), so a failed send is
/// told by its innermost cause instead.
pub(super) fn service_error(err: &ServiceError) -> String {
    match err {
        ServiceError::TransportSend(error) => {
            let mut cause: &(dyn std::error::Error + 'static) = error.error.as_ref();
            loop {
                // rmcp's client error does not name its cause as `source`.
                let next = match cause.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                    Some(StreamableHttpError::Client(inner)) => Some(inner as _),
                    _ => cause.source(),
                };
                match next {
                    Some(next) => cause = next,
                    None => break,
                }
            }
            format!("the request could not be sent to the server: {cause}")
        }
        other => other.to_string(),
    }
}

/// Where an HTTP connect failed.
enum Stage {
    Server,
    #[cfg(feature = "oauth")]
    AuthorizationServer,
    Unauthorized,
}

/// A failed handshake as the bridge reports it.
pub(super) fn start_error(config: &McpServer, err: ClientInitializeError) -> McpError {
    match &config.transport {
        Transport::Http { url } => connect_error(&config.name, http_connect_failure(url, err)),
        Transport::Stdio { .. } => connect_error(&config.name, err),
    }
}

pub(crate) fn disconnected(server: &str, raw_name: &str) -> ToolError {
    ToolError::new(format!(
        "mcp server \"{server}\" disconnected before tool \"{raw_name}\" finished"
    ))
    .with_code(MCP_DISCONNECTED)
    .with_name("McpDisconnectedError")
}

pub(crate) fn not_connected(server: &str) -> ToolError {
    ToolError::new(format!("mcp server \"{server}\" is not connected"))
        .with_code(MCP_DISCONNECTED)
        .with_name("McpDisconnectedError")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_send_is_told_in_words_not_rust_type_names() {
        let cause = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the pipe is broken");
        let error =
            ServiceError::TransportSend(rmcp::transport::DynamicTransportError::from_parts(
                "rmcp::transport::worker::WorkerTransport<rmcp::transport::Example>",
                std::any::TypeId::of::<()>(),
                Box::new(cause),
            ));
        assert!(
            error.to_string().contains("rmcp::"),
            "rmcp's own text names the type"
        );
        let text = service_error(&error);
        assert_eq!(
            text,
            "the request could not be sent to the server: the pipe is broken"
        );
    }
}
