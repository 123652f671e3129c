//! The HTTP client both grants share: every request carries the grant's bearer token, and the
//! grant decides what a refusal leads to (a new token, a login, a step-up) and how often.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

/// Where a request's token comes from, and what a refusal means.
pub(crate) trait Grant: Send + Sync + 'static {
    /// Runs `call` with a token (`None` while there is none yet) and, when the server refuses
    /// it, as often again as the grant allows after getting a new one.
    fn authorized<E, T, F, Fut>(
        &self,
        call: F,
    ) -> impl Future<Output = Result<T, StreamableHttpError<E>>> + Send
    where
        E: std::error::Error + Send + Sync + 'static,
        T: Send,
        F: Fn(Option<String>) -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, StreamableHttpError<E>>> + Send;
}

/// `inner` with the token of `grant` on every request (the transport's own `auth_header` is
/// replaced).
pub(crate) struct BearerClient<C, G> {
    inner: C,
    grant: Arc<G>,
}

impl<C: Clone, G> Clone for BearerClient<C, G> {
    fn clone(&self) -> Self {
        BearerClient {
            inner: self.inner.clone(),
            grant: self.grant.clone(),
        }
    }
}

impl<C, G> BearerClient<C, G> {
    pub(crate) fn new(inner: C, grant: G) -> Self {
        BearerClient {
            inner,
            grant: Arc::new(grant),
        }
    }
}

type HttpError<E> = StreamableHttpError<E>;

impl<C: StreamableHttpClient + Sync, G: Grant> StreamableHttpClient for BearerClient<C, G> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError<C::Error>> {
        self.grant
            .authorized(|token| {
                self.inner.post_message(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    token,
                    custom_headers.clone(),
                )
            })
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError<C::Error>> {
        self.grant
            .authorized(|token| {
                self.inner.post_message_with_response_limits(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    token,
                    custom_headers.clone(),
                    limits,
                )
            })
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError<C::Error>> {
        self.grant
            .authorized(|token| {
                self.inner.delete_session(
                    uri.clone(),
                    session_id.clone(),
                    token,
                    custom_headers.clone(),
                )
            })
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError<C::Error>> {
        self.grant
            .authorized(|token| {
                self.inner.get_stream(
                    uri.clone(),
                    session_id.clone(),
                    last_event_id.clone(),
                    token,
                    custom_headers.clone(),
                )
            })
            .await
    }
}
