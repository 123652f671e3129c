//! One live MCP server: connecting, calling, watching the transport, reconnecting.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest,
    DEFAULT_MRTR_MAX_ROUNDS, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ErrorData, FormElicitationCapability, Implementation, InputRequest,
    InputRequests, InputResponses, ListToolsRequest, PaginatedRequestParams, ProtocolVersion,
    ServerNotification, ServerResult, SubscriptionFilter,
};
use rmcp::service::RequestHandle;
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, NotificationContext,
    PeerRequestOptions, RequestContext, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError};
use serde_json::{Map, Value};
use tokio::process::Child;
use tokio_util::sync::CancellationToken;

use super::config::{McpError, McpServer, Transport};
use super::deadlines::Deadlines;
use super::elicitation::ElicitationHandler;
use super::progress::{Link, ProgressTap};
use super::results;
use crate::call::ToolExec;
use crate::error::{ErrorCode, ToolError};
use crate::telemetry;
use tracing::Instrument;

/// The `code` of a call that failed because the server's transport closed.
pub const MCP_DISCONNECTED: &str = "MCP_DISCONNECTED";

/// How long a stdio server may take to exit after its stdin closes before it is killed.
const CHILD_EXIT_GRACE: Duration = Duration::from_secs(2);

/// [`CHILD_EXIT_GRACE`], or longer when this process's environment names an OTLP endpoint: a
/// server started from here inherits it and sends its last spans as it exits, which takes as
/// long as the receiver takes to take them ([`otlp_flush_bound`]); killed sooner, its spans
/// were lost. The wait ends as soon as the server exits.
///
/// [`otlp_flush_bound`]: dsh_tool_runtime::telemetry::otlp_flush_bound
fn child_exit_grace() -> Duration {
    exit_grace(|name| std::env::var(name).ok())
}

/// [`child_exit_grace`] in an environment whose variables `var` reads.
fn exit_grace(var: impl Fn(&str) -> Option<String>) -> Duration {
    let set = |name: &str| var(name).filter(|value| !value.is_empty());
    let exports = set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
        || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
    if !exports {
        return CHILD_EXIT_GRACE;
    }
    let flush = dsh_tool_runtime::telemetry::otlp_flush_bound(
        set("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"),
        set("OTEL_EXPORTER_OTLP_TIMEOUT"),
    );
    CHILD_EXIT_GRACE.max(flush)
}

/// Attempts of the HTTP transport to re-open a broken response stream: rmcp retries forever by
/// default, which would leave a call hanging on a dead server.
const HTTP_STREAM_RETRIES: usize = 2;

/// How long a call given up (cancelled or timed out) waits for its `notifications/cancelled`
/// to be sent before it returns: the notice is sent before the caller goes on (a command line
/// that exits next would otherwise end before a task sending it ran), and a transport that
/// does not take it within this bound is not waited for longer.
const CANCEL_NOTICE_BOUND: Duration = Duration::from_secs(5);
const HTTP_STREAM_RETRY_BASE: Duration = Duration::from_millis(100);

/// One open transport.
pub(crate) struct Conn {
    pub(crate) peer: Peer<RoleClient>,
    /// Cancelled when the transport is gone (or is being closed).
    pub(crate) closed: CancellationToken,
    /// Cancelled once the service has fully stopped (child reaped, streams closed).
    pub(crate) stopped: CancellationToken,
    pub(crate) pid: Option<u32>,
    /// The timeouts of the calls in flight.
    deadlines: Deadlines,
    /// The HTTP session, for the spans of its calls.
    session: telemetry::SessionCell,
}

/// The client side of a connection: list changes (progress is read by [`ProgressTap`]) and the
/// host's answers to elicitation requests.
pub(crate) struct Handler {
    pub(crate) link: Weak<Link>,
    pub(crate) elicitation: Option<ElicitationHandler>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(link) = self.link.upgrade() {
            link.list_changed.notify_one();
        }
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        match &self.elicitation {
            Some(handler) => Ok(handler.answer(request).await),
            None => Ok(ElicitResult::new(ElicitationAction::Decline)),
        }
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.elicitation.is_some() {
            capabilities.elicitation =
                Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        }
        let mut config = ClientConfig::new(
            capabilities,
            Implementation::new("dsh-tools", env!("CARGO_PKG_VERSION")),
        );
        // What `initialize` offers: the newest version with a handshake. 2026-07-28 is
        // negotiated by `server/discover` (`lifecycle`).
        config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        config
    }
}

