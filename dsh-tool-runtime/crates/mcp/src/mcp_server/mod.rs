//! Serving a registry over MCP, on rmcp's server side.
//!
//! [`crate::ServeExt::serve_mcp`] answers `tools/list` with the scope's model view (native tools in the
//! [`Dialect::Mcp`](crate::dialect::Dialect::Mcp) form, or `run_code` alone in code mode, or
//! both), paginated, and sends `notifications/tools/list_changed` when the registry changes.
//! `tools/call` runs the full pipeline: `notifications/cancelled` cancels the call's signal,
//! progress reaches clients that sent a progress token, and every failure of the call is an
//! `isError` result. An unknown tool is the protocol error `-32602`; at 2026-07-28 a call that
//! failed for want of a capability its client did not declare (sampling, elicitation, roots), or
//! of a task-only tool from a client without the tasks extension, is
//! `MissingRequiredClientCapabilityError` (-32021, HTTP 400). Requests for a 2026-07-28 client
//! travel in `input_required` results (or a task's `input_required` state) under the keys the
//! tool chose. `inputSchema`s are served as written ([`Dialect::Mcp`](crate::dialect::Dialect::Mcp)).
//! Over streamable HTTP, a stateless (2026-07-28) client that closes a call's response stream has
//! cancelled it (rmcp fires the same signal). `run_code` and tools that opt in run as tasks for
//! clients that declare the `io.modelcontextprotocol/tasks` extension ([`McpTaskLimits`]).

mod auth;
mod client;
mod cors;
mod durable;
mod handler;
mod http;
mod listing;
#[cfg(feature = "oauth")]
mod oauth;
#[cfg(feature = "oauth")]
mod oauth_keys;
mod response;
#[cfg(feature = "restate")]
mod restate;
mod results;
mod rounds;
mod stdio;
mod tasks;
mod unparsable;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::registry::Registry;
use crate::scope::AgentId;
pub use auth::McpHttpAuth;
use handler::McpHandler;
#[cfg(feature = "oauth")]
#[cfg_attr(docsrs, doc(cfg(feature = "oauth")))]
pub use oauth::McpOAuthResource;
#[cfg(feature = "restate")]
#[cfg_attr(docsrs, doc(cfg(feature = "restate")))]
pub use restate::McpRestate;
pub use tasks::McpTaskLimits;

/// Where [`crate::ServeExt::serve_mcp`] speaks MCP.
#[derive(Debug)]
#[non_exhaustive]
pub enum McpTransport {
    /// JSON-RPC lines on this process's stdin and stdout (what MCP hosts spawn).
    Stdio,
    /// Streamable HTTP on an already bound listener, endpoint `/mcp` (any path is served).
    Http {
        /// The bound listener.
        listener: TcpListener,
        /// What every request must carry to be served.
        auth: McpHttpAuth,
    },
}

impl McpTransport {
    /// The address streamable HTTP binds when none is given: loopback only, port chosen by the
    /// OS.
    pub const DEFAULT_HTTP_ADDR: SocketAddr =
        SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

    /// Binds streamable HTTP on `addr` (use [`McpTransport::DEFAULT_HTTP_ADDR`] for loopback),
    /// with a bearer token generated for it ([`McpHttpAuth::generate`]). Read the bound port from
    /// [`McpTransport::local_addr`] and the token clients must send from
    /// [`McpTransport::bearer_token`]; [`McpTransport::with_auth`] replaces it.
    ///
    /// # Errors
    /// The bind error (address in use, permission), or the operating system's random source
    /// failing.
    pub async fn http(addr: SocketAddr) -> std::io::Result<McpTransport> {
        Ok(McpTransport::Http {
            listener: TcpListener::bind(addr).await?,
            auth: McpHttpAuth::generate()?,
        })
    }

    /// The `Host` header values (RFC 9110 §7.2) HTTP serving with `limits` accepts, each a host
    /// or `host:port` (a host alone matches any port); `None` when any `Host` is accepted, and
    /// for stdio. A request naming another host is answered `403 Forbidden` with the body
    /// `Forbidden: Host header is not allowed`, so that a page whose name was made to resolve
    /// to this machine (DNS rebinding) cannot reach the tools.
    ///
    /// The list is checked when the listener is on a loopback address or
    /// [`McpHttpLimits::allowed_hosts`] names any: it holds `localhost`, `127.0.0.1` and `::1`,
    /// the bound address unless it is a wildcard (`0.0.0.0`, `::`), the hosts named, and with
    /// [`McpHttpAuth::OAuth`] the host of [`McpOAuthResource::resource`]. On any other address
    /// every `Host` is accepted: authentication is required there, and a browser's `Origin` is
    /// checked either way ([`McpHttpLimits::allowed_origins`]).
    pub fn allowed_hosts(&self, limits: &McpHttpLimits) -> Option<Vec<String>> {
        match self {
            McpTransport::Http { listener, auth } => {
                host_rule(listener.local_addr().ok()?, auth, limits)
            }
            McpTransport::Stdio => None,
        }
    }

