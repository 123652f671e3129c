//! The streamable HTTP transport: rmcp's reqwest client behind the same depth guard as stdio.
//!
//! rmcp parses every JSON-RPC message with serde_json's default recursion limit (128): a
//! `tools/list` answer holding one 5,000-deep schema would fail (a JSON body) or vanish (an SSE
//! event), taking every sibling tool with it. Here each SSE event nested deeper than
//! [`MAX_RELAY_DEPTH`] is rewritten like a stdio line ([`cut_deep`]: a byte scan replaces the
//! too-deep subtrees by a marker before anything parses them), and a `tools/list` whose JSON body
//! rmcp refused is fetched once more and read the same way. The schema check then refuses that
//! one tool. A request that only reads (`server/discover`, `ping`, the listings, `prompts/get`,
//! `resources/read`, `tasks/get`) and got no answer (its connection reset) is sent once more.
//!
//! No message is written to a kept-alive connection: a server may close one it holds idle at the
//! moment a message arrives on it, unread, and the client cannot tell that from a message the
//! server received. Node's HTTP server closes an idle connection after 5 s, and one whose event
//! loop wakes from a stall runs that timer before it reads what is waiting, so under load it
//! closes a connection the client wrote to at once. Only a request that only reads could be
//! sent again; `initialize`, `notifications/initialized`, a `tools/call` (its tool may have
//! run), the answer to a server's elicitation could not, and the connection failed with them.
//! Each message opens a connection of its own, which no server closes before reading its first
//! request.
//!
//! It also orders the session's first request after its standalone GET stream: rmcp opens that
//! stream in a task of its own once `notifications/initialized` is accepted and goes straight on
//! to the next request, so a server could answer or ask (elicitation) on a stream the client had
//! not opened yet. The stream's open is [`StandaloneGate`]'s to wait for.
//!
//! Its parts: this front is the client ([`GuardedClient`]) and the depth guard of SSE events;
//! [`standalone_gate`] holds a session's requests until its standalone stream is open;
//! [`message_kinds`] tells the messages the client treats apart (those that only read, a
//! `tools/list`, `notifications/initialized`).

mod message_kinds;
mod standalone_gate;

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::stdio::{MAX_RELAY_DEPTH, cut_deep};
use crate::json::text_depth;
use crate::telemetry::SessionCell;
use message_kinds::{is_initialized, is_tools_list, only_reads, unanswered};
use standalone_gate::StandaloneGate;

/// The MCP session header (streamable HTTP, 2025-03-26 and later).
const SESSION_HEADER: &str = "mcp-session-id";

type HttpError = StreamableHttpError<reqwest::Error>;

/// rmcp's reqwest client with deep messages rewritten before rmcp parses them, and the session's
/// requests held until its standalone GET stream is open.
#[derive(Clone)]
pub(crate) struct GuardedClient {
    /// Keeps no connection: every message goes on a new one (the module's docs say why).
    inner: reqwest::Client,
    standalone: StandaloneGate,
    /// The session id last sent or received, for the connection's spans.
    session: SessionCell,
}

impl Default for GuardedClient {
    fn default() -> Self {
        // Only a TLS backend that fails to start makes the builder fail; the default client
        // then still reaches plain-HTTP servers, and names its error on a TLS one.
        let inner = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap_or_default();
        GuardedClient {
            inner,
            standalone: StandaloneGate::default(),
            session: SessionCell::default(),
        }
    }
}

/// Rewrites the data of an SSE event nested deeper than [`MAX_RELAY_DEPTH`].
fn guard_event(event: Result<Sse, SseError>) -> Result<Sse, SseError> {
    let mut event = event?;
    if let Some(data) = &event.data
        && text_depth(data.as_bytes()) > MAX_RELAY_DEPTH
    {
        let cut = cut_deep(data.as_bytes());
        event.data = Some(String::from_utf8_lossy(&cut).into_owned());
    }
    Ok(event)
}

fn guard_stream(
    stream: BoxStream<'static, Result<Sse, SseError>>,
) -> BoxStream<'static, Result<Sse, SseError>> {
    stream.map(guard_event).boxed()
}

impl GuardedClient {
    /// A client that notes the session ids it sends and is given in `session`.
    pub(crate) fn with_session(session: SessionCell) -> Self {
        GuardedClient {
            session,
            ..GuardedClient::default()
        }
    }

    /// Notes the session id a request carries or an answer assigns.
    fn note_session(&self, session: &str) {
        let mut kept = self.session.lock();
        if kept.as_deref() != Some(session) {
            *kept = Some(Arc::from(session));
        }
    }

