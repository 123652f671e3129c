//! Streamable HTTP: rmcp's tower service on a hyper HTTP/1 connection per accepted socket,
//! within [`McpHttpLimits`]: connections, sessions, and how long a client may take to send
//! headers or a body, or leave its session idle. Each request passes the authentication
//! [`Gate`] before rmcp, whose own checks refuse a foreign `Host` or `Origin`.

use std::cell::Cell;
use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use bytes::Bytes;
use futures::Stream;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::Service;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rmcp::model::{ClientJsonRpcMessage, GetExtensions, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionManager};
use rmcp::transport::streamable_http_server::{
    SessionId, StreamableHttpServerConfig, StreamableHttpService,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tower_http::timeout::TimeoutBody;

use super::McpHttpLimits;
use super::auth::{Gate, Refusals};
use super::client::ResponseStream;
use super::cors::{self, Cors, Verdict};
use super::handler::McpHandler;
use super::response::Body;
use super::unparsable::{self, Copied};
use crate::telemetry;
use crate::traced::Traced;

/// A connection's read buffer: room for any sane request head, a bounded cost per connection.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Serves `listener` until the future is dropped: no error ends it.
pub(crate) async fn serve(
    handler: McpHandler,
    listener: TcpListener,
    gate: Gate,
    limits: McpHttpLimits,
    hosts: Option<Vec<String>>,
) -> Infallible {
    let handler = Arc::new(handler);
    let sessions = Arc::new(CappedSessions::new(&limits));
    let cors = Cors::new(&limits.allowed_origins);
    // rmcp validates `Origin` only once asked to, and then refuses every origin not listed
    // with 403 (the MCP transport's MUST, 2025-06-18 on). rmcp reads an empty host list as
    // "any host".
    let config = StreamableHttpServerConfig::default()
        .with_allowed_origins(limits.allowed_origins.iter().cloned())
        .enforce_origin_validation()
        .with_allowed_hosts(hosts.unwrap_or_default());
    let service = TowerToHyperService::new(StreamableHttpService::new(
        move || Ok(Traced::new(handler.session(), telemetry::TCP)),
        sessions.clone(),
        config,
    ));
    let mut http = http1::Builder::new();
    // The header timeout also bounds a kept-alive connection's wait for its next request:
    // hyper starts it whenever it waits for a request head. A head past the read buffer is
    // answered 431, and the buffer bounds what each connection holds (hyper's default is
    // about 400 KiB).
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(READ_BUFFER_BYTES)
        .max_buf_size(READ_BUFFER_BYTES);
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let refusal = connection_refusal(limits.max_connections);
    let mut acceptor = crate::accept::Acceptor::new(listener, "MCP over HTTP");
    loop {
        let stream = acceptor.accept().await;
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            refuse(&stream, &refusal);
            continue;
        };
        let service = service.clone();
        let sessions = sessions.clone();
        let gate = gate.clone();
        let cors = cors.clone();
        let body_timeout = limits.body_read_timeout;
        let session_limit = limits.max_sessions;
        let refusals = Arc::new(Refusals::default());
        let connection = http.serve_connection(
            TokioIo::new(stream),
            hyper::service::service_fn(move |request: Request<Incoming>| {
                answer(
                    service.clone(),
                    sessions.clone(),
                    gate.clone(),
                    cors.clone(),
                    refusals.clone(),
                    session_limit,
                    request.map(|body| TimeoutBody::new(body_timeout, body)),
                )
            }),
        );
        tokio::spawn(async move {
            // One client's broken or timed-out connection ends only that connection.
            if let Err(error) = connection.await {
                tracing::debug!(%error, "MCP over HTTP: connection ended");
            }
            drop(permit);
        });
    }
}

tokio::task_local! {
    /// Set by [`CappedSessions::create_session`] when it refuses a session, so the request's
    /// answer becomes a 503 instead of rmcp's generic 500 for a failed session manager.
    static SESSION_REFUSED: Cell<bool>;
}