    /// The bound address of an HTTP transport; `None` for stdio.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            McpTransport::Http { listener, .. } => listener.local_addr().ok(),
            McpTransport::Stdio => None,
        }
    }

    /// The token HTTP clients must send as `Authorization: Bearer <token>`; `None` for stdio
    /// and for [`McpHttpAuth::None`].
    pub fn bearer_token(&self) -> Option<&str> {
        match self {
            McpTransport::Http { auth, .. } => auth.bearer_token(),
            McpTransport::Stdio => None,
        }
    }

    /// Replaces an HTTP transport's authentication (stdio is returned as it is): a token of
    /// the caller's, or [`McpHttpAuth::None`] on a loopback address.
    pub fn with_auth(self, auth: McpHttpAuth) -> McpTransport {
        match self {
            McpTransport::Http { listener, .. } => McpTransport::Http { listener, auth },
            McpTransport::Stdio => McpTransport::Stdio,
        }
    }
}

/// The hosts [`McpTransport::allowed_hosts`] describes for a listener on `addr`.
fn host_rule(addr: SocketAddr, auth: &McpHttpAuth, limits: &McpHttpLimits) -> Option<Vec<String>> {
    let ip = addr.ip().to_canonical();
    if !ip.is_loopback() && limits.allowed_hosts.is_empty() {
        return None;
    }
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(str::to_owned).into();
    if !ip.is_unspecified() {
        hosts.push(ip.to_string());
    }
    hosts.extend(limits.allowed_hosts.iter().cloned());
    #[cfg(feature = "oauth")]
    if let McpHttpAuth::OAuth(resource) = auth
        && let Some(host) = url::Url::parse(&resource.resource)
            .ok()
            .and_then(|url| url.host_str().map(str::to_owned))
    {
        hosts.push(host);
    }
    #[cfg(not(feature = "oauth"))]
    let _ = auth;
    let mut seen = std::collections::HashSet::new();
    hosts.retain(|host| seen.insert(host.to_ascii_lowercase()));
    Some(hosts)
}

/// The origins a listener on `addr` serving `auth` accepts besides
/// [`McpHttpLimits::allowed_origins`]: without authentication on a loopback address, its own
/// (`http://localhost:PORT`, `http://127.0.0.1:PORT`, `http://[::1]:PORT`), the loopback values
/// the MCP transport's DNS-rebinding rule says to serve. Only a page this port serves has such
/// an origin; a page of any other origin is still refused.
fn own_origins(addr: SocketAddr, auth: &McpHttpAuth) -> Vec<String> {
    if !matches!(auth, McpHttpAuth::None) || !addr.ip().to_canonical().is_loopback() {
        return Vec::new();
    }
    let port = addr.port();
    ["localhost", "127.0.0.1", "[::1]"]
        .map(|host| format!("http://{host}:{port}"))
        .into()
}

/// Settings of [`crate::ServeExt::serve_mcp_with`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct McpServeOptions {
    /// Tools per `tools/list` page (at least 1; default 100). Later pages follow `nextCursor`.
    pub page_size: usize,
    /// The `serverInfo.name` sent in `initialize` (default `dsh-tools`).
    pub server_name: String,
    /// What streamable HTTP allows its clients (ignored over stdio).
    pub http: McpHttpLimits,
    /// Where served `run_code` calls are journaled ([`McpServeOptions::journal`]).
    pub(crate) journal: Option<durable::ServedJournal>,
    /// The name this server signs its runs' continuations with, and the peers whose
    /// continuations it takes ([`McpServeOptions::journal_peers`]).
    pub(crate) journal_name: Option<String>,
    pub(crate) journal_peers: Vec<String>,
    /// How long tasks live and how many may (`run_code` and tools that opt in, for clients
    /// that declare the `io.modelcontextprotocol/tasks` extension).
    pub tasks: McpTaskLimits,
    /// Where served `run_code` calls run on Restate ([`McpServeOptions::restate`]).
    #[cfg(feature = "restate")]
    pub(crate) restate: Option<McpRestate>,
}

