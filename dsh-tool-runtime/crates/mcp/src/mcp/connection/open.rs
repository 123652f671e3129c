//! Opening a connection: the transport started (a stdio child, or streamable HTTP with its
//! headers and OAuth), the lifecycle run (`server/discover` offering 2026-07-28, else
//! `initialize`), and the transport watched until it closes.

use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig,
};
use rmcp::{Peer, RoleClient};
use tokio::process::Child;
use tokio_util::sync::CancellationToken;

use super::errors::{connect_error, start_error};
use super::exit_grace::child_exit_grace;
use super::{Conn, Handler, span_peer};
use crate::mcp::config::{McpError, McpServer, Transport};
use crate::mcp::deadlines::Deadlines;
use crate::mcp::progress::{Link, ProgressTap};
use crate::telemetry;

/// Attempts of the HTTP transport to re-open a broken response stream: rmcp retries forever by
/// default, which would leave a call hanging on a dead server.
const HTTP_STREAM_RETRIES: usize = 2;

const HTTP_STREAM_RETRY_BASE: Duration = Duration::from_millis(100);

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
            let answers = Arc::new(crate::mcp::answers::CallAnswers::default());
            let (transport, child, stderr) =
                crate::mcp::stdio::spawn(config, command, args, answers.clone()).map_err(
                    |err| connect_error(server, format!("cannot start {command}: {err}")),
                )?;
            let pid = child.id();
            if let Some(stderr) = stderr {
                crate::mcp::stderr::forward(server.clone(), stderr);
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
            let client = crate::mcp::http::GuardedClient::with_session(clients.session.clone());
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
                        None => crate::mcp::oauth::authorize(client, url, credentials, oauth_bound)
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
                            crate::mcp::oauth::login_client(client, url, login, person, oauth_bound)
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
type CredentialsClient = crate::mcp::oauth::BearerClient<
    crate::mcp::http::GuardedClient,
    crate::mcp::oauth::CredentialsGrant,
>;
#[cfg(feature = "oauth")]
type LoginClient =
    crate::mcp::oauth::BearerClient<crate::mcp::http::GuardedClient, crate::mcp::oauth::LoginState>;

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

#[cfg(test)]
mod tests {
    use super::*;

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