/// One request from a browser origin or none: a preflight from an allowed origin is answered
/// here, before authentication (a preflight carries no credentials); anything else goes
/// through [`admitted`], and its answer names an allowed origin, so that the page may read it.
///
/// A request from an origin not allowed is answered `403` without CORS headers (after the
/// authentication check, whose `401` names no origin, unless it is a preflight), the MCP
/// transport's DNS-rebinding rule (2025-06-18 on); rmcp's own check would refuse it as well.
async fn answer(
    service: TowerToHyperService<StreamableHttpService<Traced<McpHandler>, CappedSessions>>,
    sessions: Arc<CappedSessions>,
    gate: Gate,
    cors: Cors,
    refusals: Arc<Refusals>,
    session_limit: usize,
    request: Request<TimeoutBody<Incoming>>,
) -> Result<Response<Body>, Infallible> {
    let verdict = cors.verdict(request.headers());
    let preflight = cors::is_preflight(request.method(), request.headers());
    let refused = matches!(verdict, Verdict::Refused);
    let origin = match verdict {
        Verdict::Allowed(origin) if preflight => {
            return Ok(cors::preflight(origin, request.headers()));
        }
        Verdict::Allowed(origin) => Some(origin),
        Verdict::Refused if preflight => return Ok(cors::refused()),
        Verdict::Refused | Verdict::Absent => None,
    };
    let mut response = admitted(
        service,
        sessions,
        gate,
        refused,
        refusals,
        session_limit,
        request,
    )
    .await?;
    if let Some(origin) = origin {
        cors::allow(&mut response, origin);
    }
    Ok(response)
}

/// One request through rmcp once the gate admits it (a `401` slowed by the connection's
/// `refusals`) and its origin is not `refused`, its `initialize` answered 503 when every
/// session slot is taken.
///
/// A request naming an `Mcp-Session-Id` this server did not issue (or that has ended) is
/// answered 404, as the MCP transport specification (2025-06-18 on) has a server answer an
/// unknown session — the 2026-07-28 requests rmcp serves statelessly included: the session is
/// who a request's decisions are bound to ([`McpHandler`]'s principal), so a header value of
/// the client's choosing must never pass for one.
async fn admitted(
    service: TowerToHyperService<StreamableHttpService<Traced<McpHandler>, CappedSessions>>,
    sessions: Arc<CappedSessions>,
    gate: Gate,
    refused: bool,
    refusals: Arc<Refusals>,
    session_limit: usize,
    request: Request<TimeoutBody<Incoming>>,
) -> Result<Response<Body>, Infallible> {
    if request.method() == hyper::Method::GET
        && let Some(public) = gate.public_answer(request.uri().path())
    {
        return Ok(public);
    }
    let mut request = request;
    match gate.admit_on(request.headers(), &refusals).await {
        Err(refusal) => return Ok(refusal),
        // rmcp hands the request's parts to the handler: decisions are bound to the subject.
        Ok(Some(subject)) => {
            request.extensions_mut().insert(subject);
        }
        Ok(None) => {}
    }
    if refused {
        return Ok(cors::refused());
    }
    if let Some(session) = request.headers().get("mcp-session-id") {
        let issued = match session.to_str() {
            Ok(id) => sessions.held().contains_key(&SessionId::from(id)),
            Err(_) => false,
        };
        if !issued {
            return Ok(unknown_session());
        }
    }
    let delete = request.method() == hyper::Method::DELETE;
    let json_body = unparsable::declares_json(request.headers());
    let (request, kept) = {
        let (parts, body) = request.into_parts();
        let (body, kept) = Copied::new(body);
        (Request::from_parts(parts, body), kept)
    };
    // rmcp awaits `create_session` within this future, so the task-local is in scope there.
    let mut call = pin!(SESSION_REFUSED.scope(Cell::new(false), service.call(request)));
    let mut response = call.as_mut().await?;
    if call
        .as_mut()
        .take_value()
        .is_some_and(|refused| refused.get())
    {
        return Ok(too_many_sessions(session_limit));
    }
    if let Some(answer) = unparsable::answer(response.status(), json_body, &kept) {
        return Ok(answer);
    }
    if delete && response.status() == StatusCode::ACCEPTED {
        // rmcp answers a closed session `202 Accepted`, which says the close has not happened
        // yet (RFC 9110 §15.3.3); it has, and the transport specification names no other code,
        // so the answer is RFC 9110 §9.3.5's for an enacted DELETE without content, which
        // clients (the Python SDK among them) take as a clean close.
        *response.status_mut() = StatusCode::NO_CONTENT;
        *response.body_mut() = Full::new(Bytes::new()).boxed();
    }
    Ok(response)
}

