//! The authorization code grant with PKCE (OAuth 2.1) for a person: the server's challenge
//! starts it, the host's [`McpAuthorizer`] sends the person to the authorization URL and hands
//! back the redirect, and the code is exchanged for tokens that are refreshed from then on.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationRequest,
    AuthorizationSession, CredentialStore, OAuthClientConfig,
};
use rmcp::transport::streamable_http_client::StreamableHttpError;

use super::bearer::{BearerClient, Grant};
use super::store::FileTokenStore;
use super::unanswered::{RetainedStates, discovered, unanswered};

/// Why the person's authorization did not come back: they refused, the wait ran out, the
/// redirect was malformed. Its text is shown in the connect or call error.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct McpAuthorizeError(String);

impl McpAuthorizeError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> McpAuthorizeError {
        McpAuthorizeError(message.into())
    }
}

/// How a person is sent to the authorization server: the host's half of the authorization code
/// flow (RFC 6749 §4.1 with PKCE, RFC 7636).
///
/// [`McpLoopbackAuthorizer`](super::McpLoopbackAuthorizer) prints the URL (and opens a browser
/// when asked) and listens on `127.0.0.1` for the redirect; a host with its own UI implements
/// this instead.
pub trait McpAuthorizer: Send + Sync {
    /// The redirect URI registered for the client and sent in every authorization request, e.g.
    /// `http://127.0.0.1:49152/callback`.
    fn redirect_uri(&self) -> String;

    /// Sends the person to `url` (the authorization endpoint with `client_id`, `state`,
    /// `code_challenge`, `scope`, `resource`) and answers the full URL the authorization server
    /// redirected to, whose query holds `code` and `state` (and `iss`, RFC 9207).
    ///
    /// # Errors
    /// The person refused, the redirect never came, or it carried an `error`.
    fn authorize<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<String, McpAuthorizeError>>;
}

/// A person's login to an MCP server over streamable HTTP (feature `oauth`), set with
/// [`McpServer::oauth_login`](crate::mcp::McpServer::oauth_login): the OAuth 2.1 authorization
/// code grant with PKCE (S256).
///
/// Nothing happens until the server answers `401`: then its challenge (`WWW-Authenticate`,
/// RFC 6750) and protected-resource metadata (RFC 9728) lead to its authorization server
/// (RFC 8414 or OpenID Connect metadata; for 2025-03-26 servers the metadata or the
/// `/authorize`, `/token`, `/register` fallbacks at the server's root). The client is
/// identified, first that applies: the [`client_id`](McpOAuthLogin::client_id) registered out
/// of band; the [client ID metadata document](McpOAuthLogin::client_metadata_url) when the
/// server accepts URL client ids; dynamic client registration (RFC 7591). Scopes asked for: the
/// ones set here, else the challenge's `scope`, else the resource's `scopes_supported`, else
/// none; `offline_access` is added when the authorization server lists it (to get a refresh
/// token). Every request carries `resource` = the server's URL (RFC 8707). The client
/// authenticates at the token endpoint as the server supports: `client_secret_basic`,
/// `client_secret_post` or `none`.
///
/// Tokens are refreshed before they expire and when the server refuses one; a refused refresh
/// starts a new login. A `403 insufficient_scope` asks the person again for the union of the
/// scopes held and the ones challenged, at most once per request and three times per
/// connection. Tokens are kept in memory, or in the [`token_file`](McpOAuthLogin::token_file)
/// the user names, which a later connect reuses without asking the person. No token, secret or
/// code is ever logged; `Debug` shows none.
#[derive(Clone)]
#[non_exhaustive]
pub struct McpOAuthLogin {
    authorizer: Arc<dyn McpAuthorizer>,
    /// A client id registered with the authorization server out of band.
    pub client_id: Option<String>,
    client_secret: Option<String>,
    /// An `https` URL serving this client's metadata document, used as its client id where the
    /// authorization server accepts that (`client_id_metadata_document_supported`).
    pub client_metadata_url: Option<String>,
    /// The name sent in a dynamic client registration (default `dsh-tools`).
    pub client_name: String,
    /// Scopes asked for; empty (the default) lets the server's challenge and metadata choose.
    pub scopes: Vec<String>,
    /// Where tokens are kept between runs; `None` (the default) keeps them in memory.
    pub token_file: Option<PathBuf>,
}