impl Default for McpServeOptions {
    fn default() -> Self {
        McpServeOptions {
            page_size: 100,
            server_name: "dsh-tools".to_owned(),
            http: McpHttpLimits::default(),
            journal: None,
            journal_name: None,
            journal_peers: Vec::new(),
            tasks: McpTaskLimits::default(),
            #[cfg(feature = "restate")]
            restate: None,
        }
    }
}

impl McpServeOptions {
    /// Sets [`McpServeOptions::page_size`] (0 counts as 1).
    pub fn page_size(mut self, page_size: usize) -> Self {
        self.page_size = page_size.max(1);
        self
    }

    /// Sets [`McpServeOptions::server_name`].
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = name.into();
        self
    }

    /// Sets [`McpServeOptions::http`].
    pub fn http_limits(mut self, limits: McpHttpLimits) -> Self {
        self.http = limits;
        self
    }

    /// Makes every served `run_code` call a durable run journaled in `store`, under a fresh
    /// random run id (128 bits, hex). A run a pre-execute `Ask` parks is brought to the person
    /// at the MCP host: a 2026-07-28 client gets an `input_required` result (an elicitation
    /// naming the waiting call; `requestState` is a signed continuation,
    /// [`crate::durable::ContinuationSecret`]) and its retry approves or denies exactly that call:
    /// the continuation names the run, the call, a digest of the arguments shown and the MCP
    /// session it was shown to, is used once and expires
    /// ([`dsh_tool_code_mode::DurableExt::set_continuation_ttl`](dsh_tool_code_mode::DurableExt::set_continuation_ttl)). A retry with
    /// a continuation that is forged, used, expired, another session's or another server's is
    /// refused (`CONTINUATION_REFUSED`) and the run stays parked. A 2025-era session is asked with
    /// `elicitation/create` and the run resumes in the same request; a client without the
    /// elicitation capability has the run denied with the reason at once. A parked run holds no
    /// process or interpreter while it waits.
    pub fn journal(mut self, store: std::sync::Arc<dyn crate::durable::JournalStore>) -> Self {
        self.journal = Some(durable::ServedJournal(store));
        self
    }

    /// Shares the journal's parked runs with the servers named `peers`: this server signs its
    /// continuations as `name` and takes those signed as `name` or as one of `peers` (each peer
    /// names itself and this server the same way), so a replica on the same journal file can
    /// take a client's retry. Without it a server takes only the continuations it issued itself
    /// (under a random name of its own, so a restarted server no longer resumes its old runs
    /// over MCP; `dsh-tools runs` still can).
    pub fn journal_peers(
        mut self,
        name: impl Into<String>,
        peers: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.journal_name = Some(name.into());
        self.journal_peers = peers.into_iter().map(Into::into).collect();
        self
    }

    /// Runs every served `run_code` call on Restate: as an invocation of the durable-runs
    /// handler (`DurableRuns/run`, see [`crate::durable::restate`]) started through the
    /// ingress under a fresh random idempotency key, so that Restate keeps its result. Serve
    /// the same registry as a deployment of that Restate server
    /// ([`serve_deployment`](crate::durable::restate::serve_deployment)), in this process or
    /// others: any number of servers registered as one deployment share the runs, and a run
    /// whose process dies is retried by Restate on another.
    ///
    /// - A client that declares the `io.modelcontextprotocol/tasks` extension gets a task whose
    ///   id is the invocation id and a tag (`inv_….` and 32 hex digits: an HMAC of the id under
    ///   [`McpRestate::secret`]). `tasks/get` asks Restate for its output (the
    ///   ingress's `/restate/invocation/{id}/output`) and status (the admin API's
    ///   `sys_invocation`, whose status, attempt and journal size are the `statusMessage`), and
    ///   `tasks/cancel` kills the invocation (admin `PATCH /invocations/{id}/kill`): any server
    ///   with the same Restate and secret answers for any task, none keeps a record; an id whose
    ///   tag does not check (an invocation started on the ingress directly) is unknown. The TTL is Restate's
    ///   retention of the result, reported once the run ended; [`McpTaskLimits`] does not
    ///   apply to these tasks.
    /// - A plain `tools/call` starts the invocation and waits for it (`/attach`); a client
    ///   that cancels the call has the invocation killed.
    ///
    /// Progress, and approvals asked of the MCP client, do not reach the client of a run on
    /// Restate; such a run sees the registry's global scope. Other tools are served as usual.
    /// Not with [`McpServeOptions::journal`], which it replaces for `run_code`.
    #[cfg(feature = "restate")]
    #[cfg_attr(docsrs, doc(cfg(feature = "restate")))]
    pub fn restate(mut self, restate: McpRestate) -> Self {
        self.restate = Some(restate);
        self
    }

    /// Sets [`McpServeOptions::tasks`].
    pub fn task_limits(mut self, limits: McpTaskLimits) -> Self {
        self.tasks = limits;
        self
    }
}