/// How a connection starts: `server/discover` offering 2026-07-28, falling back to
/// `initialize` with 2025-11-25 when the server answers it as a 2025-era server does.
///
/// Over HTTP the probe is `server/discover` alone, and a 2025-era answer opens the connection
/// again with `initialize` ([`open`]): rmcp's fallback on the same transport also falls back when
/// the answer takes over 10 seconds, and the late answer then breaks the `initialize` that
/// follows ("uncorrelated error response"), which a loaded machine makes happen. A stdio server
/// keeps rmcp's fallback, a second start costing a second process; only when a late answer
/// broke it ([`late_probe_answer`]) is the server started again, with `initialize` alone.
fn lifecycle(transport: &Transport) -> ClientLifecycleMode {
    let preferred_versions = vec![ProtocolVersion::V_2026_07_28];
    match transport {
        Transport::Http { .. } => ClientLifecycleMode::Discover { preferred_versions },
        Transport::Stdio { .. } => ClientLifecycleMode::Auto {
            preferred_versions,
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        },
    }
}

/// `true` when the answer to a stdio server's `server/discover` came after rmcp had given up on
/// it and sent `initialize` on the same transport: the late answer reached the `initialize`
/// ("conflict initialized response id", "uncorrelated error response"). The server is then
/// started again with `initialize` alone.
fn late_probe_answer(error: &ClientInitializeError) -> bool {
    matches!(
        error,
        ClientInitializeError::ConflictInitResponseId(..)
            | ClientInitializeError::UncorrelatedErrorResponse { .. }
    )
}

/// `true` for a `server/discover` failure that says the server is a 2025-era one: a result that
/// is no discover result, or a JSON-RPC error other than the 2026-07-28 rejections (the
/// classification of rmcp's fallback).
fn says_legacy(error: &ClientInitializeError) -> bool {
    match error {
        ClientInitializeError::ExpectedInitResult(_) => true,
        ClientInitializeError::JsonRpcError(data) => !matches!(
            data.code,
            rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
                | rmcp::model::ErrorCode::HEADER_MISMATCH
        ),
        _ => false,
    }
}