/// 404 for a request naming a session this server does not have.
fn unknown_session() -> Response<Body> {
    let text = "Not Found: Session not found (this server did not issue it, or it has ended)\n";
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

fn too_many_sessions(limit: usize) -> Response<Body> {
    let text = format!(
        "Service Unavailable: too many MCP sessions (limit {limit}); end one (HTTP DELETE) or retry later\n"
    );
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The whole answer to a connection past the limit: a complete HTTP/1.1 503 that needs no
/// request read first.
fn connection_refusal(limit: usize) -> Vec<u8> {
    let body = format!("Service Unavailable: too many connections (limit {limit}); retry later\n");
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answers a connection past the limit without waiting on it: one non-blocking write (the
/// answer fits any fresh socket's send buffer), then the socket is closed. What the client sent
/// already is read first, so that the close is not a reset that could discard the answer.
fn refuse(stream: &TcpStream, refusal: &[u8]) {
    let mut sent = [0u8; 8192];
    let _ = stream.try_read(&mut sent);
    if let Err(error) = stream.try_write(refusal) {
        tracing::debug!(%error, "MCP over HTTP: refusing a connection past the limit");
    }
}

/// rmcp's in-memory sessions, at most `limit` at once: a session holds a slot from
/// `initialize` until it is closed (HTTP DELETE, its client's end, or idle expiry). Each
/// request's stream is one a tool may end early for its client to resume
/// ([`ResponseStream`]).
pub(crate) struct CappedSessions {
    inner: LocalSessionManager,
    slots: Arc<Semaphore>,
    held: Mutex<HashMap<SessionId, OwnedSemaphorePermit>>,
    limit: usize,
    /// Whom to tell when a request's stream (session, rmcp's request number) is resumed,
    /// while its request is served.
    resumable: Mutex<HashMap<(SessionId, u64), Weak<Notify>>>,
}

impl CappedSessions {
    fn new(limits: &McpHttpLimits) -> CappedSessions {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(limits.session_idle_timeout);
        CappedSessions {
            inner,
            slots: Arc::new(Semaphore::new(limits.max_sessions)),
            held: Mutex::new(HashMap::new()),
            limit: limits.max_sessions,
            resumable: Mutex::new(HashMap::new()),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, OwnedSemaphorePermit>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn resumable(&self) -> std::sync::MutexGuard<'_, HashMap<(SessionId, u64), Weak<Notify>>> {
        self.resumable
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A session refused or failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CappedSessionError {
    #[error("too many MCP sessions (limit {0})")]
    Full(usize),
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

impl SessionManager for CappedSessions {
    type Error = CappedSessionError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            let _ = SESSION_REFUSED.try_with(|refused| refused.set(true));
            return Err(CappedSessionError::Full(self.limit));
        };
        let (id, transport) = self.inner.create_session().await?;
        // rmcp starts the session's worker (whose end closes the session) only after this.
        self.held().insert(id.clone(), slot);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.inner.close_session(id).await;
        // A session closes twice (DELETE, then its worker's end): the second finds no slot.
        self.held().remove(id);
        Ok(closed?)
    }

    /// As rmcp's `LocalSessionManager::create_stream`, with the request's [`ResponseStream`]
    /// in its extensions, where the handler finds it.
    async fn create_stream(
        &self,
        id: &SessionId,
        mut message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let session = self.inner.sessions.read().await.get(id).cloned();
        let session =
            session.ok_or_else(|| LocalSessionManagerError::SessionNotFound(id.clone()))?;
        let receiver = session
            .establish_request_wise_channel()
            .await
            .map_err(LocalSessionManagerError::from)?;
        if let (Some(http_request_id), ClientJsonRpcMessage::Request(request)) =
            (receiver.http_request_id, &mut message)
        {
            let resumed = Arc::new(Notify::new());
            let mut resumable = self.resumable();
            resumable.retain(|_, told| told.strong_count() > 0);
            resumable.insert((id.clone(), http_request_id), Arc::downgrade(&resumed));
            request.request.extensions_mut().insert(ResponseStream {
                session: session.clone(),
                http_request_id,
                resumed,
            });
        }
        session
            .push_message(message, receiver.http_request_id)
            .await
            .map_err(LocalSessionManagerError::from)?;
        let mut events = receiver.inner;
        Ok(futures::stream::poll_fn(move |context| {
            events.poll_recv(context)
        }))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(SessionManager::create_standalone_stream(&self.inner, id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // rmcp's event ids are `index/request` on a request's stream.
        let request = last_event_id
            .split_once('/')
            .and_then(|(_, request)| request.parse::<u64>().ok());
        let stream = SessionManager::resume(&self.inner, id, last_event_id).await?;
        // The answer now goes on the resumed stream: a tool waiting for that may answer.
        if let Some(request) = request
            && let Some(resumed) = self
                .resumable()
                .get(&(id.clone(), request))
                .and_then(Weak::upgrade)
        {
            resumed.notify_one();
        }
        Ok(stream)
    }
}