    /// One POST of `message`, its SSE answer read through the depth guard.
    async fn post_once(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let initialized = is_initialized(&message) && session_id.is_some();
        if let Some(session) = &session_id {
            self.note_session(session);
        }
        if !initialized {
            self.standalone.wait().await;
        }
        let retry = is_tools_list(&message).then(|| {
            (
                message.clone(),
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
                limits,
            )
        });
        let answer = self
            .inner
            .post_message_with_response_limits(
                uri.clone(),
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        if initialized && answer.is_ok() {
            self.standalone.expect();
        }
        if let Ok(
            StreamableHttpPostResponse::Json(_, Some(session))
            | StreamableHttpPostResponse::Sse(_, Some(session)),
        ) = &answer
        {
            self.note_session(session);
        }
        match answer {
            Ok(StreamableHttpPostResponse::Sse(stream, session)) => Ok(
                StreamableHttpPostResponse::Sse(guard_stream(stream), session),
            ),
            Err(StreamableHttpError::UnexpectedServerResponse(reason)) => {
                if let Some((message, session, auth, headers, limits)) = retry {
                    let guarded = self
                        .post_guarded_json(
                            &uri,
                            &message,
                            session.as_deref(),
                            auth,
                            &headers,
                            &limits,
                        )
                        .await;
                    if let Some(guarded) = guarded {
                        return Ok(guarded);
                    }
                }
                Err(StreamableHttpError::UnexpectedServerResponse(reason))
            }
            other => other,
        }
    }

    /// Sends `message` again and reads a JSON answer through the depth guard: the path for a
    /// `tools/list` body rmcp could not parse (idempotent, so asking twice is safe).
    async fn post_guarded_json(
        &self,
        uri: &str,
        message: &ClientJsonRpcMessage,
        session_id: Option<&str>,
        auth_header: Option<String>,
        custom_headers: &HashMap<HeaderName, HeaderValue>,
        limits: &StreamableHttpResponseLimits,
    ) -> Option<StreamableHttpPostResponse> {
        let mut request = self
            .inner
            .post(uri)
            .header(http::header::ACCEPT, "application/json, text/event-stream");
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        if let Some(session) = session_id {
            request = request.header(SESSION_HEADER, session);
        }
        let response = request.json(message).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let session = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        if response
            .content_length()
            .is_some_and(|len| len > limits.max_json_response_size as u64)
        {
            return None;
        }
        let body = response.bytes().await.ok()?;
        if body.len() > limits.max_json_response_size {
            return None;
        }
        let cut = cut_deep(&body);
        let parsed: ServerJsonRpcMessage = serde_json::from_slice(&cut).ok()?;
        Some(StreamableHttpPostResponse::Json(parsed, session))
    }
}

impl StreamableHttpClient for GuardedClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    /// A request that only reads ([`only_reads`]) and got no answer (the connection reset or
    /// closed before it) is sent once more on a new connection: asking twice is safe. A server
    /// whose event loop wakes after a stall can close a kept-alive connection with a request
    /// already waiting on it, however briefly the client left it idle.
    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let resend = only_reads(&message).then(|| {
            (
                message.clone(),
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
            )
        });
        let answer = self
            .post_once(
                uri.clone(),
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        match (answer, resend) {
            (
                Err(StreamableHttpError::Client(error)),
                Some((message, session_id, auth_header, custom_headers)),
            ) if unanswered(&error) => {
                self.post_once(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    limits,
                )
                .await
            }
            (answer, _) => answer,
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        let stream = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.standalone.opened();
        Ok(guard_stream(stream?))
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientNotification, ClientRequest};

    use super::*;

    /// A loopback HTTP server handing each connection it accepts to `connection` with its
    /// number (0 first), on a task of its own: its base URL and how many connections it accepted.
    async fn counting_server<F>(
        connection: fn(tokio::net::TcpStream, usize) -> F,
    ) -> (String, Arc<std::sync::atomic::AtomicUsize>)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let number = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(connection(stream, number));
            }
        });
        (url, accepted)
    }

    /// Reads one whole request from `stream`: its headers and the JSON body after them. `false`
    /// when the connection ended first.
    async fn read_request(stream: &mut tokio::net::TcpStream) -> bool {
        use tokio::io::AsyncReadExt;
        let mut request = Vec::new();
        let mut buffer = [0u8; 4096];
        while !request.ends_with(b"}") {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return false,
                Ok(read) => request.extend_from_slice(&buffer[..read]),
            }
        }
        true
    }

    /// Answers a request on `stream` with an empty tool list, keeping the connection alive.
    async fn answer_tools_list(stream: &mut tokio::net::TcpStream) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        let body = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#;
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(answer.as_bytes()).await
    }

    /// A `tools/list` whose connection the server resets once it has read the request is sent
    /// once more, on a new connection, and its answer comes back.
    #[tokio::test]
    async fn a_tools_list_reset_by_the_server_is_sent_once_more() {
        let (answer, connections) =
            reset_once(ClientRequest::ListToolsRequest(Default::default())).await;
        assert!(
            matches!(answer, Ok(StreamableHttpPostResponse::Json(..))),
            "{answer:?}"
        );
        assert_eq!(connections, 2);
    }

    /// So is a `server/discover` (a 2026-07-28 client's first request, and its retry at a
    /// version the server supports).
    #[tokio::test]
    async fn a_discover_reset_by_the_server_is_sent_once_more() {
        let (answer, connections) =
            reset_once(ClientRequest::DiscoverRequest(Default::default())).await;
        assert!(
            matches!(answer, Ok(StreamableHttpPostResponse::Json(..))),
            "{answer:?}"
        );
        assert_eq!(connections, 2);
    }

    /// A `tools/call` is not: its tool may have run.
    #[tokio::test]
    async fn a_tools_call_reset_by_the_server_is_not_sent_again() {
        let call =
            rmcp::model::CallToolRequest::new(rmcp::model::CallToolRequestParams::new("echo"));
        let (answer, connections) = reset_once(ClientRequest::CallToolRequest(call)).await;
        assert!(answer.is_err(), "{answer:?}");
        assert_eq!(connections, 1);
    }

    /// Posts `request` to a server that resets the first connection once it has read the
    /// request and answers on any later one; the answer and how many connections were opened.
    async fn reset_once(
        request: ClientRequest,
    ) -> (Result<StreamableHttpPostResponse, HttpError>, usize) {
        let (url, accepted) = counting_server(|mut stream, number| async move {
            if !read_request(&mut stream).await {
                return;
            }
            if number == 0 {
                // Closed with the request unread by the application: a reset.
                stream.set_zero_linger().unwrap();
                return;
            }
            let _ = answer_tools_list(&mut stream).await;
        })
        .await;
        let message = ClientJsonRpcMessage::request(request, rmcp::model::RequestId::Number(1));
        let answer = GuardedClient::default()
            .post_message_with_response_limits(
                url.into(),
                message,
                None,
                None,
                HashMap::new(),
                StreamableHttpResponseLimits::default(),
            )
            .await;
        (answer, accepted.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// A server that answers the first request of each connection and keeps it alive, then
    /// resets the connection when the next request arrives on it (as a server does that closes
    /// a kept-alive connection with a request waiting on it). Counts the connections.
    async fn closing_kept_alive_server() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        counting_server(|mut stream, _| async move {
            // The first request is answered; the next one meets a reset.
            if !read_request(&mut stream).await || answer_tools_list(&mut stream).await.is_err() {
                return;
            }
            if read_request(&mut stream).await {
                stream.set_zero_linger().unwrap();
            }
        })
        .await
    }

    /// No message right after a `tools/list` is written to the `tools/list`'s kept-alive
    /// connection, which the server closes as the message arrives: each opens one of its own and
    /// gets through. None of these could be sent again: a `tools/call` (the tool may have run),
    /// `initialize` (a session may have started), `notifications/initialized` (rmcp ends the
    /// session when it fails), the answer to a server's request (an elicitation, a ping).
    #[tokio::test]
    async fn no_message_goes_on_a_kept_alive_connection() {
        use rmcp::model::{ClientResult, RequestId};
        let call = ClientJsonRpcMessage::request(
            ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
                rmcp::model::CallToolRequestParams::new("echo"),
            )),
            RequestId::Number(2),
        );
        let initialize = ClientJsonRpcMessage::request(
            ClientRequest::InitializeRequest(Default::default()),
            RequestId::Number(2),
        );
        let initialized = ClientJsonRpcMessage::notification(
            ClientNotification::InitializedNotification(Default::default()),
        );
        let answer = ClientJsonRpcMessage::response(ClientResult::empty(()), RequestId::Number(7));
        for message in [call, initialize, initialized, answer] {
            let (url, accepted) = closing_kept_alive_server().await;
            let client = GuardedClient::default();
            let post = |message: ClientJsonRpcMessage| {
                client.post_message_with_response_limits(
                    url.as_str().into(),
                    message,
                    Some("session".into()),
                    None,
                    HashMap::new(),
                    StreamableHttpResponseLimits::default(),
                )
            };
            let list = post(ClientJsonRpcMessage::request(
                ClientRequest::ListToolsRequest(Default::default()),
                RequestId::Number(1),
            ))
            .await;
            assert!(
                matches!(list, Ok(StreamableHttpPostResponse::Json(..))),
                "{list:?}"
            );
            let sent = post(message.clone()).await;
            assert!(sent.is_ok(), "{message:?}: {sent:?}");
            assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
        }
    }
}
