//! How to reach an MCP server and how the bridge treats it.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use crate::call::{Elicitation, ElicitationRequest};

/// Reconnection after the transport closes: exponential backoff from `initial_delay_ms`, doubled
/// per attempt up to `max_delay_ms`, at most `max_attempts` attempts (defaults as in DSH: enabled,
/// 500 ms, 30 000 ms, 10).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReconnectPolicy {
    /// Whether the bridge reconnects at all.
    pub enabled: bool,
    /// Delay before the first attempt, in ms.
    pub initial_delay_ms: u64,
    /// Longest delay between attempts, in ms.
    pub max_delay_ms: u64,
    /// Attempts before giving up (the tools then stay registered and fail with
    /// `MCP_DISCONNECTED`).
    pub max_attempts: u32,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        ReconnectPolicy {
            enabled: true,
            initial_delay_ms: 500,
            max_delay_ms: 30_000,
            max_attempts: 10,
        }
    }
}

impl ReconnectPolicy {
    /// Never reconnect.
    pub fn disabled() -> Self {
        ReconnectPolicy {
            enabled: false,
            ..ReconnectPolicy::default()
        }
    }

    /// Sets the first delay (ms).
    pub fn initial_delay_ms(mut self, ms: u64) -> Self {
        self.initial_delay_ms = ms;
        self
    }

    /// Sets the longest delay (ms).
    pub fn max_delay_ms(mut self, ms: u64) -> Self {
        self.max_delay_ms = ms;
        self
    }

    /// Sets the number of attempts.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// The delay before attempt `attempt` (0-based).
    pub(crate) fn delay_ms(&self, attempt: u32) -> u64 {
        self.initial_delay_ms
            .saturating_mul(1u64 << attempt.min(32))
            .min(self.max_delay_ms)
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Transport {
    Stdio { command: String, args: Vec<String> },
    Http { url: String },
}

/// One MCP server to bridge: a transport plus its settings.
///
/// ```no_run
/// # async fn demo() -> Result<(), dsh_tool_mcp::mcp::McpError> {
/// use dsh_tool_runtime::Registry;
/// use dsh_tool_mcp::McpExt;
/// use dsh_tool_mcp::mcp::McpServer;
///
/// let registry = Registry::new();
/// let server = McpServer::stdio("everything", "mcp-server-everything", ["stdio"])
///     .call_timeout_ms(30_000);
/// let handle = registry.add_mcp_server(server).await?;
/// assert!(handle.tools().iter().any(|name| name == "mcp__everything__echo"));
/// handle.disconnect().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct McpServer {
    pub(crate) name: String,
    pub(crate) transport: Transport,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) call_timeout_ms: u64,
    pub(crate) connect_timeout_ms: u64,
    pub(crate) list_timeout_ms: u64,
    pub(crate) reconnect: ReconnectPolicy,
    pub(crate) max_message_bytes: usize,
    pub(crate) max_tools: usize,
    pub(crate) max_list_bytes: usize,
    pub(crate) max_list_pages: usize,
    #[cfg(feature = "oauth")]
    pub(crate) credentials: Option<super::oauth::McpClientCredentials>,
    pub(crate) elicitation: Option<super::elicitation::ElicitationHandler>,
    #[cfg(feature = "oauth")]
    pub(crate) login: Option<super::oauth::McpOAuthLogin>,
}

/// Default of [`McpServer::max_tools`]: 1,000 tools.
pub const DEFAULT_MAX_TOOLS: usize = 1_000;
/// Default of [`McpServer::max_list_bytes`]: 16 MiB.
pub const DEFAULT_MAX_LIST_BYTES: usize = 16 << 20;
/// Default of [`McpServer::max_list_pages`]: 100 pages.
pub const DEFAULT_MAX_LIST_PAGES: usize = 100;

/// The longest line relayed by default: 64 MiB ([`McpServer::max_message_bytes`]). A longer
/// answer is replaced by a JSON-RPC error for its request, so the call fails at once, saying why.
pub(crate) const MAX_LINE_BYTES: usize = 64 << 20;

