//! The client-credentials grant (RFC 6749 §4.4) for services: a token asked for at connect, and
//! again when it expires or the server refuses it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{AuthError, AuthorizationManager, ClientCredentialsConfig};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

/// OAuth client credentials for an MCP server reached over streamable HTTP (feature `oauth`),
/// set with [`McpServer::client_credentials`](crate::mcp::McpServer::client_credentials).
///
/// On connect the bridge finds the server's authorization server (the server's protected-resource
/// metadata, RFC 9728, then the authorization server's metadata, RFC 8414 or OpenID Connect),
/// and asks its token endpoint for an access token with `grant_type=client_credentials`, the
/// client id and secret in the request body (HTTP Basic when the server offers only that), the
/// [`scopes`](McpClientCredentials::scopes), and `resource` = the server's URL (RFC 8707). The
/// token is sent as `Authorization: Bearer`; when it expires, or the server answers `401`, a new
/// one is asked for (once per request). Tokens and the secret stay in memory and are never
/// logged; `Debug` shows neither.
#[derive(Clone)]
#[non_exhaustive]
pub struct McpClientCredentials {
    /// The client id the authorization server registered.
    pub client_id: String,
    client_secret: String,
    /// Scopes asked for (default: none, leaving the choice to the authorization server).
    pub scopes: Vec<String>,
}

impl fmt::Debug for McpClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpClientCredentials")
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("scopes", &self.scopes)
            .finish()
    }
}

impl McpClientCredentials {
    /// The client `client_id` with its secret, no scope asked for.
    pub fn new(
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> McpClientCredentials {
        McpClientCredentials {
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            scopes: Vec::new(),
        }
    }

    /// Adds a scope to ask for.
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scopes.push(scope.into());
        self
    }
}

/// An HTTP client that sends a client-credentials access token with every request.
#[derive(Clone)]
pub(crate) struct CredentialsClient<C> {
    inner: C,
    manager: Arc<AuthorizationManager>,
    grant: ClientCredentialsConfig,
}

/// Discovers the authorization server of the MCP server at `url` and gets a first token.
///
/// # Errors
/// Discovery or the token request failed, in rmcp's words (never holding the secret).
pub(crate) async fn authorize<C>(
    inner: C,
    url: &str,
    credentials: &McpClientCredentials,
) -> Result<CredentialsClient<C>, String> {
    let failed = |error: AuthError| format!("OAuth: {error}");
    let mut manager = AuthorizationManager::new(url).await.map_err(failed)?;
    let resolution = manager.resolve_metadata().await.map_err(failed)?;
    if !resolution.source.is_discovered() {
        return Err(format!(
            "OAuth: no authorization server found for {url} (neither its protected-resource \
             metadata nor authorization-server metadata)"
        ));
    }
    manager.set_metadata(resolution.metadata);
    let grant = ClientCredentialsConfig::ClientSecret {
        client_id: credentials.client_id.clone(),
        client_secret: credentials.client_secret.clone(),
        scopes: credentials.scopes.clone(),
        resource: Some(url.to_owned()),
    };
    manager
        .configure_client_credentials(&grant)
        .map_err(failed)?;
    manager
        .exchange_client_credentials(&grant)
        .await
        .map_err(failed)?;
    Ok(CredentialsClient {
        inner,
        manager: Arc::new(manager),
        grant,
    })
}

type HttpError<E> = StreamableHttpError<E>;

impl<C: StreamableHttpClient + Sync> CredentialsClient<C> {
    /// A token still valid, a new one when it expired.
    async fn token(&self) -> Result<String, HttpError<C::Error>> {
        match self.manager.get_access_token().await {
            Err(AuthError::AuthorizationRequired) => self.renew().await,
            other => other.map_err(HttpError::from),
        }
    }

    /// A new token, used as it comes: one said to expire at once still serves this request.
    async fn renew(&self) -> Result<String, HttpError<C::Error>> {
        let answer = self
            .manager
            .exchange_client_credentials(&self.grant)
            .await?;
        Ok(oauth2::TokenResponse::access_token(&answer)
            .secret()
            .clone())
    }

    /// `call` with a token; when the server refuses it, once more with a new one.
    async fn authorized<T, F, Fut>(&self, call: F) -> Result<T, HttpError<C::Error>>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = Result<T, HttpError<C::Error>>>,
    {
        match call(self.token().await?).await {
            Err(HttpError::AuthRequired(_)) => call(self.renew().await?).await,
            answer => answer,
        }
    }
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for CredentialsClient<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError<C::Error>> {
        self.authorized(|token| {
            self.inner.post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                Some(token),
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
        self.authorized(|token| {
            self.inner.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                Some(token),
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
        self.authorized(|token| {
            self.inner.delete_session(
                uri.clone(),
                session_id.clone(),
                Some(token),
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
        self.authorized(|token| {
            self.inner.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                Some(token),
                custom_headers.clone(),
            )
        })
        .await
    }
}
