//! OAuth for servers reached over streamable HTTP, on rmcp's OAuth client. Discovery follows the
//! MCP authorization specification: the server's `401` challenge and RFC 9728 metadata name its
//! authorization server, whose RFC 8414 or OpenID Connect metadata names the endpoints; a server
//! without metadata falls back to `/authorize`, `/token` and `/register` at its root (the
//! 2025-03-26 revision).
//!
//! Two grants: client credentials for services ([`McpClientCredentials`]) and the
//! authorization code with PKCE for a person ([`McpOAuthLogin`]), whose browser step is an
//! [`McpAuthorizer`] — [`McpLoopbackAuthorizer`] at the command line.

mod bearer;
mod credentials;
mod http_client;
mod login;
mod loopback;
mod store;
mod unanswered;

pub(crate) use bearer::BearerClient;
pub use credentials::McpClientCredentials;
pub(crate) use credentials::{CredentialsGrant, authorize};
pub(crate) use login::{LoginState, login_client};
pub use login::{McpAuthorizeError, McpAuthorizer, McpOAuthLogin};
pub use loopback::McpLoopbackAuthorizer;
