//! The client-credentials grant (RFC 6749 §4.4) for services: a token asked for at connect, and
//! again when it expires or the server refuses it.

use std::fmt;
use std::time::Duration;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, ClientCredentialsConfig, OAuthTokenResponse,
};
use rmcp::transport::streamable_http_client::StreamableHttpError;

use super::bearer::{BearerClient, Grant};
use super::unanswered::{discovered, unanswered};

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

/// The client-credentials grant of one server: its authorization server and the grant's
/// settings.
pub(crate) struct CredentialsGrant {
    manager: AuthorizationManager,
    grant: ClientCredentialsConfig,
}

/// Discovers the authorization server of the MCP server at `url` and gets a first token, each
/// OAuth request bounded by `bound` (see [`super::http_client`]).
///
/// # Errors
/// Discovery or the token request failed, in rmcp's words (never holding the secret).
pub(crate) async fn authorize<C>(
    inner: C,
    url: &str,
    credentials: &McpClientCredentials,
    bound: Duration,
) -> Result<BearerClient<C, CredentialsGrant>, String> {
    let failed = |error: AuthError| format!("OAuth: {error}");
    let (mut manager, refusals) = super::http_client::manager(url, bound)
        .await
        .map_err(failed)?;
    let resolution = discovered(|| manager.resolve_metadata())
        .await
        .map_err(|error| failed(refusals.explain(error)))?;
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
    exchange(&manager, &grant).await.map_err(failed)?;
    Ok(BearerClient::new(
        inner,
        CredentialsGrant { manager, grant },
    ))
}

impl CredentialsGrant {
    /// A token still valid, a new one when it expired.
    async fn token<E>(&self) -> Result<String, StreamableHttpError<E>>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        match self.manager.get_access_token().await {
            Err(AuthError::AuthorizationRequired) => self.renew().await,
            other => other.map_err(StreamableHttpError::from),
        }
    }

    /// A new token, used as it comes: one said to expire at once still serves this request.
    async fn renew<E>(&self) -> Result<String, StreamableHttpError<E>>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let answer = exchange(&self.manager, &self.grant).await?;
        Ok(oauth2::TokenResponse::access_token(&answer)
            .secret()
            .clone())
    }
}

/// A token from the grant; the request is sent once more when it got no answer (a reused
/// connection the server had closed, see `unanswered`).
async fn exchange(
    manager: &AuthorizationManager,
    grant: &ClientCredentialsConfig,
) -> Result<OAuthTokenResponse, AuthError> {
    match manager.exchange_client_credentials(grant).await {
        Err(error) if unanswered(&error) => manager.exchange_client_credentials(grant).await,
        answer => answer,
    }
}

impl Grant for CredentialsGrant {
    /// `call` with a token; when the server refuses it, once more with a new one.
    async fn authorized<E, T, F, Fut>(&self, call: F) -> Result<T, StreamableHttpError<E>>
    where
        E: std::error::Error + Send + Sync + 'static,
        T: Send,
        F: Fn(Option<String>) -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, StreamableHttpError<E>>> + Send,
    {
        match call(Some(self.token().await?)).await {
            Err(StreamableHttpError::AuthRequired(_)) => call(Some(self.renew().await?)).await,
            answer => answer,
        }
    }
}