impl McpServer {
    fn new(name: impl Into<String>, transport: Transport) -> Self {
        McpServer {
            name: name.into(),
            transport,
            env: Vec::new(),
            cwd: None,
            headers: Vec::new(),
            call_timeout_ms: 60_000,
            connect_timeout_ms: 30_000,
            list_timeout_ms: 30_000,
            reconnect: ReconnectPolicy::default(),
            max_message_bytes: MAX_LINE_BYTES,
            max_tools: DEFAULT_MAX_TOOLS,
            max_list_bytes: DEFAULT_MAX_LIST_BYTES,
            max_list_pages: DEFAULT_MAX_LIST_PAGES,
            #[cfg(feature = "oauth")]
            credentials: None,
            elicitation: None,
            #[cfg(feature = "oauth")]
            login: None,
        }
    }

    /// A server the bridge starts as a child process and talks to over stdin/stdout. Its stderr
    /// goes to `tracing` (target `dsh_tool_mcp::mcp`, level `info`), one event per line,
    /// decoded lossily, each cut to 8 KiB (the rest dropped and counted); it is read until EOF.
    /// `name` must be 1 to 32 of `[A-Za-z0-9_-]`, without `__`, not ending in `_`.
    pub fn stdio<I, S>(name: impl Into<String>, command: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        McpServer::new(
            name,
            Transport::Stdio {
                command: command.into(),
                args: args.into_iter().map(Into::into).collect(),
            },
        )
    }

    /// A server reached over streamable HTTP at `url` (e.g. `http://127.0.0.1:3001/mcp`).
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        McpServer::new(name, Transport::Http { url: url.into() })
    }

    /// The server name (the `<server>` of `mcp__<server>__<tool>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether every HTTP request carries a header named `name` (case-insensitive) set with
    /// [`header`](Self::header): `"authorization"` tells a server given a static token.
    pub fn sends_header(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(header, _)| header.eq_ignore_ascii_case(name))
    }

    /// Adds an environment variable for a stdio server (the parent's environment is inherited).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The working directory of a stdio server.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Adds an HTTP header sent with every request to an HTTP server.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Authenticates to an HTTP server with the OAuth client-credentials grant (feature
    /// `oauth`): an access token from the server's authorization server is sent with every
    /// request, asked for again when it expires or is refused. Failing to get one fails the
    /// connect with [`McpError::Connect`] (`OAuth: …`). Each OAuth request (discovery, token)
    /// is bounded by the longest of the connect, list and call timeouts. Ignored for stdio
    /// servers.
    #[cfg(feature = "oauth")]
    #[cfg_attr(docsrs, doc(cfg(feature = "oauth")))]
    pub fn client_credentials(mut self, credentials: super::McpClientCredentials) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// Logs a person in to an HTTP server with the OAuth authorization code grant and PKCE
    /// (feature `oauth`) when the server asks for a token: see [`McpOAuthLogin`] for discovery,
    /// scopes, refresh and where tokens are kept. While connecting, the time the authorizer
    /// waits for the person (`McpAuthorizer::authorize`) does not count against
    /// [`connect_timeout_ms`](Self::connect_timeout_ms): the authorizer's own wait bounds it,
    /// and a server that never answers still fails within the connect timeout. During later
    /// requests the person's step counts against that request's timeout. Each OAuth request
    /// (discovery, registration, token) is bounded by the longest of the connect, list and call
    /// timeouts. A failed login fails the connect with [`McpError::Connect`] (`OAuth …`). Client credentials, when also set, take
    /// precedence. Ignored for stdio servers.
    ///
    /// [`McpOAuthLogin`]: super::McpOAuthLogin
    #[cfg(feature = "oauth")]
    #[cfg_attr(docsrs, doc(cfg(feature = "oauth")))]
    pub fn oauth_login(mut self, login: super::McpOAuthLogin) -> Self {
        self.login = Some(login);
        self
    }

    /// Per-call timeout in ms (default 60 000); a call that runs longer fails with
    /// `TOOL_TIMEOUT` and the server is sent `notifications/cancelled`.
    pub fn call_timeout_ms(mut self, ms: u64) -> Self {
        self.call_timeout_ms = ms;
        self
    }

    /// Timeout of connect + `initialize`, in ms (default 30 000).
    pub fn connect_timeout_ms(mut self, ms: u64) -> Self {
        self.connect_timeout_ms = ms;
        self
    }

    /// Timeout of each `tools/list` page, in ms (default 30 000).
    pub fn list_timeout_ms(mut self, ms: u64) -> Self {
        self.list_timeout_ms = ms;
        self
    }

    /// The reconnection policy (default [`ReconnectPolicy::default`]).
    pub fn reconnect(mut self, policy: ReconnectPolicy) -> Self {
        self.reconnect = policy;
        self
    }

    /// The longest message a stdio server may send, in bytes, newline excluded (default 64 MiB).
    /// A longer line is read past without being kept; when it answers a request, that request
    /// fails at once with a JSON-RPC error saying so. Streamable HTTP answers keep rmcp's own
    /// limits (16 MiB per JSON body).
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// The most tools registered from this server (default [`DEFAULT_MAX_TOOLS`], 1,000). The
    /// first `max` listed are kept, the rest dropped with a warning, and no further page is
    /// asked for.
    pub fn max_tools(mut self, max: usize) -> Self {
        self.max_tools = max;
        self
    }

    /// The most bytes of tool entries read from one `tools/list` sync, all pages together, each
    /// entry measured as compact JSON (default [`DEFAULT_MAX_LIST_BYTES`], 16 MiB). The entry
    /// that would pass the limit and all after it are dropped with a warning. On stdio, one
    /// page whose answer line is longer fails the list before it is parsed
    /// ([`McpError::List`]): parsed, a page costs some 30 times its text.
    pub fn max_list_bytes(mut self, bytes: usize) -> Self {
        self.max_list_bytes = bytes;
        self
    }

    /// Lets the server ask the person at this host for input while it runs a call (MCP
    /// elicitation, form mode, protocol 2025-06-18 on): with a handler the client declares the
    /// `elicitation` capability, and every request the server makes — `elicitation/create` on a
    /// 2025 session, an `input_required` round on a 2026-07-28 one — goes to `handler`, which
    /// shows [`ElicitationRequest::message`] and answers with what the person did. An accepted
    /// answer gets the requested schema's `default` for every property it leaves out (SEP-1034).
    /// A URL-mode request is declined. Without a handler nothing is declared and a server
    /// cannot ask.
    ///
    /// ```no_run
    /// use dsh_tool_mcp::mcp::McpServer;
    /// use dsh_tool_runtime::{Elicitation, ElicitationRequest};
    ///
    /// let server = McpServer::http("tickets", "http://127.0.0.1:8080/mcp").on_elicitation(
    ///     |request: ElicitationRequest| async move {
    ///         eprintln!("the server asks: {}", request.message);
    ///         Elicitation::Decline
    ///     },
    /// );
    /// ```
    pub fn on_elicitation<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(ElicitationRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Elicitation> + Send + 'static,
    {
        self.elicitation = Some(super::elicitation::ElicitationHandler(Arc::new(
            move |request| Box::pin(handler(request)),
        )));
        self
    }

    /// The most `tools/list` pages followed in one sync (default [`DEFAULT_MAX_LIST_PAGES`],
    /// 100). A list with more pages keeps the tools of the first `max`, with a warning.
    pub fn max_list_pages(mut self, max: usize) -> Self {
        self.max_list_pages = max;
        self
    }
}