/// The bounds streamable HTTP serving keeps against clients that connect many times, send
/// slowly or never end their sessions, and the browser origins it serves. A limit reached
/// refuses the newcomer, never ends the server: an `accept` failure (such as running out of
/// descriptors) is logged with `tracing` and retried after 10 ms, doubling up to 1 s while it
/// keeps failing. Fixed besides these: a request head over 64 KiB is answered `431`, a request
/// body over 4 MiB `413` (rmcp's limit).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct McpHttpLimits {
    /// Connections open at once (at least 1; default 512). A connection past it is answered
    /// `503 Service Unavailable` with the body `Service Unavailable: too many connections
    /// (limit N); retry later` and closed without its request being read.
    pub max_connections: usize,
    /// MCP sessions alive at once (at least 1; default 256; each holds some 60 to 100 KiB). An
    /// `initialize` past it is answered `503` with the body `Service Unavailable: too many MCP
    /// sessions (limit N); …`; a slot frees when a session ends (HTTP DELETE or idle expiry).
    pub max_sessions: usize,
    /// How long a client may take to send a request's headers, and how long a kept-alive
    /// connection may wait for its next request, before it is closed (at least 1 ms; default
    /// 30 s).
    pub header_read_timeout: Duration,
    /// The longest pause allowed between two pieces of a request body (at least 1 ms; default
    /// 30 s); past it the request fails and its connection is closed.
    pub body_read_timeout: Duration,
    /// A session without any request or message for this long ends and frees its slot; its
    /// client's next request gets `404` and must `initialize` again (at least 1 ms; default
    /// 300 s).
    pub session_idle_timeout: Duration,
    /// Browser origins whose requests are served (default: none; without authentication on a
    /// loopback address also the listener's own loopback origins). A request with an `Origin`
    /// header (RFC 6454) not listed here is answered `403 Forbidden` (the MCP transport
    /// specification, 2025-06-18 on: servers must validate `Origin`, against DNS rebinding); a
    /// request without one, as non-browser clients send, is not affected. An entry is
    /// `scheme://host:port`, `scheme://host:*` for any port, or `null`; an entry without a
    /// port matches any port (rmcp's rule, deprecated there: give the port), and one that is
    /// not an origin matches nothing. With [`McpHttpAuth::Bearer`] the token is checked first,
    /// except for a CORS preflight. [`McpHttpLimits::allow_origin`] says what an allowed origin
    /// gets.
    pub allowed_origins: Vec<String>,
    /// Host names (or `host:port`) requests may name in their `Host` header besides loopback
    /// (default: none), e.g. `tools.example.com`: naming any turns the `Host` check on for a
    /// listener that is not on loopback. [`McpTransport::allowed_hosts`] gives the whole rule.
    pub allowed_hosts: Vec<String>,
}

impl Default for McpHttpLimits {
    fn default() -> Self {
        McpHttpLimits {
            max_connections: 512,
            max_sessions: 256,
            header_read_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(30),
            session_idle_timeout: Duration::from_secs(300),
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
        }
    }
}

impl McpHttpLimits {
    /// Sets [`McpHttpLimits::max_connections`] (0 counts as 1).
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// Sets [`McpHttpLimits::max_sessions`] (0 counts as 1).
    pub fn max_sessions(mut self, sessions: usize) -> Self {
        self.max_sessions = sessions.max(1);
        self
    }

    /// Sets [`McpHttpLimits::header_read_timeout`] (below 1 ms counts as 1 ms).
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Sets [`McpHttpLimits::body_read_timeout`] (below 1 ms counts as 1 ms).
    pub fn body_read_timeout(mut self, timeout: Duration) -> Self {
        self.body_read_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Sets [`McpHttpLimits::session_idle_timeout`] (below 1 ms counts as 1 ms).
    pub fn session_idle_timeout(mut self, timeout: Duration) -> Self {
        self.session_idle_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Adds `origin` to [`McpHttpLimits::allowed_origins`] (e.g. `http://localhost:5173`, a
    /// web app's development server): pages of that origin may call this server from a
    /// browser, as the Fetch standard's CORS protocol has a browser ask. Its preflights
    /// (`OPTIONS` with `Access-Control-Request-Method`) are answered `204` before
    /// authentication, allowing the transport's methods (`POST`, `GET`, `DELETE`, `OPTIONS`)
    /// and request headers (`Authorization`, `Content-Type`, `Accept`, `Mcp-Session-Id`,
    /// `Mcp-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Last-Event-ID`, and the `Mcp-Param-*`
    /// ones a preflight names); every answer to it (a `401` included) carries
    /// `Access-Control-Allow-Origin` with that origin (never `*`), exposes `Mcp-Session-Id` and
    /// `WWW-Authenticate`, and varies by `Origin`. A request from any other origin is answered
    /// `403` without CORS headers.
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins.push(origin.into());
        self
    }

    /// Adds `host` (a name or address, optionally `:port`) to [`McpHttpLimits::allowed_hosts`].
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into());
        self
    }
}