impl fmt::Debug for McpOAuthLogin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpOAuthLogin")
            .field("redirect_uri", &self.authorizer.redirect_uri())
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("client_metadata_url", &self.client_metadata_url)
            .field("client_name", &self.client_name)
            .field("scopes", &self.scopes)
            .field("token_file", &self.token_file)
            .finish()
    }
}

impl McpOAuthLogin {
    /// A login whose browser step is `authorizer`; everything else discovered.
    pub fn new(authorizer: impl McpAuthorizer + 'static) -> McpOAuthLogin {
        McpOAuthLogin {
            authorizer: Arc::new(authorizer),
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            client_name: "dsh-tools".to_owned(),
            scopes: Vec::new(),
            token_file: None,
        }
    }

    /// Uses the client id registered out of band (no registration).
    pub fn client_id(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = Some(client_id.into());
        self
    }

    /// The secret of the [`client_id`](Self::client_id), for a confidential client.
    pub fn client_secret(mut self, secret: impl Into<String>) -> Self {
        self.client_secret = Some(secret.into());
        self
    }

    /// Uses `url` (an `https` URL with a path) as the client id where the authorization server
    /// accepts client ID metadata documents.
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.client_metadata_url = Some(url.into());
        self
    }

    /// The client name sent in a dynamic client registration.
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = name.into();
        self
    }

    /// Adds a scope to ask for.
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scopes.push(scope.into());
        self
    }

    /// Keeps the tokens in `path` (JSON, mode 0600, replaced atomically on every change) so a
    /// later connect reuses them; the file holds the refresh token, so it is a secret.
    pub fn token_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.token_file = Some(path.into());
        self
    }

    fn request(&self) -> AuthorizationRequest {
        let mut request = AuthorizationRequest::new(self.authorizer.redirect_uri())
            .with_client_name(&self.client_name)
            .with_initial_scope_selection();
        if !self.scopes.is_empty() {
            request = request.with_scopes(self.scopes.iter().cloned());
        }
        if let Some(id) = &self.client_id {
            request = request.with_preregistered_client(id);
            if let Some(secret) = &self.client_secret {
                request = request.with_client_secret(secret);
            }
        }
        if let Some(url) = &self.client_metadata_url {
            request = request.with_client_metadata_url(url);
        }
        request
    }
}

/// The person's login for one server: the host's authorizer, rmcp's manager and its tokens.
pub(crate) struct LoginState {
    login: McpOAuthLogin,
    /// `None` only while a login moves it through an `AuthorizationSession`.
    manager: tokio::sync::Mutex<Option<AuthorizationManager>>,
    /// Counts the tokens obtained, so a request refused before another request's login does
    /// not log in again.
    round: AtomicU64,
    /// `true` while the person is asked to authorize: the connect timeout does not run then.
    person: tokio::sync::watch::Sender<bool>,
    /// The manager's authorization states, kept for one more exchange of a code whose first
    /// exchange got no answer.
    states: RetainedStates,
    /// The scopes granted to the tokens read from the token file, which rmcp does not restore:
    /// a step-up before any new grant asks for them too.
    restored_scopes: Vec<String>,
    /// The OAuth requests the address filter refused, told with a discovery's failure.
    refusals: super::http_client::Refusals,
}

/// Sets a flag until dropped, however the wait it covers ends.
struct Raised<'a>(&'a tokio::sync::watch::Sender<bool>);

impl<'a> Raised<'a> {
    fn new(flag: &'a tokio::sync::watch::Sender<bool>) -> Raised<'a> {
        flag.send_replace(true);
        Raised(flag)
    }
}

impl Drop for Raised<'_> {
    fn drop(&mut self) {
        self.0.send_replace(false);
    }
}

fn failed(error: impl fmt::Display) -> AuthError {
    AuthError::AuthorizationFailed(error.to_string())
}

/// What is wrong with `url` as a client ID metadata document's URL, if anything: it must be
/// an `https://` URL with a host and a path other than `/` (rmcp's rule, checked up front).
fn client_metadata_url_problem(url: &str) -> Option<&'static str> {
    let Ok(parsed) = url::Url::parse(url) else {
        return Some("is not a URL");
    };
    if parsed.scheme() != "https" {
        Some("is not an https:// URL")
    } else if parsed.host_str().is_none_or(str::is_empty) {
        Some("names no host")
    } else if parsed.path() == "/" {
        Some("has no path")
    } else {
        None
    }
}