fn connect_error(server: &str, message: impl std::fmt::Display) -> McpError {
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
fn service_error(err: &ServiceError) -> String {
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

/// `Err` naming what is wrong unless `url` is an absolute `http://` URL: the client is built
/// without TLS, so an `https://` URL could never be reached.
fn check_http_url(url: &str) -> Result<(), String> {
    let uri = url
        .parse::<http::Uri>()
        .map_err(|error| format!("{url:?} is not a URL: {error}"))?;
    match uri.scheme_str() {
        Some("http") if uri.authority().is_some() => Ok(()),
        Some("https") => Err(format!(
            "{url}: https needs TLS, which this build does not include: reach the server over \
             http:// (a TLS-terminating proxy on loopback)"
        )),
        _ => Err(format!("{url:?} is not an http:// URL")),
    }
}

/// Streamable HTTP through `client`, the lifecycle `lifecycle` run.
async fn serve_http<C: StreamableHttpClient>(
    handler: Handler,
    client: C,
    config: StreamableHttpClientTransportConfig,
    link: &Arc<Link>,
    lifecycle: ClientLifecycleMode,
    peer: &telemetry::ClientPeer,
    session: &telemetry::SessionCell,
) -> Result<RunningService<RoleClient, Handler>, ClientInitializeError> {
    let transport = ProgressTap {
        inner: StreamableHttpClientTransport::with_client(client, config),
        link: Arc::downgrade(link),
        answers: None,
        spans: telemetry::ClientSpans::new(peer.clone(), Some(session.clone())),
    };
    handler.serve_with_lifecycle(transport, lifecycle).await
}

/// Opens the transport and runs the lifecycle `lifecycle`: `Err` for what went wrong before
/// (the child, the headers, the token, the timeout), `Ok(Err)` for a failed handshake.
async fn start(
    config: &McpServer,
    link: &Arc<Link>,
    lifecycle: ClientLifecycleMode,
    clients: &HttpClients,
) -> Result<Result<Started, ClientInitializeError>, McpError> {
    let server = &config.name;
    let handler = Handler {
        link: Arc::downgrade(link),
        elicitation: config.elicitation.clone(),
    };
    let timeout = Duration::from_millis(config.connect_timeout_ms);
    let timed_out = || McpError::Timeout {
        server: server.clone(),
        stage: "initialize",
        timeout_ms: config.connect_timeout_ms,
    };
    let started: Started = match &config.transport {
        Transport::Stdio { command, args } => {
            let answers = Arc::new(super::answers::CallAnswers::default());
            let (transport, child, stderr) =
                super::stdio::spawn(config, command, args, answers.clone()).map_err(|err| {
                    connect_error(server, format!("cannot start {command}: {err}"))
                })?;
            let pid = child.id();
            if let Some(stderr) = stderr {
                super::stderr::forward(server.clone(), stderr);
            }
            // Until the service runs, dropping `child` kills it.
            let transport = ProgressTap {
                inner: transport,
                link: Arc::downgrade(link),
                answers: Some(answers),
                spans: telemetry::ClientSpans::new(span_peer(config), None),
            };
            let running =
                tokio::time::timeout(timeout, handler.serve_with_lifecycle(transport, lifecycle))
                    .await
                    .map_err(|_| timed_out())?;
            match running {
                Ok(running) => (running, pid, Some(child)),
                Err(err) => return Ok(Err(err)),
            }
        }
        Transport::Http { url } => {
            check_http_url(url).map_err(|message| connect_error(server, message))?;
            let mut http = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            let mut retry = ExponentialBackoff::default();
            retry.max_times = Some(HTTP_STREAM_RETRIES);
            retry.base_duration = HTTP_STREAM_RETRY_BASE;
            retry.max_delay = Some(Duration::from_secs(1));
            http.retry_config = Arc::new(retry);
            for (name, value) in &config.headers {
                let name = http::HeaderName::try_from(name.as_str())
                    .map_err(|err| connect_error(server, format!("header {name}: {err}")))?;
                let value = http::HeaderValue::try_from(value.as_str())
                    .map_err(|err| connect_error(server, format!("header {name}: {err}")))?;
                http.custom_headers.insert(name, value);
            }
            let client = super::http::GuardedClient::with_session(clients.session.clone());
            let peer = span_peer(config);
            let session = &clients.session;
            // Getting a token is part of connecting, within the same timeout; the time a person
            // takes to authorize a login is not (their authorizer bounds it).
            let waiting = clients.person.subscribe();
            // An OAuth request may be part of the connect, a `tools/list` or a call (a token
            // refreshed, a login after a 401): the longest of their bounds bounds it, and the
            // operation's own timeout still ends it sooner.
            #[cfg(feature = "oauth")]
            let oauth_bound = Duration::from_millis(
                config
                    .connect_timeout_ms
                    .max(config.list_timeout_ms)
                    .max(config.call_timeout_ms),
            );
            let connect = async {
                #[cfg(feature = "oauth")]
                if let Some(credentials) = &config.credentials {
                    let mut kept = clients.credentials.lock().await;
                    let client = match kept.as_ref() {
                        Some(client) => client.clone(),
                        None => super::oauth::authorize(client, url, credentials, oauth_bound)
                            .await
                            .map_err(|message| connect_error(server, message))?,
                    };
                    *kept = Some(client.clone());
                    drop(kept);
                    return Ok(
                        serve_http(handler, client, http, link, lifecycle, &peer, session).await,
                    );
                }
                #[cfg(feature = "oauth")]
                if let Some(login) = &config.login {
                    let mut kept = clients.login.lock().await;
                    let client = match kept.as_ref() {
                        Some(client) => client.clone(),
                        None => {
                            let person = clients.person.clone();
                            super::oauth::login_client(client, url, login, person, oauth_bound)
                                .await
                                .map_err(|message| connect_error(server, message))?
                        }
                    };
                    *kept = Some(client.clone());
                    drop(kept);
                    return Ok(
                        serve_http(handler, client, http, link, lifecycle, &peer, session).await,
                    );
                }
                Ok(serve_http(handler, client, http, link, lifecycle, &peer, session).await)
            };
            let running = within_unpaused(timeout, waiting, connect)
                .await
                .ok_or_else(timed_out)??;
            match running {
                Ok(running) => (running, None, None),
                Err(err) => return Ok(Err(err)),
            }
        }
    };
    Ok(Ok(started))
}

/// The authorized HTTP clients of one [`open`], kept from its first start to its second (the
/// `initialize` after a 2025-era answer to `server/discover`), so the second uses the first's
/// tokens instead of getting new ones (a person would log in twice).
struct HttpClients {
    #[cfg(feature = "oauth")]
    credentials: tokio::sync::Mutex<Option<CredentialsClient>>,
    #[cfg(feature = "oauth")]
    login: tokio::sync::Mutex<Option<LoginClient>>,
    /// `true` while a person is logging in (the connect timeout does not count it).
    person: tokio::sync::watch::Sender<bool>,
    /// The `Mcp-Session-Id` the clients last sent or were given, for the connection's spans.
    session: telemetry::SessionCell,
}

#[cfg(feature = "oauth")]
type CredentialsClient =
    super::oauth::BearerClient<super::http::GuardedClient, super::oauth::CredentialsGrant>;
#[cfg(feature = "oauth")]
type LoginClient = super::oauth::BearerClient<super::http::GuardedClient, super::oauth::LoginState>;

impl Default for HttpClients {
    fn default() -> Self {
        let (person, _) = tokio::sync::watch::channel(false);
        HttpClients {
            #[cfg(feature = "oauth")]
            credentials: tokio::sync::Mutex::new(None),
            #[cfg(feature = "oauth")]
            login: tokio::sync::Mutex::new(None),
            person,
            session: telemetry::SessionCell::default(),
        }
    }
}

/// `future` within `timeout`, the time while `paused` holds `true` not counted; `None` when
/// the time ran out. A sender dropped leaves the count as it was.
async fn within_unpaused<T>(
    timeout: Duration,
    mut paused: tokio::sync::watch::Receiver<bool>,
    future: impl std::future::Future<Output = T>,
) -> Option<T> {
    let mut future = std::pin::pin!(future);
    let mut left = timeout;
    loop {
        let is_paused = *paused.borrow_and_update();
        let started = tokio::time::Instant::now();
        let expiry = async {
            if is_paused {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(left).await;
        };
        let change = async {
            if paused.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            output = &mut future => return Some(output),
            () = expiry => return None,
            () = change => {
                if !is_paused {
                    left = left.saturating_sub(started.elapsed());
                }
            }
        }
    }
}

/// A failed handshake as the bridge reports it.
fn start_error(config: &McpServer, err: ClientInitializeError) -> McpError {
    match &config.transport {
        Transport::Http { url } => connect_error(&config.name, http_connect_failure(url, err)),
        Transport::Stdio { .. } => connect_error(&config.name, err),
    }
}

/// A 2026-07-28 server tells of list changes only on a `subscriptions/listen` stream: one runs
/// for the connection's life, waking the bridge's re-sync like `list_changed` on a 2025
/// session.
fn listen_for_list_changes(peer: Peer<RoleClient>, link: Weak<Link>) {
    tokio::spawn(async move {
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let Ok(mut subscription) = peer.listen(filter).await else {
            return;
        };
        while let Ok(Some(notification)) = subscription.next().await {
            if matches!(
                notification,
                ServerNotification::ToolListChangedNotification(_)
            ) {
                let Some(link) = link.upgrade() else { return };
                link.list_changed.notify_one();
            }
        }
    });
}

/// A started service, the child's pid and the child of a stdio server.
type Started = (
    RunningService<RoleClient, Handler>,
    Option<u32>,
    Option<Child>,
);

/// Opens the transport and starts the lifecycle: the newest protocol the server offers
/// (`server/discover`, 2026-07-28), else `initialize` (2025-11-25). A server that answers
/// `server/discover` as a 2025-era server does ([`says_legacy`]; some answer every unknown
/// method with `{}`) is opened again with `initialize` alone.
pub(crate) async fn open(config: &McpServer, link: &Arc<Link>) -> Result<Arc<Conn>, McpError> {
    let clients = HttpClients::default();
    let first = start(config, link, lifecycle(&config.transport), &clients).await?;
    let (running, pid, mut child) = match first {
        Ok(started) => started,
        Err(error) if says_legacy(&error) || late_probe_answer(&error) => {
            start(config, link, ClientLifecycleMode::Initialize, &clients)
                .await?
                .map_err(|err| start_error(config, err))?
        }
        Err(err) => return Err(start_error(config, err)),
    };
    if running
        .peer()
        .peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize())
        && running.peer().peer_info().is_some_and(|info| {
            info.capabilities
                .tools
                .as_ref()
                .and_then(|tools| tools.list_changed)
                == Some(true)
        })
    {
        listen_for_list_changes(running.peer().clone(), Arc::downgrade(link));
    }
    let closed = CancellationToken::new();
    let conn = Arc::new(Conn {
        peer: running.peer().clone(),
        deadlines: Deadlines::new(
            Duration::from_millis(config.call_timeout_ms),
            closed.clone(),
        ),
        closed,
        stopped: CancellationToken::new(),
        pid,
        session: clients.session.clone(),
    });
    let service = running.cancellation_token();
    let closing = conn.closed.clone();
    tokio::spawn(async move {
        closing.cancelled().await;
        service.cancel();
    });
    let watched = conn.clone();
    tokio::spawn(async move {
        let _ = running.waiting().await;
        watched.closed.cancel();
        if let Some(child) = child.as_mut() {
            // The service closed the child's stdin: a well-behaved server exits now.
            if tokio::time::timeout(child_exit_grace(), child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
        }
        watched.stopped.cancel();
    });
    Ok(conn)
}

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

/// The server `config` names, as its spans name it.
fn span_peer(config: &McpServer) -> telemetry::ClientPeer {
    match &config.transport {
        Transport::Stdio { .. } => telemetry::ClientPeer::stdio(&config.name),
        Transport::Http { url } => telemetry::ClientPeer::http(&config.name, url),
    }
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

/// The pid of the child process, for diagnostics.
pub(crate) fn pid(conn: &Mutex<Option<Arc<Conn>>>) -> Option<u32> {
    conn.lock().as_ref().and_then(|conn| conn.pid)
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

    /// A stdio server that exports spans is given as long to exit as its last export may
    /// take; one that does not, the usual grace.
    #[test]
    fn a_server_exporting_spans_is_given_time_to_send_them() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| (*value).to_owned())
            }
        };
        assert_eq!(exit_grace(env(&[])), CHILD_EXIT_GRACE);
        // A timeout alone names no receiver.
        assert_eq!(
            exit_grace(env(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "120000")])),
            CHILD_EXIT_GRACE
        );
        assert_eq!(
            exit_grace(env(&[(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://127.0.0.1:6006"
            )])),
            Duration::from_secs(20)
        );
        assert_eq!(
            exit_grace(env(&[
                (
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "http://127.0.0.1:6006/v1/traces"
                ),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "120000"),
            ])),
            Duration::from_secs(240)
        );
        // A short export timeout never shortens the usual grace.
        assert_eq!(
            exit_grace(env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:6006"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "100"),
            ])),
            CHILD_EXIT_GRACE
        );
    }

    /// On tokio's paused clock: time while paused is not counted, time before and after it is.
    #[tokio::test(start_paused = true)]
    async fn the_connect_timeout_does_not_count_a_pending_authorization() {
        let second = Duration::from_secs(1);
        let (pause, paused) = tokio::sync::watch::channel(false);
        let person = async {
            tokio::time::sleep(second / 2).await;
            pause.send_replace(true);
            tokio::time::sleep(second * 300).await;
            pause.send_replace(false);
            tokio::time::sleep(second / 4).await;
            "authorized"
        };
        assert_eq!(
            within_unpaused(second, paused, person).await,
            Some("authorized")
        );

        let (pause, paused) = tokio::sync::watch::channel(false);
        let slow = async {
            tokio::time::sleep(second / 2).await;
            pause.send_replace(true);
            pause.send_replace(false);
            tokio::time::sleep(second * 2).await;
        };
        assert_eq!(within_unpaused(second, paused, slow).await, None);

        let (pause, paused) = tokio::sync::watch::channel(false);
        drop(pause);
        let silent = std::future::pending::<()>();
        assert_eq!(within_unpaused(second, paused, silent).await, None);
    }
}