/// Why serving stopped with an error, or never started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpServeError {
    /// The client never completed the `initialize` handshake, or the transport failed before it.
    #[error("MCP handshake failed: {0}")]
    Handshake(String),
    /// The transport failed while serving.
    #[error("MCP transport failed: {0}")]
    Transport(String),
    /// HTTP without authentication ([`McpHttpAuth::None`]) on this address, which is not
    /// loopback: nothing was served.
    #[error(
        "MCP over HTTP without authentication is refused on {0}: only a loopback address \
         (127.0.0.1, ::1) may serve without a bearer token"
    )]
    NoAuthOffLoopback(SocketAddr),
    /// The HTTP bearer token is unusable, for the reason given (the token itself is never
    /// shown): nothing was served.
    #[error("the MCP bearer token is {0}")]
    InvalidBearerToken(&'static str),
    /// The OAuth settings ([`McpHttpAuth::OAuth`]) are unusable, for the reason given: nothing
    /// was served.
    #[error("the MCP OAuth settings are unusable: {0}")]
    InvalidOAuth(String),
    /// The Restate settings (`McpServeOptions::restate`) are unusable, for the reason given:
    /// nothing was served.
    #[error("the Restate settings are unusable: {0}")]
    InvalidRestate(String),
}

/// A registry served over MCP (stdio or streamable HTTP). Implemented for [`Registry`] only;
/// `dsh_tools::prelude` brings it into scope.
pub trait ServeExt: crate::sealed::Sealed {
    /// Serves `scope` (`None` = global) of this registry as an MCP server on `transport` with
    /// the default [`McpServeOptions`], until the client disconnects (stdio) or forever (HTTP,
    /// within [`McpHttpLimits`], each request authenticated as the transport's [`McpHttpAuth`]
    /// says; drop the future to stop).
    ///
    /// # Errors
    /// [`McpServeError`] when the handshake or the transport fails (stdio); over HTTP only
    /// before serving, when [`McpHttpAuth::check`] refuses the transport's authentication.
    fn serve_mcp(
        &self,
        scope: Option<AgentId>,
        transport: McpTransport,
    ) -> impl std::future::Future<Output = Result<(), McpServeError>> + Send;

    /// [`crate::ServeExt::serve_mcp`] with explicit settings.
    ///
    /// # Errors
    /// As [`crate::ServeExt::serve_mcp`].
    fn serve_mcp_with(
        &self,
        scope: Option<AgentId>,
        transport: McpTransport,
        options: McpServeOptions,
    ) -> impl std::future::Future<Output = Result<(), McpServeError>> + Send;
}

impl ServeExt for Registry {
    async fn serve_mcp(
        &self,
        scope: Option<AgentId>,
        transport: McpTransport,
    ) -> Result<(), McpServeError> {
        self.serve_mcp_with(scope, transport, McpServeOptions::default())
            .await
    }

    async fn serve_mcp_with(
        &self,
        scope: Option<AgentId>,
        transport: McpTransport,
        options: McpServeOptions,
    ) -> Result<(), McpServeError> {
        let limits = options.http.clone();
        match transport {
            McpTransport::Stdio => {
                McpHandler::new(self.clone(), scope, options)?
                    .serve_stdio()
                    .await
            }
            McpTransport::Http { listener, auth } => {
                let addr = listener
                    .local_addr()
                    .map_err(|error| McpServeError::Transport(error.to_string()))?;
                auth.check(addr)?;
                let mut limits = limits;
                limits.allowed_origins.extend(own_origins(addr, &auth));
                let hosts = host_rule(addr, &auth, &limits);
                let gate = auth::Gate::new(&auth)?;
                let handler = McpHandler::new(self.clone(), scope, options)?;
                match http::serve(handler, listener, gate, limits, hosts).await {}
            }
        }
    }
}