/// `inner` with the person's login for the server at `url`; tokens from the token file are used
/// at once. `person` holds `true` while the authorizer waits for the person. Each OAuth request
/// is bounded by `bound` (see [`super::http_client`]).
///
/// # Errors
/// The URL is not usable, or the token file cannot be read.
pub(crate) async fn login_client<C>(
    inner: C,
    url: &str,
    login: &McpOAuthLogin,
    person: tokio::sync::watch::Sender<bool>,
    bound: Duration,
) -> Result<BearerClient<C, LoginState>, String> {
    // rmcp finds a bad one only when it registers, and says the registration failed.
    if let Some(metadata) = &login.client_metadata_url
        && let Some(problem) = client_metadata_url_problem(metadata)
    {
        return Err(format!(
            "OAuth: the client metadata URL {metadata:?} {problem}: a Client ID Metadata \
             Document is served at an https:// URL with a path"
        ));
    }
    let describe = |error: AuthError| format!("OAuth: {error}");
    let (mut manager, refusals) = super::http_client::manager(url, bound)
        .await
        .map_err(describe)?;
    let states = RetainedStates::default();
    manager.set_state_store(states.clone());
    let mut restored_scopes = Vec::new();
    if let Some(path) = &login.token_file {
        let store = FileTokenStore::new(path.clone());
        if let Some(stored) = store.load().await.map_err(describe)? {
            restored_scopes = stored.granted_scopes;
        }
        manager.set_credential_store(store);
        if manager.initialize_from_store().await.map_err(describe)? {
            // rmcp configures a restored client with the server's URL as its redirect URI and
            // without its secret: a later authorization (a step-up, a login after a refused
            // refresh) must come back to this login's listener, as the client it registered.
            let (client_id, _) = manager.get_credentials().await.map_err(describe)?;
            let mut client = OAuthClientConfig::new(&client_id, login.authorizer.redirect_uri());
            if login.client_id.as_deref() == Some(client_id.as_str())
                && let Some(secret) = &login.client_secret
            {
                client = client.with_client_secret(secret);
            }
            manager.configure_client(client).map_err(describe)?;
        }
    }
    Ok(BearerClient::new(
        inner,
        LoginState {
            login: login.clone(),
            manager: tokio::sync::Mutex::new(Some(manager)),
            round: AtomicU64::new(0),
            person,
            states,
            restored_scopes,
            refusals,
        },
    ))
}

impl LoginState {
    /// The token to send, if there is one yet (refreshed when it is about to expire), and the
    /// round it belongs to.
    async fn token(&self) -> Result<(Option<String>, u64), AuthError> {
        let guard = self.manager.lock().await;
        let round = self.round.load(Ordering::Acquire);
        let manager = guard
            .as_ref()
            .ok_or_else(|| failed("a login failed midway"))?;
        // No token yet, or one that cannot be refreshed (no client configured for it): the
        // request goes without one and the server's 401 starts a login.
        match manager.get_access_token().await {
            Ok(token) => Ok((Some(token), round)),
            Err(AuthError::AuthorizationRequired | AuthError::InternalError(_)) => {
                Ok((None, round))
            }
            Err(error) => Err(error),
        }
    }