/// Why an MCP server could not be added (or re-synced).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The server name is not 1 to 32 of `[A-Za-z0-9_-]`, or holds `__`, or ends with `_`
    /// ([`is_valid_server_name`](super::is_valid_server_name)).
    #[error(
        "invalid MCP server name \"{0}\": use 1 to 32 of A-Z, a-z, 0-9, '_' and '-', without \"__\" and not ending in '_'"
    )]
    InvalidName(String),
    /// Another live server in this registry has the same name.
    #[error("an MCP server named \"{0}\" is already connected to this registry")]
    DuplicateServer(String),
    /// The transport could not be opened or `initialize` failed.
    #[error("mcp-client({server}): cannot connect: {message}")]
    Connect {
        /// Server name.
        server: String,
        /// What failed.
        message: String,
    },
    /// `initialize` or `tools/list` took longer than its timeout.
    #[error("mcp-client({server}): {stage} timed out after {timeout_ms}ms")]
    Timeout {
        /// Server name.
        server: String,
        /// `initialize` or `tools/list`.
        stage: &'static str,
        /// The timeout, in ms.
        timeout_ms: u64,
    },
    /// `tools/list` failed or answered something that is not a tool list.
    #[error("mcp-client({server}): tools/list failed: {message}")]
    List {
        /// Server name.
        server: String,
        /// What failed.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let policy = ReconnectPolicy::default();
        let delays: Vec<u64> = (0..8).map(|attempt| policy.delay_ms(attempt)).collect();
        assert_eq!(
            delays,
            [500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]
        );
        assert_eq!(policy.delay_ms(u32::MAX), 30_000);
        assert!(!ReconnectPolicy::disabled().enabled);
        assert_eq!(policy.max_attempts, 10);
    }
}