    /// After a `401`: a refreshed token when one was refused, else a login seeded by the
    /// challenge. Nothing when another request already got a new token since `round`.
    async fn reauthorize(
        &self,
        round: u64,
        refused: bool,
        challenge: &str,
    ) -> Result<(), AuthError> {
        let mut guard = self.manager.lock().await;
        if self.round.load(Ordering::Acquire) != round {
            return Ok(());
        }
        let manager = guard
            .take()
            .ok_or_else(|| failed("a login failed midway"))?;
        if refused && manager.refresh_token().await.is_ok() {
            *guard = Some(manager);
            self.round.fetch_add(1, Ordering::AcqRel);
            return Ok(());
        }
        let (manager, answer) = self.login(manager, challenge).await;
        *guard = Some(manager);
        answer?;
        self.round.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Discovery from `challenge`, client identification, the person's authorization, the
    /// code exchange. The manager comes back whatever happened.
    async fn login(
        &self,
        mut manager: AuthorizationManager,
        challenge: &str,
    ) -> (AuthorizationManager, Result<(), AuthError>) {
        match discovered(|| manager.resolve_metadata_from_challenge(Some(challenge))).await {
            Ok(resolution) => manager.set_metadata(resolution.metadata),
            Err(error) => return (manager, Err(self.refusals.explain(error))),
        }
        match AuthorizationSession::new(manager, self.login.request()).await {
            Ok(session) => {
                let answer = self
                    .exchange(session.get_authorization_url(), &session.auth_manager)
                    .await;
                (session.auth_manager, answer)
            }
            Err((manager, error)) => (manager, Err(error)),
        }
    }

    /// The person's authorization of `url`, then its code exchanged by `manager`.
    async fn exchange(&self, url: &str, manager: &AuthorizationManager) -> Result<(), AuthError> {
        let redirect = {
            let _waiting = Raised::new(&self.person);
            self.login.authorizer.authorize(url).await.map_err(failed)?
        };
        let callback = AuthorizationCallback::from_redirect_url(&redirect)?;
        let exchange = || {
            manager.exchange_code_for_token_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
        };
        // Sent once more when no answer came (a reused connection the server had closed, see
        // `unanswered`): the person is not asked again for what the network lost.
        let answer = match exchange().await {
            Err(error) if unanswered(&error) && self.states.restore(&callback.csrf_token) => {
                exchange().await
            }
            answer => answer,
        };
        self.states.settle(&callback.csrf_token);
        answer?;
        Ok(())
    }

    /// After a `403 insufficient_scope`: the person is asked for the scopes held plus the
    /// challenged ones (rmcp counts the attempts and refuses past its limit).
    async fn step_up(&self, round: u64, required: &str) -> Result<(), AuthError> {
        let guard = self.manager.lock().await;
        if self.round.load(Ordering::Acquire) != round {
            return Ok(());
        }
        let manager = guard
            .as_ref()
            .ok_or_else(|| failed("a login failed midway"))?;
        // The union of the scopes held and the challenged ones (SEP-2350), the held ones being
        // those of the token file until this run gets a grant of its own.
        let mut asked = required.to_owned();
        if manager.get_current_scopes().await.is_empty() {
            for scope in &self.restored_scopes {
                asked.push(' ');
                asked.push_str(scope);
            }
        }
        let url = manager.request_scope_upgrade(&asked).await?;
        self.exchange(&url, manager).await?;
        self.round.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
}

/// The scope a `403` challenge asks for (`scope="…"`), as rmcp read it or from the header.
fn required_scope(
    error: &rmcp::transport::streamable_http_client::InsufficientScopeError,
) -> String {
    error
        .required_scope
        .clone()
        .or_else(|| {
            let url = url::Url::parse("http://127.0.0.1/").ok()?;
            rmcp::transport::auth::WWWAuthenticateParams::parse(
                &error.www_authenticate_header,
                &url,
            )
            .scope
        })
        .unwrap_or_default()
}

impl Grant for LoginState {
    /// `call` with the person's token; a `401` logs in (or refreshes) and a `403
    /// insufficient_scope` steps up, each at most once, before one more try.
    async fn authorized<E, T, F, Fut>(&self, call: F) -> Result<T, StreamableHttpError<E>>
    where
        E: std::error::Error + Send + Sync + 'static,
        T: Send,
        F: Fn(Option<String>) -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, StreamableHttpError<E>>> + Send,
    {
        let mut challenged = false;
        let mut stepped_up = false;
        loop {
            let (token, round) = self.token().await?;
            match call(token.clone()).await {
                Err(StreamableHttpError::AuthRequired(challenge)) if !challenged => {
                    challenged = true;
                    self.reauthorize(round, token.is_some(), &challenge.www_authenticate_header)
                        .await?;
                }
                Err(StreamableHttpError::InsufficientScope(error)) if !stepped_up => {
                    stepped_up = true;
                    self.step_up(round, &required_scope(&error)).await?;
                }
                answer => return answer,
            }
        }
    }
}
